package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/karpool/karpool/manifests"
)

// Input is one file to migrate.
type Input struct {
	// Name is used in diagnostics (a path, or "<stdin>").
	Name string
	Data []byte
}

// Output is the migrated form of one Input.
type Output struct {
	Name string
	Data []byte
	// Changed is false when Data is byte for byte the input.
	Changed bool
}

// Severity of a diagnostic.
type Severity string

// Severities. An Error means the input could not be converted; the output must not be used.
const (
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// Diagnostic is a warning or error about one place of the input.
type Diagnostic struct {
	File     string
	Line     int
	Severity Severity
	Message  string
}

// String formats the diagnostic as "file:line: severity: message".
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", d.File, d.Line, d.Severity, d.Message)
}

// Result is the outcome of migrating a set of files.
type Result struct {
	// Outputs holds one entry per input, in input order.
	Outputs []Output
	// Diagnostics are sorted by file (input order) and line.
	Diagnostics []Diagnostic
}

// Errors counts the error diagnostics.
func (r *Result) Errors() int {
	n := 0
	for _, d := range r.Diagnostics {
		if d.Severity == SeverityError {
			n++
		}
	}
	return n
}

// Bytes migrates a single file. The error, if any, joins the error diagnostics; out is then
// best-effort and should not be written back.
func Bytes(name string, data []byte) (out []byte, diags []Diagnostic, err error) {
	r := Files([]Input{{Name: name, Data: data}})
	var errs []error
	for _, d := range r.Diagnostics {
		if d.Severity == SeverityError {
			errs = append(errs, errors.New(d.String()))
		}
	}
	return r.Outputs[0].Data, r.Diagnostics, errors.Join(errs...)
}

// Files migrates the inputs together, resolving references between their documents.
func Files(inputs []Input) *Result {
	m := &migrator{classes: map[string]*class{}, classNames: map[string]bool{}, classDefs: map[string][]string{}}
	for i, in := range inputs {
		f := &file{name: in.Name, data: in.Data, index: i}
		m.files = append(m.files, f)
		m.parse(f)
	}
	m.run()
	res := &Result{}
	for _, f := range m.files {
		res.Outputs = append(res.Outputs, m.render(f))
	}
	sort.SliceStable(m.diags, func(i, j int) bool {
		a, b := m.diags[i], m.diags[j]
		if a.fileIndex != b.fileIndex {
			return a.fileIndex < b.fileIndex
		}
		return a.Line < b.Line
	})
	for _, d := range m.diags {
		res.Diagnostics = append(res.Diagnostics, d.Diagnostic)
	}
	return res
}

type file struct {
	name      string
	data      []byte
	index     int
	seqIndent yaml.SequenceIndentStyle
	chunks    []*chunk
}

// chunk is one document of a file: its verbatim bytes and, when it parsed, its tree.
type chunk struct {
	raw       []byte
	sep       bool // raw starts with a "---" line
	startLine int
	doc       *yaml.RNode // the document node; nil for empty or unparsable chunks
	changed   bool
	// after holds new documents (EC2NodeClasses made from inline providers or split off) that
	// are written right after this one.
	after []*yaml.Node
}

func (c *chunk) root() *yaml.Node {
	if c.doc == nil {
		return nil
	}
	return mapping(c.doc.YNode())
}

type diag struct {
	Diagnostic
	fileIndex int
}

type migrator struct {
	files []*file
	diags []diag

	// classes are the EC2NodeClasses of the output (converted, created or passed through), by name.
	classes map[string]*class
	// classNames are all node class names in use (EC2NodeClass, AWSNodeTemplate), to keep new
	// names unique.
	classNames map[string]bool
	classOrder []string
	// classDefs lists where each node class name is defined in the inputs (file:line).
	classDefs map[string][]string
	pools     []*pool
}

func (m *migrator) report(f *file, line int, sev Severity, format string, args ...any) {
	if line <= 0 {
		line = 1
	}
	m.diags = append(m.diags, diag{Diagnostic{File: f.name, Line: line, Severity: sev, Message: fmt.Sprintf(format, args...)}, f.index})
}

func (m *migrator) warn(f *file, line int, format string, args ...any) {
	m.report(f, line, SeverityWarning, format, args...)
}

func (m *migrator) errorf(f *file, line int, format string, args ...any) {
	m.report(f, line, SeverityError, format, args...)
}

// isSeparator recognises a document start marker line ("---", optionally followed by a space and
// more, such as a comment).
func isSeparator(line []byte) bool {
	line = bytes.TrimRight(line, "\r\n")
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := line[3:]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t'
}

// parse splits a file into documents at "---" lines and parses each one on its own, so that
// unchanged documents can be copied verbatim; line numbers are shifted to be file-relative.
func (m *migrator) parse(f *file) {
	f.seqIndent = yaml.SequenceIndentStyle(yaml.DeriveSeqIndentStyle(string(f.data)))
	var cur *chunk
	lineNo := 0
	rest := f.data
	for len(rest) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			line, rest = rest, nil
		}
		if cur == nil || isSeparator(line) {
			cur = &chunk{startLine: lineNo, sep: isSeparator(line)}
			f.chunks = append(f.chunks, cur)
		}
		cur.raw = append(cur.raw, line...)
	}
	for _, c := range f.chunks {
		dec := yaml.NewDecoder(bytes.NewReader(c.raw))
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			continue // only comments or blank lines
		}
		if err != nil {
			e := manifests.SyntaxError(f.name, err)
			m.errorf(f, c.startLine+max(e.Line, 1)-1, "%s", e.Message)
			continue
		}
		var extra yaml.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			m.errorf(f, c.startLine, "cannot parse YAML: more than one document between \"---\" markers")
			continue
		}
		if len(n.Content) == 0 {
			continue
		}
		manifests.ShiftLines(&n, c.startLine-1)
		if e := manifests.Strict(f.name, &n); e != nil {
			m.errorf(f, e.Line, "%s", e.Message)
			continue
		}
		c.doc = yaml.NewRNode(&n)
	}
}

// Kinds and API versions recognised.
const (
	apiV1alpha5         = "karpenter.sh/v1alpha5"
	apiAWSV1alpha1      = "karpenter.k8s.aws/v1alpha1"
	apiV1beta1          = "karpenter.sh/v1beta1"
	apiAWSV1beta1       = "karpenter.k8s.aws/v1beta1"
	apiV1               = "karpenter.sh/v1"
	apiAWSV1            = "karpenter.k8s.aws/v1"
	groupKarpenter      = "karpenter.sh"
	groupAWS            = "karpenter.k8s.aws"
	kindProvisioner     = "Provisioner"
	kindAWSNodeTemplate = "AWSNodeTemplate"
	kindNodePool        = "NodePool"
	kindNodeClaim       = "NodeClaim"
	kindEC2NodeClass    = "EC2NodeClass"
	kindMachine         = "Machine"
)

type docRef struct {
	f          *file
	c          *chunk
	apiVersion string
	kind       string
	name       string
}

// run converts all documents: node classes first (so pools can find them), then pools, then
// kubelet placement, then the references in other kinds of documents.
func (m *migrator) run() {
	var docs []docRef
	for _, f := range m.files {
		for _, c := range f.chunks {
			r := c.root()
			if r == nil {
				continue
			}
			d := docRef{f: f, c: c, apiVersion: str(r, "apiVersion"), kind: str(r, "kind"), name: str(lookup(r, "metadata"), "name")}
			docs = append(docs, d)
			if (d.kind == kindEC2NodeClass && isKarpenterGroup(d.apiVersion)) || (d.kind == kindAWSNodeTemplate && d.apiVersion == apiAWSV1alpha1) {
				m.classNames[d.name] = true
				m.classDefs[d.name] = append(m.classDefs[d.name], fmt.Sprintf("%s:%d", f.name, lineOf(val(r, "kind"), r)))
			}
		}
	}
	for _, d := range docs {
		switch {
		case d.apiVersion == apiAWSV1beta1 && d.kind == kindEC2NodeClass:
			m.guard(d, m.convertEC2NodeClassV1beta1)
		case d.apiVersion == apiAWSV1alpha1 && d.kind == kindAWSNodeTemplate:
			m.guard(d, m.convertAWSNodeTemplate)
		case d.apiVersion == apiAWSV1 && d.kind == kindEC2NodeClass:
			m.addClass(&class{name: d.name, f: d.f, c: d.c, root: d.c.root(), existing: true})
		}
	}
	for _, d := range docs {
		switch {
		case d.apiVersion == apiV1alpha5 && d.kind == kindProvisioner:
			m.guard(d, m.convertProvisioner)
		case d.apiVersion == apiV1beta1 && d.kind == kindNodePool:
			m.guard(d, m.convertNodePoolV1beta1)
		case d.apiVersion == apiV1beta1 && d.kind == kindNodeClaim:
			m.guard(d, m.convertNodeClaimV1beta1)
		case d.apiVersion == apiV1alpha5 && d.kind == kindMachine:
			m.errorf(d.f, lineOf(val(d.c.root(), "kind")), "v1alpha5 Machine %q cannot be migrated: Machines are created by the controller and do not belong in manifests; delete this document", d.name)
		case isKarpenterGroup(d.apiVersion):
			switch d.apiVersion {
			case apiV1, apiAWSV1, apiV1beta1, apiAWSV1beta1, apiV1alpha5, apiAWSV1alpha1:
			default:
				m.errorf(d.f, lineOf(val(d.c.root(), "apiVersion")), "%s %s %q: this API version cannot be migrated (only karpenter.sh/v1alpha5, karpenter.sh/v1beta1, karpenter.k8s.aws/v1alpha1 and karpenter.k8s.aws/v1beta1 are)", d.apiVersion, d.kind, d.name)
			}
		default:
			m.fixWorkload(d)
		}
	}
	m.placeKubelets()
}

func isKarpenterGroup(apiVersion string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return g == groupKarpenter || g == groupAWS
}

// guard runs a conversion on a copy of the document and keeps the copy only when the conversion
// reported no error for it, so a failed document is left as it was.
func (m *migrator) guard(d docRef, convert func(d docRef)) {
	if a := hasAlias(d.c.doc.YNode()); a != nil {
		m.errorf(d.f, a.Line, "%s %q uses YAML anchors, aliases or merge keys, which migrate does not expand; write the values out", d.kind, d.name)
		return
	}
	before, pools, classes, after := len(m.diags), len(m.pools), len(m.classOrder), len(d.c.after)
	orig := deepCopy(d.c.doc.YNode())
	convert(d)
	for _, dg := range m.diags[before:] {
		if dg.Severity == SeverityError {
			d.c.doc = yaml.NewRNode(orig)
			d.c.after = d.c.after[:after]
			m.pools = m.pools[:pools]
			for _, name := range m.classOrder[classes:] {
				delete(m.classes, name)
			}
			m.classOrder = m.classOrder[:classes]
			return
		}
	}
	d.c.changed = true
}

// render writes a file back: unchanged documents verbatim, changed ones re-encoded, new documents
// after the one they were made from.
func (m *migrator) render(f *file) Output {
	var out bytes.Buffer
	changed := false
	for _, c := range f.chunks {
		if !c.changed {
			out.Write(c.raw)
		} else {
			changed = true
			if c.sep {
				out.WriteString("---\n")
			}
			out.Write(m.encode(f, c.startLine, c.doc.YNode()))
		}
		for _, n := range c.after {
			changed = true
			if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
				out.WriteByte('\n')
			}
			out.WriteString("---\n")
			out.Write(m.encode(f, c.startLine, n))
		}
	}
	if !changed {
		return Output{Name: f.name, Data: f.data}
	}
	return Output{Name: f.name, Data: out.Bytes(), Changed: true}
}

func (m *migrator) encode(f *file, line int, n *yaml.Node) []byte {
	var buf bytes.Buffer
	enc := yaml.NewEncoderWithOptions(&buf, &yaml.EncoderOptions{SeqIndent: f.seqIndent})
	if err := enc.Encode(n); err != nil {
		// The tree came from the parser and was only rearranged, so this is a bug in migrate.
		m.errorf(f, line, "internal error: cannot encode the converted document: %v", err)
		return nil
	}
	_ = enc.Close()
	return buf.Bytes()
}
