package vet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/karpool/karpool/schema"
)

// kustomize builds the kustomization in dir (kustomize's own rules: builtin generators and
// transformers only, no plugins, no exec or container functions, no Helm, files loaded only from
// within each kustomization's directory) and vets the output as one unit. Reading is confined to
// the directory tree being vetted: the Git work tree around dir, or dir itself outside one.
// Remote bases and resources are not fetched. Findings point at the source files the resources
// came from (kustomize's origin annotations), at the line of the field where it is in the
// source; a field set by a patch or transformer is reported at the closest field that is.
func (r *runner) kustomize(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return &InputError{err}
	}
	kfile := kustomizationIn(abs)
	display := filepath.Join(dir, filepath.Base(kfile))
	root := confinementRoot(abs)

	// Remote references would make kustomize run git or fetch URLs: refuse them up front.
	if bad := remoteRefs(abs, root, map[string]bool{}); len(bad) > 0 {
		for _, b := range bad {
			f := schema.Finding{Severity: schema.Error, Rule: "kustomize", File: relTo(dir, abs, b.file), Line: b.line, Column: b.col,
				Message: fmt.Sprintf("remote resource %q: karpool vet does not fetch remote bases or URLs", b.ref),
				Hint:    "vet a local checkout of it, or vendor it into the repository"}
			r.report.Findings = append(r.report.Findings, f)
		}
		return nil
	}

	fsys := &confinedFS{root: root, inner: filesys.MakeFsOnDisk(), origins: kfile}
	opts := krusty.MakeDefaultOptions() // root-only load restrictions, plugins disabled
	resMap, err := krusty.MakeKustomizer(opts).Run(fsys, abs)
	if err != nil {
		r.report.Findings = append(r.report.Findings, buildFinding(display, kfile, err))
		return nil
	}
	u := &unit{}
	r.units = append(r.units, u)
	r.report.Files++

	// Each resource: where it came from, then its YAML without the origin annotation.
	type built struct {
		origin *resource.Origin
		data   []byte
	}
	var out []built
	for _, res := range resMap.Resources() {
		o, _ := res.GetOrigin()
		out = append(out, built{origin: o})
	}
	if err := resMap.RemoveOriginAnnotations(); err != nil {
		return &InputError{err}
	}
	var docs []*schema.Document
	var origins []*resource.Origin
	for i, res := range resMap.Resources() {
		data, err := res.AsYAML()
		if err != nil {
			return &InputError{err}
		}
		d, err := schema.ParseChunk(display, schema.Chunk{Index: i + 1, Line: 1, Data: data})
		if err != nil || d == nil {
			continue
		}
		docs = append(docs, d)
		origins = append(origins, out[i].origin)
	}
	sources := &sourceFiles{dir: dir, abs: abs, lim: r.lim, cache: map[string][]*schema.Document{}}
	i := 0
	r.pool.ValidateDocuments(docs, r.lim, inspect(r.lim), func(d *schema.Document, fs schema.Findings, checked bool, fact any) {
		origin := origins[i]
		i++
		if !checked {
			r.report.Skipped++
			return
		}
		r.report.Checked++
		relocate := func(f schema.Finding) schema.Finding { return sources.relocate(f, d, origin, display) }
		for _, f := range fs {
			r.report.Findings = append(r.report.Findings, relocate(f))
		}
		if f, ok := fact.(*facts); ok {
			u.docs = append(u.docs, &doc{Document: d, relocate: relocate, facts: f})
		}
	})
	r.report.Files += sources.read
	return nil
}

// sourceFiles finds built documents in the files they came from.
type sourceFiles struct {
	dir, abs string
	lim      schema.Limits
	cache    map[string][]*schema.Document
	read     int
}

// relocate moves a finding on built document d to its source.
func (s *sourceFiles) relocate(f schema.Finding, d *schema.Document, origin *resource.Origin, display string) schema.Finding {
	if origin == nil || origin.Path == "" || origin.Repo != "" {
		f.File, f.Line, f.Column = display, 0, 0
		f.Hint = strings.TrimSpace(f.Hint + " (in a resource that kustomize generated)")
		return f
	}
	file := filepath.Join(s.dir, origin.Path)
	docs, ok := s.cache[file]
	if !ok {
		if data, err := os.ReadFile(filepath.Join(s.abs, origin.Path)); err == nil {
			docs, _ = schema.ParseDocuments(file, data, s.lim)
			s.read++
		}
		s.cache[file] = docs
	}
	src := matchSource(docs, d)
	if src == nil {
		f.File, f.Line, f.Column = file, 0, 0
		return f
	}
	line, col, exact := src.Locate(f.Selectors)
	f.File, f.Line, f.Column, f.Document = file, line, col, src.Index
	if !exact && f.Value != "" {
		f.Hint = strings.TrimSpace(f.Hint + " (the value is set by the kustomization in " + s.dir + ")")
	}
	return f
}

// matchSource picks the document of a source file that a built document came from: the same kind
// and the name it had before any namePrefix or nameSuffix.
func matchSource(docs []*schema.Document, d *schema.Document) *schema.Document {
	var best *schema.Document
	for _, s := range docs {
		if s.Kind != d.Kind {
			continue
		}
		if s.Name == d.Name {
			return s
		}
		if s.Name != "" && strings.Contains(d.Name, s.Name) && (best == nil || len(s.Name) > len(best.Name)) {
			best = s
		}
	}
	if best != nil {
		return best
	}
	for _, s := range docs {
		if s.Kind == d.Kind {
			return s
		}
	}
	return nil
}

var pathInErrRE = regexp.MustCompile(`'([^']+)'|"([^"]+)"`)

// buildFinding reports a failed kustomize build on the kustomization file, on the line that
// names what failed when the error quotes it.
func buildFinding(display, kfile string, err error) schema.Finding {
	f := schema.Finding{Severity: schema.Error, Rule: "kustomize", File: display, Line: 1, Column: 1,
		Message: "kustomize build failed: " + err.Error(),
		Hint:    "`kustomize build` on the directory shows the same; fix the kustomization or the files it names"}
	data, rerr := os.ReadFile(kfile)
	if rerr != nil {
		return f
	}
	lines := strings.Split(string(data), "\n")
	for _, m := range pathInErrRE.FindAllStringSubmatch(err.Error(), -1) {
		q := m[1] + m[2]
		q = filepath.Base(q)
		if q == "" || q == "." {
			continue
		}
		for i, l := range lines {
			if c := strings.Index(l, q); c >= 0 && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				f.Line, f.Column = i+1, c+1
				return f
			}
		}
	}
	return f
}

// confinementRoot is the directory tree kustomize may read: the Git work tree around dir, or dir.
func confinementRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// confinedFS is the on-disk file system, read-only and limited to a directory tree (symbolic
// links resolved). It adds kustomize's originAnnotations build option to the root kustomization,
// so that built resources say which file they came from.
type confinedFS struct {
	root    string
	inner   filesys.FileSystem
	origins string // the root kustomization file
}

var errOutside = errors.New("outside the directory tree being vetted")
var errReadOnly = errors.New("karpool vet does not write files")

func (c *confinedFS) check(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	root := c.root
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	if abs != root && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
		return fmt.Errorf("%s: %w (%s)", path, errOutside, c.root)
	}
	return nil
}

func (c *confinedFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (c *confinedFS) Mkdir(string) error                  { return errReadOnly }
func (c *confinedFS) MkdirAll(string) error               { return errReadOnly }
func (c *confinedFS) RemoveAll(string) error              { return errReadOnly }
func (c *confinedFS) WriteFile(string, []byte) error      { return errReadOnly }

func (c *confinedFS) Open(path string) (filesys.File, error) {
	if err := c.check(path); err != nil {
		return nil, err
	}
	return c.inner.Open(path)
}

func (c *confinedFS) IsDir(path string) bool { return c.check(path) == nil && c.inner.IsDir(path) }

func (c *confinedFS) ReadDir(path string) ([]string, error) {
	if err := c.check(path); err != nil {
		return nil, err
	}
	return c.inner.ReadDir(path)
}

func (c *confinedFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	if err := c.check(path); err != nil {
		return "", "", err
	}
	return c.inner.CleanedAbs(path)
}

func (c *confinedFS) Exists(path string) bool { return c.check(path) == nil && c.inner.Exists(path) }

func (c *confinedFS) Glob(pattern string) ([]string, error) {
	if err := c.check(filepath.Dir(pattern)); err != nil {
		return nil, err
	}
	m, err := c.inner.Glob(pattern)
	if err != nil {
		return nil, err
	}
	out := m[:0]
	for _, p := range m {
		if c.check(p) == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *confinedFS) ReadFile(path string) ([]byte, error) {
	if err := c.check(path); err != nil {
		return nil, err
	}
	data, err := c.inner.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if abs, _ := filepath.Abs(path); abs == c.origins {
		data = withOriginAnnotations(data)
	}
	return data, nil
}

func (c *confinedFS) Walk(path string, walkFn filepath.WalkFunc) error {
	if err := c.check(path); err != nil {
		return err
	}
	return c.inner.Walk(path, func(p string, info fs.FileInfo, err error) error {
		if err == nil && c.check(p) != nil {
			if info != nil && info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return walkFn(p, info, err)
	})
}

// withOriginAnnotations adds originAnnotations to a kustomization's buildMetadata.
func withOriginAnnotations(data []byte) []byte {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil || n.Kind != yaml.DocumentNode || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
		return data
	}
	m := n.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "buildMetadata" {
			list := m.Content[i+1]
			for _, e := range list.Content {
				if e.Value == "originAnnotations" {
					return data
				}
			}
			list.Kind = yaml.SequenceNode
			list.Content = append(list.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "originAnnotations"})
			out, err := yaml.Marshal(&n)
			if err != nil {
				return data
			}
			return out
		}
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Value: "buildMetadata"},
		&yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "originAnnotations"}}})
	out, err := yaml.Marshal(&n)
	if err != nil {
		return data
	}
	return out
}

// remoteRef is a reference in a kustomization to something kustomize would fetch.
type remoteRef struct {
	file      string
	line, col int
	ref       string
}

// remoteRefs walks the kustomization in dir and the local ones it builds on, and returns the
// references kustomize would fetch: git repositories and http(s) URLs.
func remoteRefs(dir, root string, seen map[string]bool) []remoteRef {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	kfile := kustomizationIn(dir)
	if kfile == "" {
		return nil
	}
	data, err := os.ReadFile(kfile)
	if err != nil {
		return nil
	}
	var n yaml.Node
	if yaml.Unmarshal(data, &n) != nil || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	var out []remoteRef
	check := func(v *yaml.Node, localDir bool) {
		if v == nil || v.Kind != yaml.ScalarNode || strings.Contains(v.Value, "\n") {
			return
		}
		if isRemote(v.Value) {
			out = append(out, remoteRef{kfile, v.Line, v.Column, v.Value})
			return
		}
		if localDir {
			sub := filepath.Join(dir, v.Value)
			if info, err := os.Stat(sub); err == nil && info.IsDir() && strings.HasPrefix(sub, root) {
				out = append(out, remoteRefs(sub, root, seen)...)
			}
		}
	}
	m := n.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i].Value, m.Content[i+1]
		switch key {
		case "resources", "bases", "components":
			for _, e := range val.Content {
				check(e, true)
			}
		case "crds", "configurations", "generators", "transformers", "validators", "patchesStrategicMerge":
			for _, e := range val.Content {
				check(e, false)
			}
		case "patches", "patchesJson6902", "replacements":
			for _, e := range val.Content {
				for j := 0; j+1 < len(e.Content); j += 2 {
					if e.Content[j].Value == "path" {
						check(e.Content[j+1], false)
					}
				}
			}
		case "openapi":
			for j := 0; j+1 < len(val.Content); j += 2 {
				if val.Content[j].Value == "path" {
					check(val.Content[j+1], false)
				}
			}
		case "configMapGenerator", "secretGenerator":
			for _, e := range val.Content {
				for j := 0; j+1 < len(e.Content); j += 2 {
					switch e.Content[j].Value {
					case "files", "envs":
						for _, x := range e.Content[j+1].Content {
							check(x, false)
						}
					case "env":
						check(e.Content[j+1], false)
					}
				}
			}
		case "helmCharts", "helmChartInflationGenerator":
			out = append(out, remoteRef{kfile, m.Content[i].Line, m.Content[i].Column, key})
		}
	}
	return out
}

// isRemote reports whether kustomize would fetch ref: a URL, a github.com path, or an scp-style
// git address (after kustomize's own rules in api/internal/git).
func isRemote(ref string) bool {
	s := strings.ToLower(strings.TrimSpace(ref))
	s = strings.TrimPrefix(s, "git::")
	if strings.Contains(s, "://") {
		return true
	}
	if strings.HasPrefix(s, "github.com/") || strings.HasPrefix(s, "github.com:") {
		return true
	}
	if at := strings.Index(s, "@"); at > 0 && !strings.Contains(s[:at], "/") && strings.Contains(s[at:], ":") {
		return true
	}
	return false
}

// relTo shows an absolute path under abs as it would look under dir.
func relTo(dir, abs, path string) string {
	if rel, err := filepath.Rel(abs, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join(dir, rel)
	}
	return path
}
