package build

import (
	"fmt"
	"path"
	"reflect"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/karpool/karpool/internal/suggest"
	"github.com/karpool/karpool/manifests"
)

// kustomizationFields are the top-level fields kustomize knows, from its own type.
var kustomizationFields = func() map[string]bool {
	fields := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("json"), ",")
			if f.Anonymous && (tag[0] == "" || len(tag) > 1 && tag[1] == "inline") {
				walk(f.Type)
				continue
			}
			if tag[0] != "" && tag[0] != "-" {
				fields[tag[0]] = true
			}
		}
	}
	walk(reflect.TypeOf(types.Kustomization{}))
	return fields
}()

// lint checks the kustomization in dir and, recursively, those it refers to.
func (b *builder) lint(dir string, seen map[string]bool) manifests.Errors {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	kfile := b.kustomization(dir)
	docs, perr := b.parse(kfile)
	if perr != nil {
		return manifests.Errors{perr}
	}
	if len(docs) != 1 || docs[0].Kind != yaml.MappingNode {
		return manifests.Errors{{File: kfile, Line: 1, Column: 1, Message: "a kustomization must be a single YAML mapping"}}
	}
	if errs := b.remoteLocations(dir, kfile, docs[0], seen); len(errs) > 0 {
		return errs
	}
	var errs manifests.Errors
	at := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, &manifests.Error{File: kfile, Line: n.Line, Column: n.Column, Message: fmt.Sprintf(format, args...)})
	}
	root := docs[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		if !kustomizationFields[key.Value] {
			at(key, "unknown field %q in the kustomization%s", key.Value, didYouMean(key.Value))
			continue
		}
		switch key.Value {
		case "resources", "bases", "components":
			for _, e := range seqOf(val) {
				errs = append(errs, b.lintResource(dir, kfile, e, seen)...)
			}
		case "crds":
			for _, e := range seqOf(val) {
				b.lintFile(dir, e, at)
			}
		case "patches":
			for _, p := range seqOf(val) {
				if p.Kind == yaml.MappingNode {
					for j := 0; j+1 < len(p.Content); j += 2 {
						if p.Content[j].Value == "path" {
							b.lintFile(dir, p.Content[j+1], at)
						}
					}
				}
			}
		case "patchesStrategicMerge":
			for _, p := range seqOf(val) {
				// An entry is either a file name or an inline patch.
				if p.Kind == yaml.ScalarNode && !strings.ContainsAny(p.Value, ":\n") {
					b.lintFile(dir, p, at)
				}
			}
		case "configMapGenerator", "secretGenerator":
			for _, g := range seqOf(val) {
				for j := 0; g.Kind == yaml.MappingNode && j+1 < len(g.Content); j += 2 {
					switch g.Content[j].Value {
					case "files", "envs":
						for _, f := range seqOf(g.Content[j+1]) {
							f2 := *f
							if _, p, ok := strings.Cut(f.Value, "="); ok {
								f2.Value = p
							}
							b.lintFile(dir, &f2, at)
						}
					case "env":
						b.lintFile(dir, g.Content[j+1], at)
					}
				}
			}
		case "replacements":
			for _, r := range seqOf(val) {
				if p := manifests.Field(r, "path"); p != nil {
					b.lintFile(dir, p, at)
				}
			}
		case "openapi":
			if p := manifests.Field(val, "path"); p != nil {
				b.lintFile(dir, p, at)
			}
		case "helmCharts", "helmChartInflationGenerator", "helmGlobals":
			at(key, "Helm charts are not supported: render the chart into the repository (helm template) and list the output under resources")
		}
	}
	return errs
}

// lintResource checks one entry of resources, bases or components.
func (b *builder) lintResource(dir, kfile string, n *yaml.Node, seen map[string]bool) manifests.Errors {
	fail := func(format string, args ...any) manifests.Errors {
		return manifests.Errors{{File: kfile, Line: n.Line, Column: n.Column, Message: fmt.Sprintf(format, args...)}}
	}
	if n.Kind != yaml.ScalarNode || n.Value == "" {
		return fail("expected the path of a file or directory")
	}
	p, outside := within(dir, n.Value)
	if outside != "" {
		return fail("%q %s", n.Value, outside)
	}
	if b.repo.isFile(p) {
		if _, err := b.parse(p); err != nil {
			return manifests.Errors{err}
		}
		return nil
	}
	if b.repo.isDir(p) {
		if b.kustomization(p) == "" {
			return fail("directory %q has no kustomization.yaml; add one or list its files one by one", n.Value)
		}
		return b.lint(p, seen)
	}
	if first, _, _ := strings.Cut(n.Value, "/"); strings.Contains(first, ".") && first != "." && first != ".." && strings.Contains(n.Value, "/") {
		return fail("%q is not in the repository; if it is a remote base, remote bases are not allowed: copy it into the repository", n.Value)
	}
	return fail("%q not found in the repository (looked for %s)", n.Value, p)
}

// lintFile checks that a file referred to by a kustomization exists.
func (b *builder) lintFile(dir string, n *yaml.Node, at func(*yaml.Node, string, ...any)) {
	if n.Kind != yaml.ScalarNode {
		at(n, "expected a file name")
		return
	}
	p, outside := within(dir, n.Value)
	switch {
	case outside != "":
		at(n, "%q %s: kustomize reads files from inside the repository only, as Flux does", n.Value, outside)
	case !b.repo.isFile(p):
		at(n, "file %q not found in the repository (looked for %s)", n.Value, p)
	}
}

// within resolves a path a kustomization in dir names; outside says how it leaves the
// repository, if it does.
func within(dir, name string) (p, outside string) {
	if path.IsAbs(name) {
		return "", "is an absolute path, outside the repository (kustomize paths are relative to the kustomization)"
	}
	p = path.Join(dir, name)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", "points outside the repository"
	}
	return p, ""
}

func seqOf(n *yaml.Node) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// didYouMean names the known field closest to a misspelt one.
func didYouMean(field string) string {
	names := make([]string, 0, len(kustomizationFields))
	for f := range kustomizationFields {
		names = append(names, f)
	}
	sort.Strings(names)
	best := suggest.Closest(field, names)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
