package build

import (
	"context"
	"os"
	"path/filepath"

	"github.com/karpool/karpool/manifests"
)

// LoadDir builds dir, a directory on disk named on a command line, exactly as PoolSync builds
// spec.path: the repository is the Git work tree around dir (a `../` base stays readable, nothing
// outside the tree is), or top outside one. Sources and errors name files as the user would see
// them from where they named dir: dir joined with the path below it. The error is manifests.Errors when
// the input is at fault.
func LoadDir(ctx context.Context, dir, top string) ([]*Object, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root := WorkTree(abs, top)
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	objs, err := BuildDir(ctx, root, filepath.ToSlash(rel))
	show := func(file string) string {
		if file == "" {
			return ""
		}
		p, rerr := filepath.Rel(abs, filepath.Join(root, filepath.FromSlash(file)))
		if rerr != nil {
			return file
		}
		return filepath.Join(dir, p)
	}
	if errs, ok := err.(manifests.Errors); ok {
		for _, e := range errs {
			e.File = show(e.File)
		}
		return nil, errs
	}
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		o.Source.File = show(o.Source.File)
	}
	return objs, nil
}

// LoadFile reads one plain YAML file (no kustomize: a kustomization is a directory's), naming it
// name in sources and errors, within the limits of ctx.
func LoadFile(ctx context.Context, name string, data []byte) ([]*Object, error) {
	b := newBuilder(ctx, &memRepo{files: map[string][]byte{name: data}})
	objs, errs := b.objectsOf(name)
	if len(errs) == 0 {
		errs = b.check(objs)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return objs, nil
}

// WorkTree is the directory tree a kustomization under dir may read: the Git work tree around
// dir, or top outside one (both absolute).
func WorkTree(dir, top string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return top
		}
		d = parent
	}
}
