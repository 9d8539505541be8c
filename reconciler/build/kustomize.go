package build

import (
	"fmt"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/karpool/karpool/internal/suggest"
)

// kustomizeMu serialises kustomize builds: kustomize keeps process-wide state (its OpenAPI schema
// among others) that concurrent builds would race on.
var kustomizeMu sync.Mutex

const originAnnotation = "config.kubernetes.io/origin"

// kustomize builds the kustomization in dir.
func (b *builder) kustomize(dir string) (objs []*Object, errs Errors) {
	kfile := b.kustomization(dir)
	if errs := b.lint(dir, map[string]bool{}); len(errs) > 0 {
		return nil, errs
	}
	fsys, root := b.repo.kustomizeFS()
	data, keepOrigin, err := withOriginAnnotations(b.docs[kfile][0])
	if err != nil {
		return nil, Errors{{File: kfile, Message: err.Error()}}
	}
	fsys = &withFile{FileSystem: fsys, path: path.Join(root, kfile), data: data}

	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			objs, errs = nil, Errors{{File: kfile, Message: fmt.Sprintf("kustomize build failed unexpectedly (panic: %v)", r)}}
		}
	}()
	opts := krusty.MakeDefaultOptions()
	// The file system holds the repository and nothing else, so "no restriction" confines loads to
	// the repository root while allowing a base to share files with its overlays, as Flux does.
	opts.LoadRestrictions = types.LoadRestrictionsNone
	opts.PluginConfig = types.DisabledPluginConfig()
	resMap, err := krusty.MakeKustomizer(opts).Run(fsys, path.Join(root, dir))
	if err != nil {
		return nil, Errors{b.buildFailure(kfile, err)}
	}
	for _, res := range resMap.Resources() {
		origin, err := res.GetOrigin()
		if err != nil {
			return nil, Errors{{File: kfile, Message: fmt.Sprintf("reading the origin of %s: %v", res.CurId(), err)}}
		}
		// Through JSON, so that numbers are int64 and float64 as everywhere else in Kubernetes.
		js, err := res.MarshalJSON()
		if err != nil {
			return nil, Errors{{File: kfile, Message: fmt.Sprintf("converting %s: %v", res.CurId(), err)}}
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, Errors{{File: kfile, Message: fmt.Sprintf("converting %s: %v", res.CurId(), err)}}
		}
		if !keepOrigin {
			dropAnnotation(u, originAnnotation)
		}
		objs = append(objs, &Object{Object: u, Source: b.sourceOf(dir, kfile, origin, u)})
	}
	return objs, nil
}

// withOriginAnnotations returns the kustomization with buildMetadata [originAnnotations] added, so
// that every built object says which file it came from; keep says whether the user asked for the
// annotation already (and so wants it on the objects).
func withOriginAnnotations(root *yaml.Node) (data []byte, keep bool, err error) {
	k := cloneNode(root)
	var meta *yaml.Node
	for i := 0; i+1 < len(k.Content); i += 2 {
		if k.Content[i].Value == "buildMetadata" {
			meta = k.Content[i+1]
		}
	}
	if meta == nil {
		meta = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		k.Content = append(k.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "buildMetadata"}, meta)
	}
	for _, c := range meta.Content {
		if c.Value == types.OriginAnnotations {
			keep = true
		}
	}
	if !keep {
		meta.Content = append(meta.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: types.OriginAnnotations})
	}
	data, err = yaml.Marshal(k)
	return data, keep, err
}

func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		c.Content[i] = cloneNode(ch)
	}
	return &c
}

func dropAnnotation(u *unstructured.Unstructured, key string) {
	a := u.GetAnnotations()
	if _, ok := a[key]; !ok {
		return
	}
	delete(a, key)
	if len(a) == 0 {
		a = nil
	}
	u.SetAnnotations(a)
}

// sourceOf finds the document an object of a kustomize build came from. The origin path is
// relative to the kustomization that was built; within the file, the document is the one with the
// object's kind and name, allowing for a namePrefix or nameSuffix.
func (b *builder) sourceOf(dir, kfile string, origin *resource.Origin, u *unstructured.Unstructured) Source {
	if origin == nil {
		return Source{File: kfile}
	}
	if origin.Path == "" {
		if origin.ConfiguredIn != "" {
			return Source{File: path.Join(dir, origin.ConfiguredIn)}
		}
		return Source{File: kfile}
	}
	file := path.Join(dir, origin.Path)
	docs, err := b.parse(file)
	if err != nil || len(docs) == 0 {
		return Source{File: file}
	}
	var best *yaml.Node
	bestLen := -1
	for _, d := range docs {
		if d.Kind != yaml.MappingNode || scalarField(d, "kind") != u.GetKind() {
			continue
		}
		name := ""
		if md := mapField(d, "metadata"); md != nil {
			name = scalarField(md, "name")
		}
		score := 0
		switch {
		case name == u.GetName():
			score = len(name) + 1_000_000
		case name != "" && strings.Contains(u.GetName(), name):
			score = len(name)
		}
		if score > bestLen {
			best, bestLen = d, score
		}
	}
	if best == nil {
		best = docs[0]
	}
	return Source{File: file, Line: best.Line, Column: best.Column, doc: best}
}

func mapField(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.MappingNode {
			return m.Content[i+1]
		}
	}
	return nil
}

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
func (b *builder) lint(dir string, seen map[string]bool) Errors {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	kfile := b.kustomization(dir)
	docs, perr := b.parse(kfile)
	if perr != nil {
		return Errors{perr}
	}
	if len(docs) != 1 || docs[0].Kind != yaml.MappingNode {
		return Errors{{File: kfile, Line: 1, Column: 1, Message: "a kustomization must be a single YAML mapping"}}
	}
	var errs Errors
	at := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, &Error{File: kfile, Line: n.Line, Column: n.Column, Message: fmt.Sprintf(format, args...)})
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
		case "generators", "transformers", "validators", "configurations":
			// Local entries are builtin plugin configurations (plugins themselves are off).
			for _, e := range seqOf(val) {
				if e.Kind == yaml.ScalarNode && remote(e.Value) {
					at(e, "remote %s entry %q is not allowed: copy it into the repository", key.Value, e.Value)
				}
			}
		case "replacements":
			for _, r := range seqOf(val) {
				if p := mapValue(r, "path"); p != nil {
					b.lintFile(dir, p, at)
				}
			}
		case "openapi":
			if p := mapValue(val, "path"); p != nil {
				b.lintFile(dir, p, at)
			}
		case "helmCharts", "helmChartInflationGenerator", "helmGlobals":
			at(key, "Helm charts are not supported: render the chart into the repository (helm template) and list the output under resources")
		}
	}
	return errs
}

// lintResource checks one entry of resources, bases or components.
func (b *builder) lintResource(dir, kfile string, n *yaml.Node, seen map[string]bool) Errors {
	fail := func(format string, args ...any) Errors {
		return Errors{{File: kfile, Line: n.Line, Column: n.Column, Message: fmt.Sprintf(format, args...)}}
	}
	if n.Kind != yaml.ScalarNode || n.Value == "" {
		return fail("expected the path of a file or directory")
	}
	if remote(n.Value) {
		return fail("remote resource %q is not allowed: copy it into the repository and refer to the copy", n.Value)
	}
	p := path.Join(dir, n.Value)
	if p == ".." || strings.HasPrefix(p, "../") {
		return fail("%q points outside the repository", n.Value)
	}
	if b.repo.isFile(p) {
		if _, err := b.parse(p); err != nil {
			return Errors{err}
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
	if remote(n.Value) {
		at(n, "remote file %q is not allowed: copy it into the repository", n.Value)
		return
	}
	p := path.Join(dir, n.Value)
	switch {
	case p == ".." || strings.HasPrefix(p, "../"):
		at(n, "%q points outside the repository: kustomize reads files from inside the repository only, as Flux does", n.Value)
	case !b.repo.isFile(p):
		at(n, "file %q not found in the repository (looked for %s)", n.Value, p)
	}
}

// remote reports whether kustomize would fetch ref rather than read it from the repository: a
// URL, a github.com path, an scp-style git address or a ?ref= query (kustomize's own rules, in
// api/internal/git).
func remote(ref string) bool {
	s := strings.ToLower(strings.TrimSpace(ref))
	s = strings.TrimPrefix(s, "git::")
	switch {
	case strings.Contains(s, "://"), strings.Contains(s, "?ref="),
		strings.HasPrefix(s, "github.com/"), strings.HasPrefix(s, "github.com:"):
		return true
	}
	at := strings.Index(s, "@")
	return at > 0 && !strings.Contains(s[:at], "/") && strings.Contains(s[at:], ":")
}

var quotedRE = regexp.MustCompile(`'([^']+)'|"([^"]+)"`)

// buildFailure reports kustomize's own error, whose text carries no position, on the
// kustomization: at the line that names what failed when the error quotes it.
func (b *builder) buildFailure(kfile string, err error) *Error {
	e := &Error{File: kfile, Message: "kustomize build failed: " + strings.ReplaceAll(err.Error(), "\n", " ")}
	data, _ := b.repo.read(kfile)
	lines := strings.Split(string(data), "\n")
	for _, m := range quotedRE.FindAllStringSubmatch(err.Error(), -1) {
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

// mapValue returns the value of key in a mapping node, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
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
