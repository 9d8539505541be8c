package build

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/manifests/build/confined"
)

// buildError turns a failed confined build into an error at the file and line at fault.
func (b *builder) buildError(kfile string, err error) *manifests.Error {
	var ce *confined.Error
	if !errors.As(err, &ce) {
		return &manifests.Error{File: kfile, Message: "could not run the kustomize build: " + err.Error()}
	}
	switch ce.Kind {
	case confined.Failed:
		return b.buildFailure(kfile, ce.Message)
	case confined.Remote:
		if e := b.locateRemote(ce); e != nil {
			return e
		}
		return &manifests.Error{File: kfile, Message: ce.Message + "; karpool builds read the repository only: copy remote bases and files into the repository"}
	case confined.Limit, confined.Outside:
		if ce.File != "" {
			e := &manifests.Error{File: ce.File, Line: ce.Line, Message: ce.Message}
			if e.Line > 0 {
				e.Column = 1
			}
			return e
		}
	}
	return &manifests.Error{File: kfile, Message: ce.Message}
}

// locateRemote finds, in the files the build read, the remote location it tried to reach:
// the URL the build asked for when it is known, else the first value kustomize would fetch.
// The checks before the build (remoteLocations) report these already; this covers whatever
// they miss, so that the user still gets a line.
func (b *builder) locateRemote(ce *confined.Error) *manifests.Error {
	for _, want := range []string{ce.Ref, ""} {
		for _, f := range ce.Reads {
			data, err := b.repo.read(f, b.limits.FileBytes)
			if err != nil {
				continue
			}
			if line, col, loc := findRemote(string(data), want); line > 0 {
				return &manifests.Error{File: f, Line: line, Column: col, Message: fmt.Sprintf("remote location %q: karpool builds read the repository only (no remote bases, files or URLs); copy what it points to into the repository and refer to the copy", loc)}
			}
		}
	}
	return nil
}

var tokenRE = regexp.MustCompile(`[^\s'"\[\]{},]+`)

// findRemote returns the position of want in text, or, when want is "", of the first token
// kustomize would fetch.
func findRemote(text, want string) (line, col int, loc string) {
	for i, l := range strings.Split(text, "\n") {
		if want != "" {
			if c := strings.Index(l, want); c >= 0 {
				return i + 1, c + 1, want
			}
			continue
		}
		for _, m := range tokenRE.FindAllStringIndex(l, -1) {
			if loc, ok := remoteValue(strings.TrimSuffix(l[m[0]:m[1]], ":")); ok {
				return i + 1, m[0] + 1, loc
			}
		}
	}
	return 0, 0, ""
}

var quotedRE = regexp.MustCompile(`'([^']+)'|"([^"]+)"`)

// buildFailure reports kustomize's own error, whose text carries no position, on the
// kustomization: at the line that names what failed when the error quotes it.
func (b *builder) buildFailure(kfile, msg string) *manifests.Error {
	e := &manifests.Error{File: kfile, Message: "kustomize build failed: " + msg}
	data, _ := b.repo.read(kfile, b.limits.FileBytes)
	lines := strings.Split(string(data), "\n")
	for _, m := range quotedRE.FindAllStringSubmatch(msg, -1) {
		q := path.Base(m[1] + m[2])
		if q == "." || q == "/" {
			continue
		}
		for i, l := range lines {
			if c := strings.Index(l, q); c >= 0 && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				e.Line, e.Column = i+1, c+1
				return e
			}
		}
	}
	return e
}
