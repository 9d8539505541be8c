// Package manifests is the one way karpool reads pool manifests, below both the reconciler and
// the autoscaler: YAML documents with their positions (Document, with caps on size, depth,
// documents and alias expansion), one positioned error type (Error), and the strict reading
// rules every reader shares (duplicate keys and non-finite numbers refused with one wording).
// Its subpackages build a path with kustomize in a confined child process (build) and check
// the objects against the types and the CUE schema (validate); `karpool vet`, `simulate`,
// `plan`, `migrate` and PoolSync all read through them.
package manifests

import (
	"fmt"
	"strings"
)

// Error is one problem with the input, located in a file when possible.
type Error struct {
	File         string
	Line, Column int
	// Rule names the kind of problem for findings: "yaml" for text YAML cannot read or reads
	// ambiguously, "limits" for input past a cap; "" when the caller has no rule to give.
	Rule    string
	Message string
}

func (e *Error) Error() string {
	switch {
	case e.File == "":
		return e.Message
	case e.Line == 0:
		return e.File + ": " + e.Message
	default:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Message)
	}
}

// Errors is every problem one reading found.
type Errors []*Error

// MaxShown is how many errors Errors.Error spells out.
const MaxShown = 5

func (es Errors) Error() string {
	return JoinFirst(len(es), MaxShown, func(i int) string { return es[i].Error() })
}

// JoinFirst writes the first max of n problems on one line ("a; b; and 3 more"), for error
// texts and condition messages.
func JoinFirst(n, max int, text func(i int) string) string {
	var parts []string
	for i := range n {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", n-max))
			break
		}
		parts = append(parts, text(i))
	}
	return strings.Join(parts, "; ")
}
