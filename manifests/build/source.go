package build

import (
	"fmt"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Source is where an object was written: a file of the repository and the document in it.
type Source struct {
	// File is slash-separated and relative to the repository root.
	File string
	// Line and Column are where the document's content starts (1-based).
	Line, Column int
	// doc is the document's root node, for locating fields; nil when the origin is unknown.
	doc *yaml.Node
}

// String is file:line:col.
func (s Source) String() string {
	if s.File == "" {
		return "(unknown file)"
	}
	if s.Line == 0 {
		return s.File
	}
	return fmt.Sprintf("%s:%d:%d", s.File, s.Line, s.Column)
}

// Locate returns the position of a field given Kubernetes-style
// ("spec.template.spec.requirements[0].operator"). When the field is not in the file, for example
// because a kustomize patch added it or because it is missing, it returns the position of the
// deepest enclosing field that is there, and the document's start at worst.
func (s Source) Locate(fieldPath string) (line, col int) {
	line, col, _ = s.locate(splitPath(fieldPath))
	return line, col
}

// Find is Locate for a field given as field names and list indexes ("spec", "requirements",
// "0"); exact says whether the field itself is in the file rather than an enclosing one. Line is
// 0 when the file of the object is not known (kustomize generated it).
func (s Source) Find(selectors []string) (line, col int, exact bool) {
	segs := make([]segment, len(selectors))
	for i, sel := range selectors {
		segs[i] = segment{name: sel, index: -1}
		if n, err := strconv.Atoi(sel); err == nil {
			segs[i].index = n
		}
	}
	return s.locate(segs)
}

func (s Source) locate(segs []segment) (line, col int, exact bool) {
	line, col = s.Line, s.Column
	n := s.doc
	if n == nil {
		return line, col, false
	}
	for _, seg := range segs {
		var key, val *yaml.Node
		switch {
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.name {
					key, val = n.Content[i], n.Content[i+1]
					break
				}
			}
		case n.Kind == yaml.SequenceNode && seg.index >= 0 && seg.index < len(n.Content):
			val = n.Content[seg.index]
		}
		if val == nil {
			return line, col, false
		}
		// A scalar is reported where its value is; a map or list where its key is, which is the
		// line people look at.
		line, col = val.Line, val.Column
		if key != nil && val.Kind != yaml.ScalarNode {
			line, col = key.Line, key.Column
		}
		n = val
	}
	return line, col, true
}

type segment struct {
	name  string // the key, for a map
	index int    // the index, for a list; -1 when the segment is not a number
}

// splitPath turns "a.b[2].c" into a, b, [2], c. Keys holding dots are written by the API server
// in brackets as well ("metadata.labels[karpenter.sh/team]"), which is handled too.
func splitPath(p string) []segment {
	p = strings.TrimPrefix(p, ".")
	var segs []segment
	for p != "" {
		switch {
		case strings.HasPrefix(p, `["`):
			// A quoted key, which may hold dots, brackets and escapes.
			q, err := strconv.QuotedPrefix(p[1:])
			key, uerr := strconv.Unquote(q)
			if err != nil || uerr != nil || !strings.HasPrefix(p[1+len(q):], "]") {
				return segs
			}
			segs = append(segs, segment{name: key, index: -1})
			p = strings.TrimPrefix(p[2+len(q):], ".")
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return segs
			}
			inner := p[1:end]
			if i, err := strconv.Atoi(inner); err == nil {
				segs = append(segs, segment{name: inner, index: i})
			} else {
				segs = append(segs, segment{name: strings.Trim(inner, `"'`), index: -1})
			}
			p = strings.TrimPrefix(p[end+1:], ".")
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			segs = append(segs, segment{name: p[:end], index: -1})
			p = strings.TrimPrefix(p[end:], ".")
		}
	}
	return segs
}
