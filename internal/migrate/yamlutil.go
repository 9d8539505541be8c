package migrate

import (
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Small helpers over the go-yaml v3 nodes that kyaml's RNode wraps. They edit mappings in place
// so that key order, styles and comments of everything not touched survive.

// mapping returns the mapping node of rn (unwrapping a document node), or nil.
func mapping(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	return n
}

// get returns the key and value nodes of key in mapping m, and the key's index in m.Content.
func get(m *yaml.Node, key string) (k, v *yaml.Node, idx int) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil, -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1], i
		}
	}
	return nil, nil, -1
}

// val returns the value of key in mapping m, or nil.
func val(m *yaml.Node, key string) *yaml.Node {
	_, v, _ := get(m, key)
	return v
}

// str returns the scalar value of key in m ("" when missing or not a scalar).
func str(m *yaml.Node, key string) string {
	v := val(m, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

// lookup follows a path of mapping keys.
func lookup(m *yaml.Node, path ...string) *yaml.Node {
	n := mapping(m)
	for i, p := range path {
		v := val(n, p)
		if v == nil {
			return nil
		}
		if i == len(path)-1 {
			return v
		}
		n = mapping(v)
	}
	return n
}

// del removes key from m and returns its key and value nodes (nil when absent).
func del(m *yaml.Node, key string) (k, v *yaml.Node) {
	k, v, i := get(m, key)
	if i < 0 {
		return nil, nil
	}
	m.Content = append(m.Content[:i], m.Content[i+2:]...)
	return k, v
}

// set replaces the value of key in m, or appends the pair when key is absent. It returns the key node.
func set(m *yaml.Node, key string, v *yaml.Node) *yaml.Node {
	if k, _, i := get(m, key); i >= 0 {
		m.Content[i+1] = v
		return k
	}
	k := newKey(key)
	m.Content = append(m.Content, k, v)
	return k
}

// setPair sets key (the value of k) to v, reusing the key node k (and its comments) when the key
// is new; an existing key keeps its node and gets k's comments added.
func setPair(m, k, v *yaml.Node) {
	if old, _, i := get(m, k.Value); i >= 0 {
		mergeComments(old, k)
		m.Content[i+1] = v
		return
	}
	m.Content = append(m.Content, k, v)
}

// insertAt inserts the pair before the pair at index i of m.Content (i as returned by get);
// i < 0 or past the end appends.
func insertAt(m *yaml.Node, i int, k, v *yaml.Node) {
	if i < 0 || i >= len(m.Content) {
		m.Content = append(m.Content, k, v)
		return
	}
	m.Content = append(m.Content[:i], append([]*yaml.Node{k, v}, m.Content[i:]...)...)
}

// prepend puts the pair first in m.
func prepend(m, k, v *yaml.Node) { insertAt(m, 0, k, v) }

func newKey(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func newStr(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func newInt(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s}
}

func newMap(kv ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: kv}
}

func newSeq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

// flowStrings is a flow-style sequence of strings: ["a", "b"].
func flowStrings(vals ...string) *yaml.Node {
	s := newSeq()
	s.Style = yaml.FlowStyle
	for _, v := range vals {
		n := newStr(v)
		n.Style = yaml.DoubleQuotedStyle
		s.Content = append(s.Content, n)
	}
	return s
}

// pairs builds mapping content from alternating key strings and value nodes.
func pairs(kv ...any) []*yaml.Node {
	var out []*yaml.Node
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, newKey(kv[i].(string)))
		switch v := kv[i+1].(type) {
		case string:
			out = append(out, newStr(v))
		case *yaml.Node:
			out = append(out, v)
		}
	}
	return out
}

// mergeComments adds the comments of from to to (keeping to's own).
func mergeComments(to, from *yaml.Node) {
	if from == nil || to == nil || from == to {
		return
	}
	to.HeadComment = joinComment(to.HeadComment, from.HeadComment)
	to.LineComment = joinComment(to.LineComment, from.LineComment)
	to.FootComment = joinComment(to.FootComment, from.FootComment)
}

func joinComment(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	return a + "\n" + b
}

// rename changes a key node's text in place (comments and position stay).
func rename(k *yaml.Node, name string) {
	k.Value = name
	k.Tag = "!!str"
	k.Style = 0
}

// setScalar replaces the text of a scalar node in place, keeping its comments. The tag becomes
// tag (for example "!!str") and the style is reset when the old style would misquote the value.
func setScalar(n *yaml.Node, value, tag string) {
	n.Kind = yaml.ScalarNode
	n.Value = value
	n.Tag = tag
	n.Content = nil
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || tag != "!!str" {
		n.Style = 0
	}
}

// lineOf is the first non-zero line among the nodes.
func lineOf(nodes ...*yaml.Node) int {
	for _, n := range nodes {
		if n != nil && n.Line > 0 {
			return n.Line
		}
	}
	return 0
}

// deepCopy copies a node tree (aliases are not expected: documents with aliases are rejected
// before conversion).
func deepCopy(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		c.Content[i] = deepCopy(ch)
	}
	return &c
}

// hasAlias reports whether the tree uses anchors, aliases or merge keys.
func hasAlias(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" || (n.Kind == yaml.ScalarNode && n.Tag == yaml.MergeTag) {
		return n
	}
	for _, c := range n.Content {
		if a := hasAlias(c); a != nil {
			return a
		}
	}
	return nil
}

// stringMap reads a mapping of scalar keys and values.
func stringMap(m *yaml.Node) map[string]string {
	out := map[string]string{}
	if m == nil || m.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		out[m.Content[i].Value] = m.Content[i+1].Value
	}
	return out
}

// stringifyValues gives every scalar value of mapping m the !!str tag, so that `cpu: 1` becomes
// `cpu: "1"` where v1 expects a string.
func stringifyValues(m *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 1; i < len(m.Content); i += 2 {
		v := m.Content[i]
		if v.Kind == yaml.ScalarNode && v.Tag != "!!str" && v.Tag != "!!null" {
			v.Tag = "!!str"
			v.Style = 0
		}
	}
}

// isNull is true for a missing node or an explicit null.
func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// splitList splits a comma-separated selector value.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
