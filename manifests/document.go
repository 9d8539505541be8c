package manifests

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits bound the work one input may cause.
type Limits struct {
	// MaxBytes caps the size of one file or stream.
	MaxBytes int64
	// MaxDepth caps how deeply mappings and sequences of one document may nest.
	MaxDepth int
	// MaxNodes caps the values of one document after YAML aliases are expanded; it is what stops
	// "billion laughs" alias bombs.
	MaxNodes int
	// MaxDocuments caps the documents of one file.
	MaxDocuments int
}

// DefaultLimits are generous for pool manifests: real NodePools nest about 8 deep and hold a few
// hundred values. With them, the slowest document to validate takes a few seconds.
var DefaultLimits = Limits{
	MaxBytes:     10 << 20,
	MaxDepth:     64,
	MaxNodes:     10_000,
	MaxDocuments: 100_000,
}

// Document is one YAML document of a file.
type Document struct {
	File  string
	Index int // 1-based
	// Line and Column are where the document's content starts.
	Line, Column int
	APIVersion   string
	Kind         string
	Name         string
	// Node is the document's content (a mapping for a Kubernetes object), with positions. After
	// Release it is nil; use Root.
	Node *yaml.Node

	chunk     Chunk // the document's text, to parse it again after Release
	object    any   // Node as plain Go values, built by Object
	objectErr error
	converted bool
	index     map[string]*Position
}

// Root returns the document's content node, parsing the document again if it was released.
func (d *Document) Root() *yaml.Node {
	if d.Node == nil {
		if again, err := ParseChunk(d.File, d.chunk); err == nil && again != nil {
			d.Node = again.Node
		} else {
			d.Node = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: d.Line, Column: d.Column}
		}
	}
	return d.Node
}

// Release drops what was built from the document's text (the parsed nodes, the plain values, the
// index of positions), keeping its identity and text: a run over thousands of documents holds
// only their findings and whatever the caller kept. The document is parsed again when needed.
func (d *Document) Release() {
	d.Node, d.object, d.objectErr, d.converted, d.index = nil, nil, nil, false, nil
}

// IsObject reports whether the document is a mapping with an apiVersion or a kind, the shape of
// a Kubernetes object.
func (d *Document) IsObject() bool {
	return d.Root().Kind == yaml.MappingNode && (d.APIVersion != "" || d.Kind != "")
}

// Group returns the API group of the document's apiVersion ("" for the core group).
func (d *Document) Group() string {
	g, _, found := strings.Cut(d.APIVersion, "/")
	if !found {
		return ""
	}
	return g
}

// Chunk is the text of one document of a YAML stream.
type Chunk struct {
	Index int    // 1-based document number
	Line  int    // line of the file the chunk starts at, 1-based
	Data  []byte // the document's text
}

// SplitDocuments cuts a YAML stream into the text of its documents, at the lines that start
// with the document markers "---" or "...". Such a line ends any document, whatever it is in the
// middle of (the YAML spec forbids it inside a document), so the cut is the one a YAML parser
// makes; cutting first lets documents be parsed in parallel, and a syntax error in one not stop
// the others. Directive lines (%YAML) go with the document after them.
func SplitDocuments(data []byte) []Chunk {
	var chunks []Chunk
	start, startLine := 0, 1
	line := 1
	index := 0
	flush := func(end int) {
		text := data[start:end]
		if index == 0 && !hasContent(text) {
			return // comments or nothing before the first "---": not a document
		}
		index++
		chunks = append(chunks, Chunk{Index: index, Line: startLine, Data: text})
	}
	for pos := 0; pos < len(data); {
		eol := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if eol >= 0 {
			next = pos + eol + 1
		}
		l := data[pos:next]
		switch {
		case isMarker(l, "---"):
			if onlyDirectives(data[start:pos]) {
				break // "%YAML 1.2" then "---": one document
			}
			flush(pos)
			// The marker line stays with the document it starts ("--- |" may carry content).
			start, startLine = pos, line
		case isMarker(l, "..."):
			flush(pos)
			start, startLine = next, line+1
		}
		pos = next
		line++
	}
	if start < len(data) && (hasContent(data[start:]) || index > 0) {
		flush(len(data))
	}
	return chunks
}

func isMarker(l []byte, m string) bool {
	if !bytes.HasPrefix(l, []byte(m)) {
		return false
	}
	rest := l[len(m):]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}

// hasContent reports whether text has a line that is not blank, a comment or a directive.
func hasContent(text []byte) bool {
	for len(text) > 0 {
		l := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		t := bytes.TrimSpace(l)
		if len(t) > 0 && t[0] != '#' && t[0] != '%' {
			return true
		}
	}
	return false
}

func onlyDirectives(text []byte) bool {
	seen := false
	for _, l := range bytes.Split(text, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if t[0] != '%' {
			return false
		}
		seen = true
	}
	return seen
}

// ParseDocuments splits a YAML stream into documents. Empty documents are dropped. A document
// that is not valid YAML is reported (the first one, as a *Error) and the others are still
// returned.
func ParseDocuments(filename string, data []byte, lim Limits) ([]*Document, error) {
	chunks, err := Split(filename, data, lim)
	if err != nil {
		return nil, err
	}
	var docs []*Document
	var first error
	for _, c := range chunks {
		d, err := ParseChunk(filename, c)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs, first
}

// Split is SplitDocuments with the size and document-count limits checked.
func Split(filename string, data []byte, lim Limits) ([]Chunk, error) {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return nil, &Error{File: filename, Rule: "limits", Message: fmt.Sprintf("file is %d bytes, over the limit of %d (raise it with --max-file-size)", len(data), lim.MaxBytes)}
	}
	chunks := SplitDocuments(data)
	if lim.MaxDocuments > 0 && len(chunks) > lim.MaxDocuments {
		return nil, &Error{File: filename, Rule: "limits", Message: fmt.Sprintf("more than %d documents", lim.MaxDocuments)}
	}
	return chunks, nil
}

// ParseChunk parses the text of one document. It returns nil for an empty document, and a
// *Error for text that is not YAML.
func ParseChunk(filename string, c Chunk) (*Document, error) {
	var n yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(c.Data)).Decode(&n)
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		pe := SyntaxError(filename, err)
		if pe.Line > 0 {
			pe.Line += c.Line - 1
		} else {
			pe.Line, pe.Column = c.Line, 1
		}
		return nil, pe
	}
	if n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return nil, nil
	}
	ShiftLines(&n, c.Line-1)
	content := n.Content[0]
	if content.Kind == yaml.ScalarNode && content.ShortTag() == "!!null" {
		return nil, nil // "---" with nothing after it
	}
	d := &Document{File: filename, Index: c.Index, Node: content, Line: content.Line, Column: content.Column, chunk: c}
	if content.Kind == yaml.MappingNode {
		d.APIVersion = StringField(content, "apiVersion")
		d.Kind = StringField(content, "kind")
		if md := Field(content, "metadata"); md != nil {
			d.Name = StringField(md, "name")
		}
	}
	return d, nil
}

// Object returns the document as plain Go values (map[string]any, []any, string, int64,
// *big.Int, float64, bool), as the API server reads it: YAML aliases expanded, merge keys
// applied, and mapping entries whose value is null dropped (the API server prunes nulls from
// fields that are not nullable, which is all of Karpenter's: `labels:` with nothing after it
// means no labels). An error is a *Error: a limit broken, a duplicate key, a value that JSON
// cannot hold.
func (d *Document) Object(lim Limits) (any, error) {
	if !d.converted {
		c := &converter{doc: d, lim: lim, expanding: map[*yaml.Node]bool{}}
		d.object, d.objectErr = c.convert(d.Root(), 0)
		d.converted = true
	}
	return d.object, d.objectErr
}

type converter struct {
	doc       *Document
	lim       Limits
	nodes     int
	expanding map[*yaml.Node]bool
}

func (c *converter) errorf(n *yaml.Node, rule, format string, args ...any) error {
	return &Error{File: c.doc.File, Line: n.Line, Column: n.Column, Rule: rule, Message: fmt.Sprintf(format, args...)}
}

func (c *converter) convert(n *yaml.Node, depth int) (any, error) {
	c.nodes++
	if c.lim.MaxNodes > 0 && c.nodes > c.lim.MaxNodes {
		return nil, c.errorf(c.doc.Root(), "limits", "document %d has more than %d values (YAML aliases expanded); refusing to validate it", c.doc.Index, c.lim.MaxNodes)
	}
	if c.lim.MaxDepth > 0 && depth > c.lim.MaxDepth {
		return nil, c.errorf(n, "limits", "document %d nests deeper than %d levels; refusing to validate it", c.doc.Index, c.lim.MaxDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.errorf(n, "yaml", "unknown anchor %q", n.Value)
		}
		if c.expanding[n.Alias] {
			return nil, c.errorf(n, "yaml", "anchor %q contains itself", n.Value)
		}
		c.expanding[n.Alias] = true
		v, err := c.convert(n.Alias, depth)
		delete(c.expanding, n.Alias)
		return v, err
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		seen := make(map[string]*yaml.Node, len(n.Content)/2)
		if err := c.mapping(n, m, seen, depth); err != nil {
			return nil, err
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.convert(e, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errorf(n, "yaml", "unexpected YAML node")
}

// mapping fills m from n, merge keys (<<) first so that the mapping's own keys win.
func (c *converter) mapping(n *yaml.Node, m map[string]any, seen map[string]*yaml.Node, depth int) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if err := c.merge(v, m, depth); err != nil {
				return err
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return c.errorf(k, "yaml", "mapping keys must be strings, numbers or booleans")
		}
		if prev, dup := seen[k.Value]; dup {
			return DuplicateKey(c.doc.File, k, prev)
		}
		seen[k.Value] = k
		val, err := c.convert(v, depth+1)
		if err != nil {
			return err
		}
		if val == nil {
			delete(m, k.Value)
			continue
		}
		m[k.Value] = val
	}
	return nil
}

func (c *converter) merge(v *yaml.Node, m map[string]any, depth int) error {
	var sources []*yaml.Node
	switch v.Kind {
	case yaml.SequenceNode:
		sources = v.Content
	default:
		sources = []*yaml.Node{v}
	}
	for _, s := range sources {
		val, err := c.convert(s, depth+1)
		if err != nil {
			return err
		}
		sm, ok := val.(map[string]any)
		if !ok {
			return c.errorf(s, "yaml", "merge key << needs a mapping or a list of mappings")
		}
		for k, x := range sm {
			if _, ok := m[k]; !ok {
				m[k] = x
			}
		}
	}
	return nil
}

func (c *converter) scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errorf(n, "yaml", "%v", err)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, nil
		}
		if b, ok := new(big.Int).SetString(strings.ReplaceAll(n.Value, "_", ""), 0); ok {
			return b, nil
		}
		return n.Value, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, c.errorf(n, "yaml", "%v", err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, NonFiniteError(c.doc.File, n)
		}
		return f, nil
	}
	// !!str, !!timestamp, !!binary and custom tags: the text as written.
	return n.Value, nil
}

// Position is where a value and its key sit in the file.
type Position struct {
	KeyLine, KeyColumn int // the mapping key, or the value itself for a list item
	Node               *yaml.Node
}

// Lookup finds the node at path (field names and list indices) and the number of path elements
// that matched: a missing field resolves to its closest present parent.
func (d *Document) Lookup(path []string) (*Position, int) {
	if d.index == nil {
		d.index = map[string]*Position{}
		budget := 200_000 // positions kept; aliases can make the tree large
		var walk func(n *yaml.Node, prefix string, kl, kc int, depth int)
		walk = func(n *yaml.Node, prefix string, kl, kc int, depth int) {
			if budget <= 0 || depth > 80 {
				return
			}
			budget--
			if n.Kind == yaml.AliasNode && n.Alias != nil {
				d.index[prefix] = &Position{KeyLine: kl, KeyColumn: kc, Node: n}
				n = n.Alias
			} else {
				d.index[prefix] = &Position{KeyLine: kl, KeyColumn: kc, Node: n}
			}
			switch n.Kind {
			case yaml.MappingNode:
				for i := 0; i+1 < len(n.Content); i += 2 {
					k := n.Content[i]
					if k.ShortTag() == "!!merge" {
						continue
					}
					walk(n.Content[i+1], prefix+"\x00"+k.Value, k.Line, k.Column, depth+1)
				}
			case yaml.SequenceNode:
				for i, e := range n.Content {
					walk(e, prefix+"\x00"+strconv.Itoa(i), e.Line, e.Column, depth+1)
				}
			}
		}
		root := d.Root()
		walk(root, "", root.Line, root.Column, 0)
	}
	for n := len(path); n >= 0; n-- {
		key := ""
		if n > 0 {
			key = "\x00" + strings.Join(path[:n], "\x00")
		}
		if p, ok := d.index[key]; ok {
			return p, n
		}
	}
	return &Position{KeyLine: d.Line, KeyColumn: d.Column, Node: d.Root()}, 0
}

// Position says where a finding about path goes: a scalar where its value is, anything else
// (and a missing field) at its key. exact is false when path is not in the document.
func (d *Document) Position(path []string, n *Position, matched int, atValue bool) (line, col int, exact bool) {
	line, col = n.KeyLine, n.KeyColumn
	if matched == len(path) && IsScalar(n.Node) && atValue {
		line, col = n.Node.Line, n.Node.Column
	}
	if line == 0 {
		line, col = d.Line, d.Column
	}
	return line, col, matched == len(path)
}

// Locate returns where a finding about the field at path goes in the document, and whether the
// field is there (if not, the position is that of its closest parent).
func (d *Document) Locate(path []string) (line, col int, exact bool) {
	n, matched := d.Lookup(path)
	return d.Position(path, n, matched, true)
}

// Value returns the value at path as written, shortened to one line, or "" if it is absent.
func (d *Document) Value(path []string) string {
	n, matched := d.Lookup(path)
	if matched != len(path) {
		return ""
	}
	return Render(n.Node)
}

// Render shows a value as written, in YAML flow style on one line, shortened.
func Render(n *yaml.Node) string {
	var b strings.Builder
	renderTo(&b, n, 120, 0)
	s := b.String()
	const maxLen = 80
	if len(s) > maxLen {
		s = s[:maxLen-3] + "..."
	}
	return s
}

func renderTo(b *strings.Builder, n *yaml.Node, budget, depth int) {
	if b.Len() > budget || depth > 20 {
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			b.WriteString(strconv.Quote(n.Value))
			return
		}
		b.WriteString(n.Value)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(n.Content[i].Value)
			b.WriteString(": ")
			renderTo(b, n.Content[i+1], budget, depth+1)
			if b.Len() > budget {
				return
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, e, budget, depth+1)
			if b.Len() > budget {
				return
			}
		}
		b.WriteByte(']')
	}
}

// IsScalar reports whether n (after aliases) is a scalar.
func IsScalar(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n.Kind == yaml.ScalarNode
}
