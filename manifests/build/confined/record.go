package confined

import (
	"io/fs"
	"path/filepath"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Access is what a build reached for: every path its file system was asked about below the
// guard (so only paths the guard let through), the URLs it asked for, the addresses it dialled
// and whether it tried to start a program. Tests check it; a confined build that works as
// designed leaves URLs, Dials and Exec empty and every path below the root.
type Access struct {
	Paths       []string
	URLs, Dials []string
	Exec        bool
}

// recordFS records every path it is asked about, then asks inner.
type recordFS struct {
	filesys.FileSystem
	mu    sync.Mutex
	paths []string
}

func (r *recordFS) saw(p string) {
	r.mu.Lock()
	r.paths = append(r.paths, p)
	r.mu.Unlock()
}

func (r *recordFS) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return uniq(r.paths)
}

func (r *recordFS) ReadFile(p string) ([]byte, error)   { r.saw(p); return r.FileSystem.ReadFile(p) }
func (r *recordFS) Open(p string) (filesys.File, error) { r.saw(p); return r.FileSystem.Open(p) }
func (r *recordFS) IsDir(p string) bool                 { r.saw(p); return r.FileSystem.IsDir(p) }
func (r *recordFS) Exists(p string) bool                { r.saw(p); return r.FileSystem.Exists(p) }
func (r *recordFS) ReadDir(p string) ([]string, error)  { r.saw(p); return r.FileSystem.ReadDir(p) }

func (r *recordFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r.saw(p)
	return r.FileSystem.CleanedAbs(p)
}

func (r *recordFS) Glob(pattern string) ([]string, error) {
	r.saw(filepath.Dir(pattern))
	return r.FileSystem.Glob(pattern)
}

func (r *recordFS) Walk(p string, fn filepath.WalkFunc) error {
	return r.FileSystem.Walk(p, func(q string, info fs.FileInfo, err error) error {
		r.saw(q)
		return fn(q, info, err)
	})
}
