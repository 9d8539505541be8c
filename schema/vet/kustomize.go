package vet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/schema"
)

// kustomize builds the kustomization in dir with PoolSync's builder (reconciler/build), so that
// vet accepts and rejects what the controller does, with Flux's restrictions: files may be
// shared across the repository (a `../` base or patch) but not read from outside it, remote
// bases, plugins, exec and container functions and Helm are refused. The repository is the Git
// work tree around dir, or top (the path given on the command line) outside one. The output is
// vetted as one unit, and findings point at the source files the resources came from, at the
// line of the field where it is in the source; a field set by a patch or transformer is
// reported at the closest field that is.
func (r *runner) kustomize(dir, top string) error {
	objs, err := build.LoadDir(r.ctx, dir, top)
	var errs manifests.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			r.report.Findings = append(r.report.Findings, schema.Finding{Severity: schema.Error, Rule: "kustomize",
				File: e.File, Line: e.Line, Column: e.Column, Message: e.Message,
				Hint: "`kustomize build` on the directory shows kustomize's own errors the same way"})
		}
		return nil
	} else if err != nil {
		return &InputError{err}
	}
	u := &unit{}
	r.units = append(r.units, u)
	files := map[string]bool{}
	var docs []*manifests.Document
	var sources []build.Source
	for i, o := range objs {
		data, err := sigsyaml.Marshal(o.Object.Object)
		if err != nil {
			return &InputError{err}
		}
		d, err := manifests.ParseChunk(o.Source.File, manifests.Chunk{Index: i + 1, Line: 1, Data: data})
		if err != nil || d == nil {
			continue
		}
		docs = append(docs, d)
		sources = append(sources, o.Source)
		files[o.Source.File] = true
	}
	r.report.Files += 1 + len(files) // the kustomization and the sources of its resources
	i := 0
	r.pool.ValidateDocuments(docs, r.lim, inspect(r.lim), func(d *manifests.Document, fs schema.Findings, checked bool, fact any) {
		src := sources[i]
		i++
		if !checked {
			r.report.Skipped++
			return
		}
		r.report.Checked++
		relocate := func(f schema.Finding) schema.Finding { return relocate(f, src, dir) }
		for _, f := range fs {
			r.report.Findings = append(r.report.Findings, relocate(f))
		}
		if f, ok := fact.(*facts); ok {
			u.docs = append(u.docs, &doc{Document: d, relocate: relocate, facts: f})
		}
	})
	return nil
}

// relocate moves a finding on a built document to the object's source file.
func relocate(f schema.Finding, src build.Source, dir string) schema.Finding {
	line, col, exact := src.Find(f.Selectors)
	f.File, f.Line, f.Column, f.Document = src.File, line, col, 0
	switch {
	case line == 0:
		f.Hint = strings.TrimSpace(f.Hint + " (in a resource that kustomize generated)")
	case !exact && f.Value != "":
		f.Hint = strings.TrimSpace(f.Hint + " (the value is set by the kustomization in " + dir + ")")
	}
	return f
}

// kustomizationIn returns the kustomization file of dir, if it has one.
func kustomizationIn(dir string) string {
	for _, n := range build.KustomizationFiles {
		p := filepath.Join(dir, n)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
