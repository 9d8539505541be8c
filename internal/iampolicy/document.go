// Package iampolicy holds IAM policy documents as data, and decides requests against them.
//
// karpool's AWS prerequisites are rendered from documents built with these types (to
// CloudFormation, Terraform JSON and IAM/SQS API calls), and the least-privilege tests decide
// every request the controller made in the e2e suite against the very same statements: one
// policy source. The decision is a model of IAM's evaluation for identity and resource policies
// (explicit deny wins, then any matching allow), covering the condition operators those
// documents use; it is not a general IAM engine (no policy variables, no NotAction/NotResource).
package iampolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Version is the policy language version every document uses.
const Version = "2012-10-17"

// Document is an IAM policy: identity, trust or resource policy.
type Document struct {
	Version   string      `json:"Version"`
	ID        string      `json:"Id,omitempty"`
	Statement []Statement `json:"Statement"`
}

// Effect is Allow or Deny.
type Effect string

// The two effects.
const (
	Allow Effect = "Allow"
	Deny  Effect = "Deny"
)

// Statement is one statement. Principal is set in trust and resource policies only.
type Statement struct {
	Sid       string     `json:"Sid,omitempty"`
	Effect    Effect     `json:"Effect"`
	Principal *Principal `json:"Principal,omitempty"`
	Action    Strings    `json:"Action"`
	Resource  Strings    `json:"Resource,omitempty"`
	Condition Conditions `json:"Condition,omitempty"`
}

// Conditions maps an operator (StringEquals, ForAllValues:StringEquals, ...) to condition keys
// and the values any of which satisfies the key.
type Conditions map[string]map[string]Strings

// Strings is a list that IAM writes as a plain string when it has one element.
type Strings []string

// MarshalJSON writes one element as a string, as IAM and the reference template do.
func (s Strings) MarshalJSON() ([]byte, error) {
	if len(s) == 1 {
		return json.Marshal(s[0])
	}
	return json.Marshal([]string(s))
}

// UnmarshalJSON reads a string or a list of strings.
func (s *Strings) UnmarshalJSON(data []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte(`"`)) {
		var one string
		if err := json.Unmarshal(data, &one); err != nil {
			return err
		}
		*s = Strings{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings: %w", err)
	}
	*s = many
	return nil
}

// Principal says who a trust or resource policy statement applies to. Anyone is the "*"
// principal.
type Principal struct {
	Anyone    bool    `json:"-"`
	AWS       Strings `json:"AWS,omitempty"`
	Service   Strings `json:"Service,omitempty"`
	Federated Strings `json:"Federated,omitempty"`
}

type principalFields Principal // without the methods, for the default encoding

// MarshalJSON writes "*" for anyone, else the object.
func (p Principal) MarshalJSON() ([]byte, error) {
	if p.Anyone {
		return []byte(`"*"`), nil
	}
	return json.Marshal(principalFields(p))
}

// UnmarshalJSON reads "*" or an object.
func (p *Principal) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == `"*"` {
		*p = Principal{Anyone: true}
		return nil
	}
	var f principalFields
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("principal: want \"*\" or an object of AWS, Service and Federated: %w", err)
	}
	*p = Principal(f)
	return nil
}

// JSON is the document as IAM stores it: indented, keys in a stable order.
func (d Document) JSON() string {
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("iampolicy: a document of plain strings failed to encode: %v", err))
	}
	return string(data)
}

// Chars is the document's size as IAM counts it against its limits: the JSON without whitespace
// outside strings.
func (d Document) Chars() int {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(d.JSON())); err != nil {
		return len(d.JSON())
	}
	return buf.Len()
}

// Parse reads a policy document (IAM returns them URL-decoded JSON) and checks its shape.
func Parse(text string) (Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Document{}, fmt.Errorf("policy document: %w", err)
	}
	for i, st := range d.Statement {
		if st.Effect != Allow && st.Effect != Deny {
			return Document{}, fmt.Errorf("policy document: Statement[%d].Effect is %q: want Allow or Deny", i, st.Effect)
		}
		if len(st.Action) == 0 {
			return Document{}, fmt.Errorf("policy document: Statement[%d] has no Action", i)
		}
		for op := range st.Condition {
			if _, ok := operators[baseOperator(op)]; !ok {
				return Document{}, fmt.Errorf("policy document: Statement[%d] uses condition operator %q, which karpool does not evaluate", i, op)
			}
		}
	}
	return d, nil
}

// Equal says whether two documents are the same statements, whatever the order of the values
// in their lists (IAM keeps what it is given, but people and tools reorder lists).
func Equal(a, b Document) bool {
	return normal(a) == normal(b)
}

// normal encodes a document with every list sorted.
func normal(d Document) string {
	c := Document{Version: d.Version, ID: d.ID}
	for _, st := range d.Statement {
		n := st
		n.Action, n.Resource = sorted(st.Action), sorted(st.Resource)
		if st.Principal != nil {
			p := *st.Principal
			p.AWS, p.Service, p.Federated = sorted(p.AWS), sorted(p.Service), sorted(p.Federated)
			n.Principal = &p
		}
		if st.Condition != nil {
			n.Condition = Conditions{}
			for op, keys := range st.Condition {
				n.Condition[op] = map[string]Strings{}
				for k, v := range keys {
					n.Condition[op][k] = sorted(v)
				}
			}
		}
		c.Statement = append(c.Statement, n)
	}
	return c.JSON()
}

func sorted(s Strings) Strings {
	if s == nil {
		return nil
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
