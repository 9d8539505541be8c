package build

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// repo is read access to the files of one repository, by slash-separated path relative to its
// root, and the file system kustomize reads it through. PoolSync builds from the files of a
// fetched revision in memory (memRepo); `karpool vet` from a working copy on disk (diskRepo),
// reading only what the build needs. Both confine every read to the repository root.
type repo interface {
	read(name string) ([]byte, bool)
	isFile(name string) bool
	isDir(name string) bool
	// under lists the files below dir ("" for all), recursively.
	under(dir string) []string
	// kustomizeFS is the file system for kustomize and where the repository root is in it.
	kustomizeFS() (filesys.FileSystem, string)
}

// memRepo is a repository held in memory.
type memRepo struct {
	files map[string][]byte
	fs    filesys.FileSystem // built on first use
}

func (m *memRepo) read(name string) ([]byte, bool) { d, ok := m.files[name]; return d, ok }
func (m *memRepo) isFile(name string) bool         { _, ok := m.files[name]; return ok }

func (m *memRepo) isDir(d string) bool {
	if d == "" {
		return len(m.files) > 0
	}
	for name := range m.files {
		if strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

func (m *memRepo) under(dir string) []string {
	var names []string
	for name := range m.files {
		if dir == "" || strings.HasPrefix(name, dir+"/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// kustomizeFS copies the repository into an in-memory file system: it holds the repository and
// nothing else, so kustomize cannot read anything outside it.
func (m *memRepo) kustomizeFS() (filesys.FileSystem, string) {
	if m.fs == nil {
		fsys := filesys.MakeFsInMemory()
		for name, data := range m.files {
			if err := fsys.WriteFile("/"+name, data); err != nil {
				// Only an impossible name (a file below a file) fails; kustomize then reports
				// the file as missing.
				continue
			}
		}
		m.fs = fsys
	}
	return m.fs, "/"
}

// diskRepo is a working copy on disk, read-only and confined to its root (symbolic links
// resolved before the check).
type diskRepo struct {
	root string // absolute, symbolic links resolved
}

func newDiskRepo(root string) (*diskRepo, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return &diskRepo{root: abs}, nil
}

func (d *diskRepo) abs(name string) string { return filepath.Join(d.root, filepath.FromSlash(name)) }

func (d *diskRepo) read(name string) ([]byte, bool) {
	if !d.isFile(name) {
		return nil, false
	}
	data, err := os.ReadFile(d.abs(name))
	return data, err == nil
}

func (d *diskRepo) isFile(name string) bool {
	info, err := d.stat(d.abs(name))
	return err == nil && info.Mode().IsRegular()
}

func (d *diskRepo) isDir(name string) bool {
	info, err := d.stat(d.abs(name))
	return err == nil && info.IsDir()
}

func (d *diskRepo) under(dir string) []string {
	var names []string
	_ = filepath.WalkDir(d.abs(dir), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() && e.Name() == ".git" {
			return filepath.SkipDir
		}
		if rel, rerr := filepath.Rel(d.root, p); rerr == nil && e.Type().IsRegular() {
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	return names
}

func (d *diskRepo) kustomizeFS() (filesys.FileSystem, string) {
	return &confinedFS{root: d.root, inner: filesys.MakeFsOnDisk()}, d.root
}

var errOutside = errors.New("outside the repository")

// stat is os.Stat for paths inside the repository.
func (d *diskRepo) stat(p string) (fs.FileInfo, error) {
	if err := confine(d.root, p); err != nil {
		return nil, err
	}
	return os.Stat(p)
}

// confine checks that path, with symbolic links resolved, is root or below it.
func confine(root, p string) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if abs != root && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
		return fmt.Errorf("%s: %w (%s)", p, errOutside, root)
	}
	return nil
}

// confinedFS is the on-disk file system, read-only and limited to the repository.
type confinedFS struct {
	root  string
	inner filesys.FileSystem
}

var errReadOnly = errors.New("a build does not write files")

func (c *confinedFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (c *confinedFS) Mkdir(string) error                  { return errReadOnly }
func (c *confinedFS) MkdirAll(string) error               { return errReadOnly }
func (c *confinedFS) RemoveAll(string) error              { return errReadOnly }
func (c *confinedFS) WriteFile(string, []byte) error      { return errReadOnly }

func (c *confinedFS) Open(p string) (filesys.File, error) {
	if err := confine(c.root, p); err != nil {
		return nil, err
	}
	return c.inner.Open(p)
}

func (c *confinedFS) IsDir(p string) bool  { return confine(c.root, p) == nil && c.inner.IsDir(p) }
func (c *confinedFS) Exists(p string) bool { return confine(c.root, p) == nil && c.inner.Exists(p) }

func (c *confinedFS) ReadDir(p string) ([]string, error) {
	if err := confine(c.root, p); err != nil {
		return nil, err
	}
	return c.inner.ReadDir(p)
}

func (c *confinedFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if err := confine(c.root, p); err != nil {
		return "", "", err
	}
	return c.inner.CleanedAbs(p)
}

func (c *confinedFS) Glob(pattern string) ([]string, error) {
	if err := confine(c.root, filepath.Dir(pattern)); err != nil {
		return nil, err
	}
	m, err := c.inner.Glob(pattern)
	if err != nil {
		return nil, err
	}
	out := m[:0]
	for _, p := range m {
		if confine(c.root, p) == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *confinedFS) ReadFile(p string) ([]byte, error) {
	if err := confine(c.root, p); err != nil {
		return nil, err
	}
	return c.inner.ReadFile(p)
}

func (c *confinedFS) Walk(p string, walkFn filepath.WalkFunc) error {
	if err := confine(c.root, p); err != nil {
		return err
	}
	return c.inner.Walk(p, func(q string, info fs.FileInfo, err error) error {
		if err == nil && confine(c.root, q) != nil {
			if info != nil && info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return walkFn(q, info, err)
	})
}

// withFile is a file system that shows other content for one file: the root kustomization
// with originAnnotations added, without writing it anywhere.
type withFile struct {
	filesys.FileSystem
	path string
	data []byte
}

func (w *withFile) ReadFile(p string) ([]byte, error) {
	if path.Clean(p) == w.path {
		return w.data, nil
	}
	return w.FileSystem.ReadFile(p)
}
