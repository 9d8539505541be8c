package confined

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/karpool/karpool/manifests"
)

// guardFS is the one file system a build reads through. Every path is checked against the
// root first (on disk with its symbolic links resolved, and the resolved path is what is
// read, so a link cannot be swapped between the check and the read); only regular files are
// served, within the byte caps, and YAML whose aliases expand past the node cap is refused.
// Nothing is ever written. Every file served is recorded, and so is every path refused.
type guardFS struct {
	inner  *recordFS
	root   string // "/" for a repository in memory
	onDisk bool
	limits Limits

	mu      sync.Mutex
	reads   []string
	refused []string
	total   int64
	fault   *Error // the first cap or confinement a read hit, for the answer
}

// newMemFS serves a repository held in memory, with override's content shown for its files.
func newMemFS(files, override map[string][]byte, l Limits) *guardFS {
	mem := filesys.MakeFsInMemory()
	for name, data := range files {
		if o, ok := override[name]; ok {
			data = o
		}
		// Only an impossible name (a file below a file) fails; the build then reports the
		// file as missing.
		_ = mem.WriteFile("/"+name, data)
	}
	return &guardFS{inner: &recordFS{FileSystem: mem}, root: "/", limits: l}
}

// newDiskFS serves the work tree at root (absolute, links resolved), with override's content
// shown for its files.
func newDiskFS(root string, override map[string][]byte, l Limits) *guardFS {
	disk := &overlay{FileSystem: filesys.MakeFsOnDisk(), files: map[string][]byte{}}
	for name, data := range override {
		disk.files[filepath.Join(root, filepath.FromSlash(name))] = data
	}
	return &guardFS{inner: &recordFS{FileSystem: disk}, root: root, onDisk: true, limits: l}
}

var (
	errOutside  = errors.New("outside the repository")
	errReadOnly = errors.New("a build does not write files")
)

// resolve returns the path to use for p, or an error when it leaves the root.
func (g *guardFS) resolve(p string) (string, error) {
	if !g.onDisk {
		p = path.Clean("/" + filepath.ToSlash(p))
		return p, nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if abs != g.root && !strings.HasPrefix(abs, g.root+string(filepath.Separator)) {
		g.refuse(p, &Error{Kind: Outside, Message: fmt.Sprintf("%s is outside the repository: a build reads files under the repository's root only", p)})
		return "", fmt.Errorf("%s: %w", p, errOutside)
	}
	return abs, nil
}

// rel names p relative to the root, for messages and the record.
func (g *guardFS) rel(p string) string {
	r, err := filepath.Rel(g.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

func (g *guardFS) refuse(p string, e *Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = append(g.refused, p)
	if g.fault == nil {
		g.fault = e
	}
}

// ReadFile serves a regular file below the root within the caps.
func (g *guardFS) ReadFile(p string) ([]byte, error) {
	real, err := g.resolve(p)
	if err != nil {
		return nil, err
	}
	name := g.rel(real)
	if g.onDisk {
		info, err := os.Stat(real)
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			e := &Error{Kind: Outside, File: name, Message: "not a regular file: a build reads regular files only"}
			g.refuse(p, e)
			return nil, e
		}
		if err := g.charge(name, info.Size()); err != nil {
			return nil, err
		}
	}
	data, err := g.inner.ReadFile(real)
	if err != nil {
		return nil, err
	}
	if !g.onDisk {
		if err := g.charge(name, int64(len(data))); err != nil {
			return nil, err
		}
	}
	if err := CheckAliases(name, data, g.limits.AliasNodes); err != nil {
		g.refuse(p, err)
		return nil, err
	}
	g.mu.Lock()
	g.reads = append(g.reads, name)
	g.mu.Unlock()
	return data, nil
}

// charge counts a file against the per-file and per-build caps.
func (g *guardFS) charge(name string, size int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var e *Error
	switch {
	case size > g.limits.FileBytes:
		e = &Error{Kind: Limit, File: name, Message: fmt.Sprintf("the file is larger than the %s a build reads from one file", Size(g.limits.FileBytes))}
	case g.total+size > g.limits.ReadBytes:
		e = &Error{Kind: Limit, File: name, Message: fmt.Sprintf("reading it takes the build past %s read in all", Size(g.limits.ReadBytes))}
	default:
		g.total += size
		return nil
	}
	g.refused = append(g.refused, name)
	if g.fault == nil {
		g.fault = e
	}
	return e
}

// Size writes a byte count for messages.
func Size(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// Open is not used by kustomize's build; refusing it keeps every read going through ReadFile
// and its caps, should a later kustomize start to use it.
func (g *guardFS) Open(p string) (filesys.File, error) {
	return nil, fmt.Errorf("%s: opening files is not supported by karpool's build file system", p)
}

func (g *guardFS) IsDir(p string) bool {
	real, err := g.resolve(p)
	return err == nil && g.inner.IsDir(real)
}

func (g *guardFS) Exists(p string) bool {
	real, err := g.resolve(p)
	return err == nil && g.inner.Exists(real)
}

func (g *guardFS) ReadDir(p string) ([]string, error) {
	real, err := g.resolve(p)
	if err != nil {
		return nil, err
	}
	return g.inner.ReadDir(real)
}

// CleanedAbs confirms directories for kustomize's loader; the confirmed directory is the
// resolved one, so the loader's own root checks compare real paths.
func (g *guardFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	real, err := g.resolve(p)
	if err != nil {
		return "", "", err
	}
	return g.inner.CleanedAbs(real)
}

func (g *guardFS) Glob(pattern string) ([]string, error) {
	if _, err := g.resolve(filepath.Dir(pattern)); err != nil {
		return nil, err
	}
	matches, err := g.inner.Glob(pattern)
	if err != nil {
		return nil, err
	}
	out := matches[:0]
	for _, m := range matches {
		if _, err := g.resolve(m); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

func (g *guardFS) Walk(p string, walkFn filepath.WalkFunc) error {
	real, err := g.resolve(p)
	if err != nil {
		return err
	}
	return g.inner.Walk(real, func(q string, info fs.FileInfo, err error) error {
		if _, rerr := g.resolve(q); err == nil && rerr != nil {
			if info != nil && info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return walkFn(q, info, err)
	})
}

func (g *guardFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (g *guardFS) Mkdir(string) error                  { return errReadOnly }
func (g *guardFS) MkdirAll(string) error               { return errReadOnly }
func (g *guardFS) RemoveAll(string) error              { return errReadOnly }
func (g *guardFS) WriteFile(string, []byte) error      { return errReadOnly }

// record returns the files read and the paths refused, each sorted and once.
func (g *guardFS) record() (reads, refused []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return uniq(g.reads), uniq(g.refused)
}

func uniq(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return slices.Compact(out)
}

// overlay shows other content for some files of a file system.
type overlay struct {
	filesys.FileSystem
	files map[string][]byte // by absolute path
}

func (o *overlay) ReadFile(p string) ([]byte, error) {
	if data, ok := o.files[filepath.Clean(p)]; ok {
		return data, nil
	}
	return o.FileSystem.ReadFile(p)
}

// CheckAliases refuses YAML whose aliases add more than max nodes to a document when followed
// (manifests.AliasesAdded), at the alias where the count passes it. Content that is not YAML is left to its
// reader.
func CheckAliases(name string, data []byte, max int) *Error {
	if !bytes.ContainsRune(data, '*') || !bytes.ContainsRune(data, '&') {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return nil
		}
		if n, worst := manifests.AliasesAdded(&doc, max); n > max {
			return &Error{Kind: Limit, File: name, Line: worst.Line, Message: fmt.Sprintf("the YAML aliases expand to more than %d nodes: write the values out instead", max)}
		}
	}
}
