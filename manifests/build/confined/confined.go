// Package confined runs a kustomize build that can reach nothing but the repository it builds.
//
// kustomize itself fetches remote bases with the git program and remote files over HTTP, from
// any field it reads a location from, and it has no deadline and no memory bound: a kustomize
// library call cannot be confined from the outside. So a build runs in a child process of the
// running binary (the same executable, entered through this package's init) that:
//   - reads files only through one file system that serves regular files below the repository
//     root (symbolic links resolved and checked), within per-file and per-build byte caps, and
//     refuses YAML whose aliases expand past a node cap before kustomize parses it;
//   - has no PATH and no HTTP transport (every request is refused and recorded) and, on Linux,
//     a seccomp filter that makes execve, socket and io_uring fail in the kernel;
//   - runs under an address-space limit and is killed at the build's deadline.
//
// Build is the parent's side; the child's side is serve, which runs run, which the package's
// fuzz test also drives in-process.
//
// Why not Flux's secure file system (fluxcd/pkg/kustomize/filesys), the anchor for this: it
// confines the paths kustomize reads through it, as guardFS does, but kustomize's loader clones
// a remote base with the git program and fetches a remote file over HTTP without going through
// any file system, so a no-remote-bases check there comes after the fetch; it has no byte caps,
// no deadline and no memory bound, and it serves a directory on disk where PoolSync builds a
// revision held in memory. Only a process boundary bounds a library call that takes no context.
package confined

import (
	"fmt"
	"time"

	"github.com/karpool/karpool/manifests"
)

// Limits bound one build.
type Limits struct {
	// Timeout is the deadline of the whole build, the child's start included.
	Timeout time.Duration
	// FileBytes caps one file the build reads; ReadBytes all of them together.
	FileBytes, ReadBytes int64
	// Objects caps the objects a build produces, OutputBytes their JSON.
	Objects     int
	OutputBytes int64
	// Memory is the child's address-space limit.
	Memory int64
	// AliasNodes caps the nodes aliases may add to one YAML document when followed.
	AliasNodes int
}

// Defaults are the limits of a build when the caller sets none. They hold honest repositories
// with room to spare (a thousand NodePools build in well under a second and 100 MiB) and stop a
// hostile one long before it hurts the process that asked.
var Defaults = Limits{
	Timeout:     60 * time.Second,
	FileBytes:   10 << 20,
	ReadBytes:   256 << 20,
	Objects:     20_000,
	OutputBytes: 256 << 20,
	Memory:      2 << 30,
	AliasNodes:  manifests.MaxAliasNodes,
}

// WithDefaults fills every unset limit from Defaults.
func (l Limits) WithDefaults() Limits {
	d := Defaults
	if l.Timeout > 0 {
		d.Timeout = l.Timeout
	}
	if l.FileBytes > 0 {
		d.FileBytes = l.FileBytes
	}
	if l.ReadBytes > 0 {
		d.ReadBytes = l.ReadBytes
	}
	if l.Objects > 0 {
		d.Objects = l.Objects
	}
	if l.OutputBytes > 0 {
		d.OutputBytes = l.OutputBytes
	}
	if l.Memory > 0 {
		d.Memory = l.Memory
	}
	if l.AliasNodes > 0 {
		d.AliasNodes = l.AliasNodes
	}
	return d
}

// Request is one build.
type Request struct {
	// Files is the repository in memory (slash-separated paths relative to its root), read
	// when Root is empty.
	Files map[string][]byte
	// Root is a work tree on disk to read instead: absolute, symbolic links resolved.
	Root string
	// Dir is the directory holding the kustomization, relative to the root ("" for the root).
	Dir string
	// Override shows other content for some files (by path relative to the root) without
	// writing them anywhere: the root kustomization with origin annotations added.
	Override map[string][]byte
	Limits   Limits
}

// Object is one built object: its JSON and where kustomize says it came from.
type Object struct {
	JSON []byte
	// OriginPath is the file the object was read from, ConfiguredIn the generator or
	// transformer configuration that made it; both relative to Dir, as kustomize writes them.
	OriginPath, ConfiguredIn string
}

// Result is what a build produced, which files it read (relative to the root, sorted) and
// what it reached for.
type Result struct {
	Objects []Object
	Reads   []string
	Access  Access
}

// Kind says why a build failed.
type Kind string

const (
	// Failed is kustomize's own error: the kustomization is wrong.
	Failed Kind = "Failed"
	// Remote is a remote base or file the build tried to fetch; Ref names it when known.
	Remote Kind = "Remote"
	// Outside is a file outside the repository, or not a regular file, that the build asked for.
	Outside Kind = "Outside"
	// Limit is a cap of Limits that the build reached.
	Limit Kind = "Limit"
	// Timeout is the deadline.
	Timeout Kind = "Timeout"
	// Crashed is a child that ended without an answer.
	Crashed Kind = "Crashed"
)

// Error is a build that failed. File is the file at fault when one is known (relative to the
// root) and Line the line in it, Ref the remote location the build tried to reach, Reads the
// files read until then and Access what the build reached for.
type Error struct {
	Kind    Kind
	Message string
	File    string
	Line    int
	Ref     string
	Reads   []string
	Access  Access
}

func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	case e.File != "":
		return fmt.Sprintf("%s: %s", e.File, e.Message)
	}
	return e.Message
}
