// Package validate checks built objects before anything is applied and locates each problem in the
// repository (file:line:col of the offending field).
//
// Validators are pluggable: Types decodes Karpenter's kinds strictly into karpool's Go types, Schema
// runs the CUE schema of package schema, and DryRun asks the API server (a server-side apply
// dry-run of every object), whose CRD validation and CEL rules are the final word.
package validate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/manifests/build"
)

// Finding is one problem of one object.
type Finding struct {
	// File, Line and Column locate the problem in the repository (Line is 0 when unknown).
	File         string
	Line, Column int
	// Object is Kind/name or Kind/namespace/name.
	Object string
	// Path is the field, Kubernetes style (spec.template.spec.requirements[0].operator); empty
	// for the object as a whole.
	Path    string
	Message string
	// By names the validator: "types", "schema" or "api-server".
	By string
}

// String renders file:line:col: Kind/name: path: message.
func (f Finding) String() string {
	var b strings.Builder
	switch {
	case f.File == "":
	case f.Line == 0:
		b.WriteString(f.File + ": ")
	default:
		fmt.Fprintf(&b, "%s:%d:%d: ", f.File, f.Line, f.Column)
	}
	b.WriteString(f.Object)
	if f.Path != "" {
		b.WriteString(" " + f.Path)
	}
	b.WriteString(": " + f.Message)
	return b.String()
}

// Validator checks objects. Findings are problems of the objects; the error is for a validator that
// could not do its work (an unreachable API server), which says nothing about the objects.
type Validator interface {
	Validate(ctx context.Context, objs []*build.Object) ([]Finding, error)
}

// at makes a finding for a field of an object, located through the object's source.
func at(o *build.Object, path, by, msg string) Finding {
	line, col := o.Source.Locate(path)
	return Finding{File: o.Source.File, Line: line, Column: col, Object: o.ID(), Path: path, Message: msg, By: by}
}

// All runs the validators concurrently (local checks overlap with the API server's) and returns
// every finding, sorted by position and without duplicates: two validators often report the same
// mistake, and the wording of the one listed first is kept.
func All(ctx context.Context, objs []*build.Object, vs ...Validator) ([]Finding, error) {
	found := make([][]Finding, len(vs))
	errs := make([]error, len(vs))
	var wg sync.WaitGroup
	for i, v := range vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i], errs[i] = v.Validate(ctx, objs)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []Finding
	seen := map[string]bool{}
	for _, fs := range found {
		for _, f := range fs {
			key := fmt.Sprintf("%s|%d|%s|%s", f.File, f.Line, f.Object, f.Path)
			if seen[key] {
				continue
			}
			seen[key] = true
			all = append(all, f)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return all, nil
}

// Summary renders the first max findings on one line, for a condition message.
func Summary(fs []Finding, max int) string {
	return manifests.JoinFirst(len(fs), max, func(i int) string { return fs[i].String() })
}
