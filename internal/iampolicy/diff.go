package iampolicy

import (
	"fmt"
	"slices"
	"sort"
)

// Diff lists how want differs from have, statement by statement (matched by Sid, or by position
// when a statement has none), as lines a plan shows: "+ statement X", "- statement X", and for a
// changed statement each value added or removed, "X: Resource + arn:…". Equal documents give
// none; the order of values in lists does not count.
func Diff(have, want Document) []string {
	haveBy := byKey(have)
	var out []string
	seen := map[string]bool{}
	for i, st := range want.Statement {
		key := key(st, i)
		seen[key] = true
		old, ok := haveBy[key]
		if !ok {
			out = append(out, "+ statement "+key)
			continue
		}
		out = append(out, statementDiff(key, old, st)...)
	}
	for i, st := range have.Statement {
		if key := key(st, i); !seen[key] {
			out = append(out, "- statement "+key)
		}
	}
	return out
}

func key(st Statement, i int) string {
	if st.Sid != "" {
		return st.Sid
	}
	return fmt.Sprintf("#%d", i+1)
}

func byKey(d Document) map[string]Statement {
	m := make(map[string]Statement, len(d.Statement))
	for i, st := range d.Statement {
		m[key(st, i)] = st
	}
	return m
}

// statementDiff compares two statements of one key field by field.
func statementDiff(key string, have, want Statement) []string {
	var out []string
	if have.Effect != want.Effect {
		out = append(out, fmt.Sprintf("%s: Effect %s → %s", key, have.Effect, want.Effect))
	}
	fields := []struct {
		name       string
		have, want []string
	}{
		{"Principal", principalValues(have.Principal), principalValues(want.Principal)},
		{"Action", have.Action, want.Action},
		{"Resource", have.Resource, want.Resource},
		{"Condition", conditionValues(have.Condition), conditionValues(want.Condition)},
	}
	for _, f := range fields {
		for _, v := range f.want {
			if !slices.Contains(f.have, v) {
				out = append(out, fmt.Sprintf("%s: %s + %s", key, f.name, v))
			}
		}
		for _, v := range f.have {
			if !slices.Contains(f.want, v) {
				out = append(out, fmt.Sprintf("%s: %s - %s", key, f.name, v))
			}
		}
	}
	return out
}

func principalValues(p *Principal) []string {
	if p == nil {
		return nil
	}
	if p.Anyone {
		return []string{"*"}
	}
	var out []string
	for _, g := range []struct {
		kind   string
		values Strings
	}{{"AWS", p.AWS}, {"Service", p.Service}, {"Federated", p.Federated}} {
		for _, v := range g.values {
			out = append(out, g.kind+" "+v)
		}
	}
	return out
}

// conditionValues flattens conditions to "Operator key value", one per value, sorted.
func conditionValues(c Conditions) []string {
	var out []string
	for op, keys := range c {
		for k, values := range keys {
			for _, v := range values {
				out = append(out, fmt.Sprintf("%s %s %s", op, k, v))
			}
		}
	}
	sort.Strings(out)
	return out
}
