package manifests

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Field returns the value of key in mapping m, following aliases, or nil.
func Field(m *yaml.Node, key string) *yaml.Node {
	if m != nil && m.Kind == yaml.AliasNode {
		m = m.Alias
	}
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

// StringField returns the string value of key in mapping m: "" when it is missing or not a
// string (`kind: 1` names no kind).
func StringField(m *yaml.Node, key string) string {
	v := Field(m, key)
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return ""
	}
	return v.Value
}

// ShiftLines adds by to the line of every node of the tree that has one: nodes parsed from one
// document of a file, alone, get the lines of the file.
func ShiftLines(n *yaml.Node, by int) {
	if n == nil || by == 0 {
		return
	}
	if n.Line > 0 {
		n.Line += by
	}
	for _, c := range n.Content {
		ShiftLines(c, by)
	}
}

var syntaxLineRE = regexp.MustCompile(`line (\d+): `)

// SyntaxError locates a YAML reader's error in file, whose text carries at most a line.
func SyntaxError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "unmarshal errors:\n"))
	e := &Error{File: file, Rule: "yaml", Message: "invalid YAML: " + msg}
	if m := syntaxLineRE.FindStringSubmatchIndex(msg); m != nil {
		e.Line, _ = strconv.Atoi(msg[m[2]:m[3]])
		e.Column = 1
		e.Message = "invalid YAML: " + msg[:m[0]] + msg[m[1]:]
	}
	return e
}

// Strict finds, anywhere below n, what YAML readers read differently: a key given twice in one
// mapping (some keep the first, others the last) and a number that is not finite (.nan, .inf),
// which no Kubernetes object can hold. Aliases are not followed: their targets are checked where
// they are written.
func Strict(file string, n *yaml.Node) *Error {
	switch n.Kind {
	case yaml.MappingNode:
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				continue
			}
			if first, ok := seen[k.Value]; ok {
				return DuplicateKey(file, k, first)
			}
			seen[k.Value] = k
		}
	case yaml.ScalarNode:
		if NonFinite(n) {
			return NonFiniteError(file, n)
		}
	}
	for _, c := range n.Content {
		if e := Strict(file, c); e != nil {
			return e
		}
	}
	return nil
}

// DuplicateKey is the error for key k given again after first in one mapping.
func DuplicateKey(file string, k, first *yaml.Node) *Error {
	return &Error{File: file, Line: k.Line, Column: k.Column, Rule: "yaml",
		Message: fmt.Sprintf("key %q is given twice in this mapping (first at line %d): YAML readers disagree on which one wins, so keep one", k.Value, first.Line)}
}

// NonFinite reports whether n is a float YAML reads as NaN or an infinity.
func NonFinite(n *yaml.Node) bool {
	var f float64
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && n.Decode(&f) == nil && (math.IsNaN(f) || math.IsInf(f, 0))
}

// NonFiniteError is the error for a non-finite number n.
func NonFiniteError(file string, n *yaml.Node) *Error {
	return &Error{File: file, Line: n.Line, Column: n.Column, Rule: "yaml",
		Message: fmt.Sprintf("%s is not a finite number: write a number, or quote it to make it a string", n.Value)}
}
