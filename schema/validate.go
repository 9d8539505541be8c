package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"go.yaml.in/yaml/v3"

	"github.com/karpool/karpool/manifests"
)

// Result is the outcome of validating one file.
type Result struct {
	// Documents are the file's non-empty documents, in order.
	Documents []*manifests.Document
	// Checked counts the documents validated against a definition; Skipped those of other kinds
	// (Deployments, Kustomizations, YAML that is not a Kubernetes object at all).
	Checked, Skipped int
	// CheckedDocs says, by document index, which documents were checked.
	CheckedDocs map[int]bool
	Findings    Findings
	// Facts holds what Pool.ValidateFileWith's inspect returned, by document index.
	Facts map[int]any
}

// ValidateFile validates every document of a YAML file or stream. Input that is not YAML, or
// breaks the limits, is reported as an error finding; the other documents are still validated.
// The error result is reserved for failures of the validator itself.
func (s *Schema) ValidateFile(filename string, data []byte, lim manifests.Limits) (*Result, error) {
	res := &Result{CheckedDocs: map[int]bool{}, Facts: map[int]any{}}
	chunks, err := manifests.Split(filename, data, lim)
	if err != nil {
		res.Findings = append(res.Findings, errorFinding(err.(*manifests.Error)))
		return res, nil
	}
	for _, c := range chunks {
		res.addChunk(s.validateChunk(filename, c, lim))
	}
	return res, nil
}

// chunkResult is the outcome of one document.
type chunkResult struct {
	doc     *manifests.Document
	fs      Findings
	checked bool
	fact    any
}

func (s *Schema) validateChunk(filename string, c manifests.Chunk, lim manifests.Limits) chunkResult {
	d, err := manifests.ParseChunk(filename, c)
	if err != nil {
		return chunkResult{fs: Findings{errorFinding(err.(*manifests.Error))}}
	}
	if d == nil {
		return chunkResult{}
	}
	// Any document, of any kind, with the build's cap (confined.Defaults): a bomb in a document
	// vet would skip is one a build would still read.
	if n, worst := manifests.AliasesAdded(d.Node, manifests.MaxAliasNodes); n > manifests.MaxAliasNodes {
		return chunkResult{doc: d, checked: true, fs: Findings{{Severity: Error, Rule: "limits", File: filename, Line: worst.Line, Column: worst.Column,
			Message: fmt.Sprintf("the YAML aliases expand to more than %d nodes: write the values out instead", manifests.MaxAliasNodes)}}}
	}
	fs, checked := s.ValidateDocument(d, lim)
	return chunkResult{doc: d, fs: fs, checked: checked}
}

func (res *Result) addChunk(r chunkResult) {
	if r.doc == nil {
		res.Findings = append(res.Findings, r.fs...)
		return
	}
	res.Documents = append(res.Documents, r.doc)
	res.add(r.doc, r.fs, r.checked)
	if r.fact != nil {
		res.Facts[r.doc.Index] = r.fact
	}
}

func (res *Result) add(d *manifests.Document, fs Findings, checked bool) {
	if !checked {
		res.Skipped++
		return
	}
	res.Checked++
	res.CheckedDocs[d.Index] = true
	res.Findings = append(res.Findings, fs...)
}

// ourKinds are the kinds of the API groups karpool knows, in any version: a document of one of
// these kinds is never skipped silently.
var ourKinds = map[string]bool{
	"NodePool": true, "NodeClaim": true, "NodeOverlay": true, "EC2NodeClass": true, "PoolSync": true, "ReviewPolicy": true, "Fleet": true,
	"Provisioner": true, "AWSNodeTemplate": true, "Machine": true,
}

// Checks reports whether karpool validates the document: it is a mapping of one of the API groups
// karpool knows, or of one of their kinds without an apiVersion.
func Checks(d *manifests.Document) bool {
	if d.Root().Kind != yaml.MappingNode {
		return false
	}
	if _, ok := Groups[d.Group()]; ok {
		return true
	}
	return ourKinds[d.Kind] && d.APIVersion == ""
}

// ValidateDocument checks one document. It reports checked=false for documents karpool does not
// validate (other API groups), and otherwise the findings.
func (s *Schema) ValidateDocument(d *manifests.Document, lim manifests.Limits) (fs Findings, checked bool) {
	if !Checks(d) {
		return nil, false
	}
	if _, ok := s.defs[d.APIVersion+"|"+d.Kind]; !ok {
		return Findings{s.unsupported(d)}, true
	}
	obj, err := d.Object(lim)
	var pe *manifests.Error
	if errors.As(err, &pe) {
		f := errorFinding(pe)
		f.Document, f.Kind, f.Name = d.Index, d.Kind, d.Name
		return Findings{f}, true
	} else if err != nil {
		return Findings{s.finding(d, nil, "cannot read the document: "+err.Error())}, true
	}
	raws, err := s.check(d.APIVersion+"|"+d.Kind, obj)
	if err != nil {
		return Findings{s.finding(d, nil, "cannot read the document: "+err.Error())}, true
	}
	fs = s.findings(d, raws)
	reported := make(map[string]bool, len(fs))
	for _, f := range fs {
		reported[f.Path] = true
	}
	if more := goRules(d, obj, reported); len(more) > 0 {
		fs = append(fs, more...)
		fs.Sort()
	}
	return fs, true
}

// rawError is one error as CUE reports it, at a path in the document.
type rawError struct {
	path []string
	msg  string
}

// memoPoint is a field, or with "*" every element of a list, that is checked on its own (see
// Schema.Memoize).
type memoPoint struct {
	path []string // with "*" for the list index
	def  string
}

// memoPoints lists, per kind, the values validated on their own. Each such definition is
// self-contained: it refers to nothing outside the value, and nothing outside refers into it
// beyond its presence, so checking the value alone says the same as checking it in its document.
// TestMemoizedValidationAgrees checks this on every corpus document.
var memoPoints = map[string][]memoPoint{
	"karpenter.sh/v1|NodePool": {
		{[]string{"spec", "template", "spec", "requirements", "*"}, "#NodePoolRequirement"},
		{[]string{"spec", "template", "spec", "taints", "*"}, "#Taint"},
		{[]string{"spec", "template", "spec", "startupTaints", "*"}, "#Taint"},
		{[]string{"spec", "disruption", "budgets", "*"}, "#Budget"},
		{[]string{"spec", "template", "spec", "nodeClassRef"}, "#NodeClassReference"},
	},
	"karpenter.sh/v1|NodeClaim": {
		{[]string{"spec", "requirements", "*"}, "#Requirement"},
		{[]string{"spec", "taints", "*"}, "#Taint"},
		{[]string{"spec", "startupTaints", "*"}, "#Taint"},
		{[]string{"spec", "nodeClassRef"}, "#NodeClassReference"},
	},
}

// check validates a document given as plain Go values against the definition for kind
// (apiVersion|kind) and returns CUE's errors.
func (s *Schema) check(kind string, obj any) ([]rawError, error) {
	if !s.Memoize || s.hollow == nil {
		return s.checkValue(s.defs[kind], obj)
	}
	// The rest of the document is checked with the elements replaced by placeholders (the
	// hollow schema accepts anything there), which spares encoding them again.
	raws, err := s.checkValue(s.hollow[kind], withPlaceholders(obj, memoPoints[kind]))
	if err != nil {
		return nil, err
	}
	for _, mp := range memoPoints[kind] {
		for _, el := range elementsAt(obj, mp.path, nil) {
			er, err := s.checkElement(mp.def, el.value)
			if err != nil {
				return nil, err
			}
			for _, r := range er {
				raws = append(raws, rawError{append(el.path[:len(el.path):len(el.path)], r.path...), r.msg})
			}
		}
	}
	return raws, nil
}

// withPlaceholders returns obj with the values at the memo points replaced by true, copying
// only the maps and lists on the way.
func withPlaceholders(obj any, mps []memoPoint) any {
	for _, mp := range mps {
		obj = replaceAt(obj, mp.path)
	}
	return obj
}

func replaceAt(obj any, path []string) any {
	if len(path) == 0 {
		return true
	}
	switch o := obj.(type) {
	case map[string]any:
		v, ok := o[path[0]]
		if !ok || path[0] == "*" {
			return obj
		}
		c := make(map[string]any, len(o))
		for k, x := range o {
			c[k] = x
		}
		c[path[0]] = replaceAt(v, path[1:])
		return c
	case []any:
		if path[0] != "*" {
			return obj
		}
		c := make([]any, len(o))
		for i, x := range o {
			c[i] = replaceAt(x, path[1:])
		}
		return c
	}
	return obj
}

type element struct {
	path  []string
	value any
}

// elementsAt returns the values at path in obj, "*" standing for every index of a list.
func elementsAt(obj any, path, prefix []string) []element {
	if len(path) == 0 {
		return []element{{prefix, obj}}
	}
	switch o := obj.(type) {
	case map[string]any:
		if path[0] == "*" {
			return nil
		}
		v, ok := o[path[0]]
		if !ok {
			return nil
		}
		return elementsAt(v, path[1:], append(prefix[:len(prefix):len(prefix)], path[0]))
	case []any:
		if path[0] != "*" {
			return nil
		}
		var out []element
		for i, v := range o {
			out = append(out, elementsAt(v, path[1:], append(prefix[:len(prefix):len(prefix)], strconv.Itoa(i)))...)
		}
		return out
	}
	return nil
}

// checkElement validates one list element against its definition, remembering the outcome by
// the element's content: the same requirement or taint in many pools is checked once.
func (s *Schema) checkElement(def string, value any) ([]rawError, error) {
	key, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	k := def + "\x00" + string(key)
	if s.memo != nil {
		if r, ok := s.memo.get(k); ok {
			return r, nil
		}
	}
	r, err := s.checkValue(s.elems[def], value)
	if err != nil {
		return nil, err
	}
	if s.memo != nil {
		s.memo.put(k, r)
	}
	return r, nil
}

// checkValue unifies obj with def and collects every error, with paths relative to obj.
func (s *Schema) checkValue(def cue.Value, obj any) ([]rawError, error) {
	data := s.ctx.Encode(obj)
	if err := data.Err(); err != nil {
		return nil, err
	}
	u := def.Unify(data)
	err := u.Validate(cue.Concrete(true), cue.All())
	if err == nil {
		return nil, nil
	}
	var raws []rawError
	seen := map[string]bool{}
	add := func(path []string, msg string) {
		key := strings.Join(path, "\x00") + "\x01" + msg
		if !seen[key] {
			seen[key] = true
			raws = append(raws, rawError{path, msg})
		}
	}
	// An error inside a struct that the schema's comprehensions read (spec, typically) makes the
	// struct itself an error, and validation stops there: walk the whole value for the errors
	// below it too.
	errs := cueerrors.Errors(err)
	errs = append(errs, collectErrors(u, obj, 0)...)
	for _, e := range errs {
		format, args := e.Msg()
		add(dataPath(e.Path()), fmt.Sprintf(format, args...))
	}
	// CUE leaves out "required but not present" while a document has other errors; every problem
	// is wanted at once, so look for missing fields separately.
	missingRequired(def, u, obj, nil, func(path []string) { add(path, "field is required but not present") }, 0)
	return raws, nil
}

// findings turns CUE's errors about a document into findings.
func (s *Schema) findings(d *manifests.Document, raws []rawError) Findings {
	// Below an unknown field everything is unknown too; say it once.
	var unknown []string
	for _, r := range raws {
		if r.msg == "field not allowed" {
			unknown = append(unknown, strings.Join(r.path, "\x00")+"\x00")
		}
	}
	// One finding per message the schema itself states (error() messages, unknown and missing
	// fields). Where CUE only says what failed inside a disjunction or a bound, one finding per
	// field, in words (see summarize).
	var order []string
	groups := map[string][]rawError{}
	for _, r := range raws {
		key := strings.Join(r.path, "\x00")
		if slices.ContainsFunc(unknown, func(u string) bool { return strings.HasPrefix(key, u) }) {
			continue
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], r)
	}
	var fs Findings
	for _, key := range order {
		g := groups[key]
		meaningful := slices.ContainsFunc(g, func(r rawError) bool { return !isNoise(r.msg) })
		if meaningful {
			for _, r := range g {
				if !isNoise(r.msg) {
					fs = append(fs, s.finding(d, r.path, r.msg))
				}
			}
			continue
		}
		msgs := make([]string, len(g))
		for i, r := range g {
			msgs[i] = r.msg
		}
		fs = append(fs, s.finding(d, g[0].path, summarize(msgs)))
	}
	fs.Sort()
	return fs
}

// unsupported explains a document of a known group (or kind) that no definition checks: a retired
// version, a mistyped kind or a missing apiVersion.
func (s *Schema) unsupported(d *manifests.Document) Finding {
	f := s.finding(d, []string{"apiVersion"}, "")
	f.Rule = "unknown-kind"
	f.Value = ""
	switch {
	case d.APIVersion == "":
		f.Message = fmt.Sprintf("apiVersion is missing; a %s is %s", d.Kind, servedVersionOf(d.Kind))
		f.Hint = "add apiVersion: " + servedVersionOf(d.Kind)
	case Retired[d.APIVersion] != "":
		f.Rule = "deprecated-api"
		f.Message = fmt.Sprintf("%s is no longer served (Karpenter v1 replaced it with %s): run `karpool migrate %s`", d.APIVersion, Retired[d.APIVersion], d.File)
		f.Hint = fmt.Sprintf("karpool migrate -w %s converts the file in place", d.File)
	case !served(d.APIVersion):
		f.Message = fmt.Sprintf("%s is not a version karpool knows; the served version is %s", d.APIVersion, Groups[d.Group()])
		f.Hint = "use apiVersion: " + Groups[d.Group()]
	default:
		f.Path = "kind"
		if n, p := d.Lookup([]string{"kind"}); p == 1 {
			f.Line, f.Column = n.Node.Line, n.Node.Column
			f.Value = manifests.Render(n.Node)
		}
		var kinds []string
		for _, def := range definitions {
			if def.APIVersion == d.APIVersion {
				kinds = append(kinds, def.Kind)
			}
		}
		f.Message = fmt.Sprintf("unknown kind %q for %s: expected %s", d.Kind, d.APIVersion, strings.Join(kinds, " or "))
		f.Hint = "check the spelling of kind"
	}
	return f
}

// served reports whether some definition checks documents of this apiVersion.
func served(apiVersion string) bool {
	return slices.ContainsFunc(definitions, func(d struct{ APIVersion, Kind, Definition string }) bool {
		return d.APIVersion == apiVersion
	})
}

func servedVersionOf(kind string) string {
	for _, d := range definitions {
		if d.Kind == kind {
			return d.APIVersion
		}
	}
	switch kind {
	case "Provisioner", "Machine":
		return "retired: run `karpool migrate` to convert it to a karpenter.sh/v1 NodePool"
	case "AWSNodeTemplate":
		return "retired: run `karpool migrate` to convert it to a karpenter.k8s.aws/v1 EC2NodeClass"
	}
	return "unknown"
}

// finding locates a problem at path in the document and explains it.
func (s *Schema) finding(d *manifests.Document, path []string, msg string) Finding {
	f := Finding{
		Severity: Error,
		Rule:     "schema",
		File:     d.File,
		Document: d.Index,
		Kind:     d.Kind,
		Name:     d.Name,
	}
	n, matched := d.Lookup(path)
	f.Message, f.Hint = explain(s, d, &path, matched == len(path), msg, n.Node)
	f.Path = FieldPath(path)
	f.Selectors = path
	if len(path) > matched {
		// explain may have named a field inside the reported one.
		n, matched = d.Lookup(path)
	}
	f.Line, f.Column, _ = d.Position(path, n, matched, msg != "field not allowed")
	if matched == len(path) && len(path) > 0 && msg != "field not allowed" {
		if v := manifests.Render(n.Node); !strings.HasSuffix(v, "...") || manifests.IsScalar(n.Node) {
			f.Value = v
		}
	}
	return f
}

// At returns a finding about the field at path of the document, located like the schema's own.
func At(d *manifests.Document, path []string, sev Severity, rule, msg, hint string) Finding {
	line, col, exact := d.Locate(path)
	f := Finding{Severity: sev, Rule: rule, File: d.File, Line: line, Column: col, Document: d.Index,
		Kind: d.Kind, Name: d.Name, Path: FieldPath(path), Selectors: path, Message: msg, Hint: hint}
	if n, matched := d.Lookup(path); exact && len(path) > 0 && matched == len(path) && manifests.IsScalar(n.Node) {
		f.Value = manifests.Render(n.Node)
	}
	return f
}

// collectErrors returns the errors of v and of every value below it, walking the document obj
// (an erroneous struct refuses to list its fields, but looking one up still works).
func collectErrors(v cue.Value, obj any, depth int) []cueerrors.Error {
	if depth > 64 {
		return nil
	}
	var out []cueerrors.Error
	if err := v.Err(); err != nil {
		out = append(out, cueerrors.Errors(err)...)
	}
	switch o := obj.(type) {
	case map[string]any:
		for k, x := range o {
			out = append(out, collectErrors(v.LookupPath(cue.MakePath(cue.Str(k))), x, depth+1)...)
		}
	case []any:
		for i, x := range o {
			out = append(out, collectErrors(v.LookupPath(cue.MakePath(cue.Index(i))), x, depth+1)...)
		}
	}
	return out
}

// missingRequired calls report for every required field (name!: in the schema) that the
// document obj lacks. It walks the document, the schema and the unified value side by side: the
// schema has the required fields even where the unified value is an error, the unified value
// has those that rules add (if schedule is set, duration!).
func missingRequired(schema, unified cue.Value, obj any, path []string, report func([]string), depth int) {
	if depth > 32 {
		return
	}
	switch o := obj.(type) {
	case map[string]any:
		required := func(v cue.Value) {
			it, err := v.Fields(cue.Optional(true))
			if err != nil {
				return
			}
			for it.Next() {
				sel := it.Selector()
				if sel.IsString() && sel.ConstraintType() == cue.RequiredConstraint {
					if _, ok := o[sel.Unquoted()]; !ok {
						report(append(path[:len(path):len(path)], sel.Unquoted()))
					}
				}
			}
		}
		required(schema)
		required(unified)
		it, err := schema.Fields(cue.Optional(true))
		if err != nil {
			return
		}
		for it.Next() {
			sel := it.Selector()
			if !sel.IsString() {
				continue
			}
			name := sel.Unquoted()
			if v, ok := o[name]; ok {
				missingRequired(it.Value(), unified.LookupPath(cue.MakePath(cue.Str(name))), v, append(path[:len(path):len(path)], name), report, depth+1)
			}
		}
	case []any:
		elem := schema.LookupPath(cue.MakePath(cue.AnyIndex))
		if !elem.Exists() {
			// A list schema with a validator such as list.MinItems(1) is an error on its own;
			// give it an element to find the element's schema.
			elem = schema.Unify(schema.Context().CompileString("[_]")).LookupPath(cue.MakePath(cue.Index(0)))
		}
		if !elem.Exists() {
			return
		}
		for i, x := range o {
			missingRequired(elem, unified.LookupPath(cue.MakePath(cue.Index(i))), x, append(path[:len(path):len(path)], strconv.Itoa(i)), report, depth+1)
		}
	}
}

var noiseRE = regexp.MustCompile(`^(\d+ errors in empty disjunction:?|conflicting values .*|invalid (left|right)-hand value .*|invalid value .* \((out of bound|does not satisfy) .*|incompatible list lengths .*)$`)

// isNoise reports messages CUE produces for the alternatives of a disjunction and for conjuncts
// of a value that already failed, as opposed to the schema's own error() messages. They are
// shown only when nothing better was said about the same field.
func isNoise(msg string) bool {
	return noiseRE.MatchString(msg)
}

// dataPath turns a CUE error path into the field path in the document: it drops the path of the
// definition the document was unified with and unquotes labels.
func dataPath(p []string) []string {
	out := make([]string, 0, len(p))
	for _, sel := range p {
		if strings.HasPrefix(sel, "#") || strings.HasPrefix(sel, "_") {
			continue
		}
		if strings.HasPrefix(sel, `"`) {
			if u, err := literal.Unquote(sel); err == nil {
				sel = u
			}
		}
		out = append(out, sel)
	}
	return out
}

// FieldPath renders a path Kubernetes style: spec.requirements[0].key,
// spec.template.metadata.labels["karpenter.sh/nodepool"].
func FieldPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if isSimpleKey(p) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
			continue
		}
		b.WriteString("[" + strconv.Quote(p) + "]")
	}
	return b.String()
}

func isSimpleKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// errorFinding is a reading error as an error finding.
func errorFinding(e *manifests.Error) Finding {
	return Finding{Severity: Error, Rule: e.Rule, File: e.File, Line: e.Line, Column: e.Column, Message: e.Message}
}
