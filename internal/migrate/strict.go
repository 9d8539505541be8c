package migrate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/karpool/karpool/manifests"
)

// decodeStrict decodes the document into one of the legacy Go shapes, rejecting fields the old
// API did not have (they would otherwise be lost silently) and values of the wrong type. Every
// problem is an error at the line of the offending field. It returns false when there was one.
func (m *migrator) decodeStrict(d docRef, obj any) bool {
	var v any
	if err := d.c.doc.YNode().Decode(&v); err != nil {
		e := manifests.SyntaxError(d.f.name, err)
		m.errorf(d.f, max(e.Line, lineOf(d.c.root())), "%s %q: %s", d.kind, d.name, e.Message)
		return false
	}
	data, err := json.Marshal(v)
	if err != nil {
		m.errorf(d.f, lineOf(d.c.root()), "%s %q: not representable as JSON (are all keys strings?): %v", d.kind, d.name, err)
		return false
	}
	strictErrs, err := sjson.UnmarshalStrict(data, obj)
	if err != nil {
		path, msg := typeErrorPath(err)
		m.errorf(d.f, pathLine(d.c.root(), path), "%s %q: %s", d.kind, d.name, msg)
		return false
	}
	for _, se := range strictErrs {
		path := ""
		if fe, ok := se.(sjson.FieldError); ok {
			path = fe.FieldPath()
		}
		m.errorf(d.f, pathLine(d.c.root(), path), "%s %q: %s: %s %s has no such field; remove it or fix its spelling", d.kind, d.name, se, d.apiVersion, d.kind)
	}
	return len(strictErrs) == 0
}

// decodeStrictRaw decodes a free-form part of a document (kept as raw JSON by the legacy types,
// like the inline provider) strictly into obj; prefix is its path in the document.
func (m *migrator) decodeStrictRaw(d docRef, raw []byte, prefix string, obj any, hint string) bool {
	strictErrs, err := sjson.UnmarshalStrict(raw, obj)
	if err != nil {
		path, msg := typeErrorPath(err)
		m.errorf(d.f, pathLine(d.c.root(), prefix+"."+path), "%s %q: %s: %s", d.kind, d.name, prefix, msg)
		return false
	}
	for _, se := range strictErrs {
		path := ""
		if fe, ok := se.(sjson.FieldError); ok {
			path = fe.FieldPath()
		}
		m.errorf(d.f, pathLine(d.c.root(), prefix+"."+path), "%s %q: %s: unknown field %q%s", d.kind, d.name, prefix, path, hint)
	}
	return len(strictErrs) == 0
}

var typeErrRE = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.(\S+) of type (\S+)`)

// typeErrorPath turns "json: cannot unmarshal string into Go struct field Provisioner.spec.weight
// of type int32" into the path spec.weight and a shorter message.
func typeErrorPath(err error) (path, msg string) {
	msg = strings.TrimPrefix(err.Error(), "json: ")
	if sm := typeErrRE.FindStringSubmatch(msg); sm != nil {
		path = sm[1]
		what := strings.TrimPrefix(msg, "cannot unmarshal ")
		if i := strings.Index(what, " into "); i >= 0 {
			what = what[:i]
		}
		msg = fmt.Sprintf("%s: expected %s, found %s", path, sm[2], what)
	}
	return path, msg
}

// pathLine finds the line of a field path such as spec.requirements[0].values in the tree, or the
// line of the deepest part of it that exists.
func pathLine(root *yaml.Node, path string) int {
	n := root
	best := lineOf(root)
	for _, tok := range splitPath(path) {
		if n == nil {
			break
		}
		if i, err := strconv.Atoi(tok); err == nil && n.Kind == yaml.SequenceNode {
			if i < 0 || i >= len(n.Content) {
				break
			}
			n = n.Content[i]
			best = lineOf(n, &yaml.Node{Line: best})
			continue
		}
		k, v, _ := get(mapping(n), tok)
		if k == nil {
			break
		}
		best = lineOf(k, &yaml.Node{Line: best})
		n = v
	}
	return best
}

func splitPath(path string) []string {
	var out []string
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				out = append(out, part)
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			j := strings.IndexByte(part, ']')
			if j < i {
				out = append(out, part[i:])
				break
			}
			out = append(out, part[i+1:j])
			part = part[j+1:]
		}
	}
	return out
}
