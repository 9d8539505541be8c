package build

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/karpool/karpool/manifests/build/confined"
)

// repo is read access to the files of one repository, by slash-separated path relative to its
// root, and the request that has a confined kustomize build read the same files. PoolSync builds
// from the files of a fetched revision in memory (memRepo); `karpool vet` from a working copy on
// disk (diskRepo), reading only what the build needs. Both confine every read to the root.
type repo interface {
	// read returns a file's content, or errTooLarge when it holds more than max bytes.
	read(name string, max int64) ([]byte, error)
	isFile(name string) bool
	isDir(name string) bool
	// under lists the files below dir ("" for all), recursively.
	under(dir string) []string
	// request is a confined kustomize build of dir reading this repository.
	request(dir string) confined.Request
}

// memRepo is a repository held in memory.
type memRepo struct {
	files map[string][]byte
}

func (m *memRepo) read(name string, max int64) ([]byte, error) {
	d, ok := m.files[name]
	switch {
	case !ok:
		return nil, fs.ErrNotExist
	case int64(len(d)) > max:
		return nil, errTooLarge
	}
	return d, nil
}

func (m *memRepo) isFile(name string) bool { _, ok := m.files[name]; return ok }

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

func (m *memRepo) request(dir string) confined.Request {
	return confined.Request{Files: m.files, Dir: dir}
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

func (d *diskRepo) read(name string, max int64) ([]byte, error) {
	info, err := d.stat(d.abs(name))
	switch {
	case err != nil:
		return nil, err
	case !info.Mode().IsRegular():
		return nil, fs.ErrNotExist
	case info.Size() > max:
		return nil, errTooLarge
	}
	f, err := os.Open(d.abs(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have grown since the stat.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, err
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

func (d *diskRepo) request(dir string) confined.Request {
	return confined.Request{Root: d.root, Dir: dir}
}

var errOutside = errors.New("outside the repository")

// errTooLarge is a file over the per-file cap.
var errTooLarge = errors.New("the file is larger than a build reads")

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
