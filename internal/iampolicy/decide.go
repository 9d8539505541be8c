package iampolicy

import (
	"fmt"
	"slices"
	"strings"
)

// Request is one authorization IAM evaluates: an action on a resource, with the condition keys
// the request carries (aws:RequestTag/k, aws:ResourceTag/k, aws:TagKeys, ec2:CreateAction,
// iam:PassedToService, ...). A key absent from Context is absent from the request.
type Request struct {
	Action   string
	Resource string
	Context  map[string][]string
}

// Decision is the outcome of a Request against a document.
type Decision struct {
	Allowed bool
	// Sid names the statement that decided: the allow, or the explicit deny.
	Sid string
	// Reason says, when the request is not allowed, why the statements that name the action
	// and resource did not allow it.
	Reason string
}

// Decide evaluates the request: an explicit deny wins, otherwise any statement that matches
// allows it, otherwise it is denied implicitly.
func Decide(r Request, docs ...Document) Decision {
	var why []string
	var allow *Statement
	for _, d := range docs {
		for i := range d.Statement {
			st := &d.Statement[i]
			if !matchesAny(st.Action, r.Action, true) || !matchesAny(st.Resource, r.Resource, false) {
				continue
			}
			ok, reason := conditionsHold(st.Condition, r.Context)
			switch {
			case ok && st.Effect == Deny:
				return Decision{Sid: st.Sid, Reason: "explicitly denied by " + name(st)}
			case ok && allow == nil:
				allow = st
			case !ok && st.Effect == Allow:
				why = append(why, name(st)+": "+reason)
			}
		}
	}
	if allow != nil {
		return Decision{Allowed: true, Sid: allow.Sid}
	}
	if len(why) == 0 {
		return Decision{Reason: fmt.Sprintf("no statement allows %s on %s", r.Action, r.Resource)}
	}
	return Decision{Reason: strings.Join(why, "; ")}
}

func name(st *Statement) string {
	if st.Sid != "" {
		return "statement " + st.Sid
	}
	return "an unnamed statement"
}

// matchesAny matches a value against patterns with IAM's wildcards (* and ?); actions compare
// without regard to case, as IAM does. No patterns (a statement without Resource, as in trust
// policies) matches anything.
func matchesAny(patterns Strings, value string, fold bool) bool {
	if len(patterns) == 0 {
		return true
	}
	if fold {
		value = strings.ToLower(value)
	}
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		if wildcard(p, value) {
			return true
		}
	}
	return false
}

// wildcard matches * (any run of characters, slashes included) and ? (one character); nothing
// else is special.
func wildcard(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0 // the last * seen, and where in s its run began
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0: // let the last * take one more character
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// conditionsHold evaluates every operator and key (all must hold); it says which failed.
func conditionsHold(c Conditions, ctx map[string][]string) (bool, string) {
	ops := make([]string, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	slices.Sort(ops) // a stable reason
	for _, op := range ops {
		keys := make([]string, 0, len(c[op]))
		for k := range c[op] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			got, present := ctx[k]
			if !holds(op, c[op][k], got, present) {
				if !present {
					return false, fmt.Sprintf("%s %s %v: the request has no %s", op, k, []string(c[op][k]), k)
				}
				return false, fmt.Sprintf("%s %s %v: the request has %v", op, k, []string(c[op][k]), got)
			}
		}
	}
	return true, ""
}

// operators compare one request value with one policy value.
var operators = map[string]func(policy, value string) bool{
	"StringEquals":    func(p, v string) bool { return p == v },
	"StringNotEquals": func(p, v string) bool { return p != v },
	"StringLike":      wildcard,
	"StringNotLike":   func(p, v string) bool { return !wildcard(p, v) },
	"ArnEquals":       func(p, v string) bool { return p == v },
	"ArnLike":         wildcard,
	"Bool":            func(p, v string) bool { return strings.EqualFold(p, v) },
	"Null":            nil, // about presence, see holds
}

// baseOperator strips the set prefix (ForAllValues:, ForAnyValue:) and the IfExists suffix.
func baseOperator(op string) string {
	if _, rest, ok := strings.Cut(op, ":"); ok {
		op = rest
	}
	return strings.TrimSuffix(op, "IfExists")
}

// holds evaluates one key of one operator.
func holds(op string, policy Strings, got []string, present bool) bool {
	set, _, _ := strings.Cut(op, ":")
	if set == op {
		set = ""
	}
	ifExists := strings.HasSuffix(op, "IfExists")
	base := baseOperator(op)
	if base == "Null" {
		// Null "true": the key must be absent; "false": present.
		return slices.ContainsFunc(policy, func(p string) bool { return strings.EqualFold(p, "true") }) == !present
	}
	cmp := operators[base]
	if cmp == nil {
		return false
	}
	negated := strings.Contains(base, "Not")
	anyPolicy := func(v string) bool {
		if negated { // a negated operator holds when the value matches none of the patterns
			return !slices.ContainsFunc(policy, func(p string) bool { return !cmp(p, v) })
		}
		return slices.ContainsFunc(policy, func(p string) bool { return cmp(p, v) })
	}
	switch set {
	case "ForAllValues":
		// Every value in the request must match; none at all holds (IAM's vacuous truth).
		return !slices.ContainsFunc(got, func(v string) bool { return !anyPolicy(v) })
	case "ForAnyValue":
		return slices.ContainsFunc(got, anyPolicy)
	}
	if !present {
		return ifExists || negated
	}
	return slices.ContainsFunc(got, anyPolicy)
}
