package build

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/resource"

	"github.com/karpool/karpool/manifests"
)

// remoteLocations reports, at its file:line:col, every value of the kustomization root (in
// file, of directory dir) that kustomize would fetch instead of reading it from the repository.
// It does not list the fields kustomize reads locations from: every scalar is checked, at any
// depth, except the values of label and annotation maps (which kustomize only copies onto
// objects), so a field a later kustomize adds is covered too. Inline generator and transformer
// configurations, the files holding such configurations and the kustomizations of the
// directories any value names are checked the same way. The build itself cannot fetch anything
// (package confined); this is where a user learns which line to change.
func (b *builder) remoteLocations(dir, file string, root *yaml.Node, seen map[string]bool) manifests.Errors {
	var errs manifests.Errors
	followed := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, off offset)
	walk = func(n *yaml.Node, off offset) {
		switch n.Kind {
		case yaml.AliasNode:
			// An alias may use a value written under a label map: check what it stands for,
			// once (the alias cap bounds how much that is).
			if n.Alias != nil && !followed[n.Alias] {
				followed[n.Alias] = true
				walk(n.Alias, offset{})
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if copiedOnly[n.Content[i].Value] && n.Content[i+1].Kind == yaml.MappingNode {
					continue
				}
				walk(n.Content[i+1], off)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, off)
			}
		case yaml.ScalarNode:
			errs = append(errs, b.remoteScalar(dir, file, n, off, walk, seen)...)
		}
	}
	walk(root, offset{})
	return errs
}

// offset places the nodes of a document written inside a scalar of file: its first line is
// line+1 of the file, indented by col.
type offset struct{ line, col int }

func (o offset) at(n *yaml.Node) (line, col int) { return o.line + n.Line, o.col + n.Column }

// copiedOnly are the keys whose map values kustomize never loads: labels and annotations.
var copiedOnly = map[string]bool{"commonLabels": true, "commonAnnotations": true, "labels": true, "annotations": true, "pairs": true}

// remoteScalar checks one value: a remote location, an inline configuration, or the name of
// a file or directory whose configuration is checked in turn. off places an inline document's
// nodes where it sits in file.
func (b *builder) remoteScalar(dir, file string, n *yaml.Node, off offset, walk func(*yaml.Node, offset), seen map[string]bool) manifests.Errors {
	if loc, ok := remoteValue(n.Value); ok {
		line, col := off.at(n)
		return manifests.Errors{{File: file, Line: line, Column: col, Message: fmt.Sprintf("remote location %q: karpool builds read the repository only (no remote bases, files or URLs); copy what it points to into the repository and refer to the copy", loc)}}
	}
	if strings.Contains(n.Value, "\n") {
		// An inline generator or transformer configuration.
		inner := b.blockOffset(file, n, off)
		for _, d := range configDocs(n.Value) {
			walk(d, inner)
		}
		return nil
	}
	p := path.Join(dir, n.Value)
	if strings.HasPrefix(p, "../") || p == ".." {
		return nil
	}
	switch {
	case b.repo.isFile(p) && isYAMLName(p) && !seen["file:"+p]:
		seen["file:"+p] = true
		docs, _ := b.parse(p) // a file that does not parse is reported where it is used
		var errs manifests.Errors
		for _, d := range docs {
			if isConfig(d) {
				errs = append(errs, b.remoteLocations(path.Dir(p), p, d, seen)...)
			}
		}
		return errs
	case b.repo.isDir(p) && b.kustomization(p) != "":
		return b.lint(p, seen)
	}
	return nil
}

// blockOffset places the text of a multi-line scalar in file: a block scalar's text starts on
// the line after its indicator, indented as its first line is; for other styles, where the
// text's lines cannot be mapped back exactly, its nodes are placed at the scalar.
func (b *builder) blockOffset(file string, n *yaml.Node, off offset) offset {
	line, col := off.at(n)
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		return offset{line - 1, col - 1}
	}
	data, _ := b.repo.read(file, b.limits.FileBytes)
	lines := strings.Split(string(data), "\n")
	for i := line; i < len(lines); i++ {
		if t := strings.TrimLeft(lines[i], " "); t != "" {
			return offset{i, len(lines[i]) - len(t)}
		}
	}
	return offset{line, col - 1}
}

// remoteValue returns the location in s that kustomize would fetch: the path of a generator's
// "key=path" entry, or s itself.
func remoteValue(s string) (string, bool) {
	if _, p, ok := strings.Cut(s, "="); ok && remote(p) {
		return p, true
	}
	if remote(s) {
		return s, true
	}
	return "", false
}

// remote reports whether kustomize would fetch ref rather than read it from the repository:
// any URL with an authority (http, https, ssh, git, file…), anything kustomize's own parser
// takes for a git repository (scp-style addresses, github.com/… shorthands, ?ref= queries),
// and the forms kustomize documents (git::, ?ref=).
func remote(ref string) bool {
	s := strings.TrimSpace(ref)
	if s == "" {
		return false
	}
	// kustomize fetches any value url.Parse gives an http or https scheme, even without a host
	// ("http:0") or with spaces in it ("http:- h"), so this comes before the space test below.
	if u, err := url.Parse(s); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return true
	}
	if strings.ContainsAny(s, " \t\n") {
		return false
	}
	l := strings.ToLower(strings.TrimPrefix(s, "git::"))
	switch {
	case strings.Contains(l, "://"), strings.Contains(l, "?ref="), strings.Contains(l, "&ref="),
		strings.HasPrefix(l, "github.com/"), strings.HasPrefix(l, "github.com:"):
		return true
	}
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		return true
	}
	if at := strings.Index(l, "@"); at > 0 && !strings.Contains(l[:at], "/") && strings.Contains(l[at:], ":") {
		return true
	}
	return gitRepo(s)
}

// gitRepo asks kustomize's own parser whether s names a git repository: its Origin.Append
// fills in Repo exactly when kustomize would clone s.
func gitRepo(s string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = true // kustomize's parser could not cope: do not let kustomize try either
		}
	}()
	return (&resource.Origin{}).Append(s).Repo != ""
}

// configDocs returns the documents of an inline text that are kustomize configurations.
func configDocs(text string) []*yaml.Node {
	var out []*yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var n yaml.Node
		if dec.Decode(&n) != nil {
			return out
		}
		if len(n.Content) == 1 && isConfig(n.Content[0]) {
			out = append(out, n.Content[0])
		}
	}
}

// isConfig says whether a document configures a kustomize generator, transformer or
// validator (builtin or not), rather than being an object of the build.
func isConfig(d *yaml.Node) bool {
	if d.Kind != yaml.MappingNode {
		return false
	}
	kind := manifests.StringField(d, "kind")
	return manifests.StringField(d, "apiVersion") == "builtin" || strings.HasSuffix(kind, "Generator") ||
		strings.HasSuffix(kind, "Transformer") || strings.HasSuffix(kind, "Validator")
}

func isYAMLName(p string) bool {
	switch path.Ext(p) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
