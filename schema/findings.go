package schema

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Severity says whether a finding makes the input invalid.
type Severity string

const (
	// Error findings make `karpool vet` exit 1.
	Error Severity = "error"
	// Warning findings are printed but only fail the run with --strict.
	Warning Severity = "warning"
)

// Finding is one problem in one document, located in the user's file.
type Finding struct {
	Severity Severity `json:"severity"`
	// Rule names the check: "schema" for the CUE schema, "yaml", "limits", "deprecated-api",
	// "unknown-kind", or one of the cross-document checks and lints of schema/vet.
	Rule     string `json:"rule"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Document int    `json:"document,omitempty"` // 1-based index of the document in its file
	Kind     string `json:"kind,omitempty"`
	Name     string `json:"name,omitempty"`
	// Path is the field, Kubernetes style: spec.template.spec.requirements[0].key.
	Path string `json:"path,omitempty"`
	// Selectors is Path as field names and list indices.
	Selectors []string `json:"-"`
	// Value is the offending value as written (shortened), empty for a missing field.
	Value   string `json:"value,omitempty"`
	Message string `json:"message"`
	// Hint is a one-line suggestion for fixing it.
	Hint string `json:"hint,omitempty"`
}

// Location renders file:line:col.
func (f Finding) Location() string {
	if f.Line == 0 {
		return f.File
	}
	return fmt.Sprintf("%s:%d:%d", f.File, f.Line, f.Column)
}

// String renders the finding on one line, without the hint.
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Location())
	b.WriteString(": ")
	b.WriteString(string(f.Severity))
	b.WriteString(": ")
	if f.Path != "" {
		b.WriteString(f.Path)
		b.WriteString(": ")
	}
	b.WriteString(f.Message)
	if f.Value != "" {
		b.WriteString(" (got ")
		b.WriteString(f.Value)
		b.WriteString(")")
	}
	return b.String()
}

// Findings is a list of findings.
type Findings []Finding

// Errors counts the error findings.
func (fs Findings) Errors() int {
	n := 0
	for _, f := range fs {
		if f.Severity == Error {
			n++
		}
	}
	return n
}

// Warnings counts the warning findings.
func (fs Findings) Warnings() int { return len(fs) - fs.Errors() }

// Sort orders findings by file, line, column, then message, so output is stable.
func (fs Findings) Sort() {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Message, b.Message),
		)
	})
}
