package requirements

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		op      corev1.NodeSelectorOperator
		values  []string
		value   string
		present bool
		want    bool
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, "b", true, true},
		{corev1.NodeSelectorOpIn, []string{"a"}, "", false, false},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, "a", true, false},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, "", false, true},
		{corev1.NodeSelectorOpExists, nil, "x", true, true},
		{corev1.NodeSelectorOpExists, nil, "", false, false},
		{corev1.NodeSelectorOpDoesNotExist, nil, "", false, true},
		{corev1.NodeSelectorOpGt, []string{"4"}, "5", true, true},
		{corev1.NodeSelectorOpGt, []string{"4"}, "4", true, false},
		{Gte, []string{"4"}, "4", true, true},
		{corev1.NodeSelectorOpLt, []string{"4"}, "4", true, false},
		{Lte, []string{"4"}, "4", true, true},
		{Lte, []string{"4"}, "x", true, false},    // not a number
		{Gte, []string{"four"}, "9", true, false}, // operand not a number
		{Gte, []string{"4"}, "", false, false},
	} {
		r := New("k", tc.op, tc.values)
		if got := r.Matches(tc.value, tc.present); got != tc.want {
			t.Errorf("%s on %q (present %v) = %v, want %v", r.String(), tc.value, tc.present, got, tc.want)
		}
	}
}

func TestAliasesAreNormalized(t *testing.T) {
	r := New("beta.kubernetes.io/arch", corev1.NodeSelectorOpIn, []string{"arm64"})
	if r.Key != "kubernetes.io/arch" || !Match([]Requirement{r}, map[string]string{"kubernetes.io/arch": "arm64"}) {
		t.Errorf("alias kept as %s", r.Key)
	}
	if got := New("topology.ebs.csi.aws.com/zone", corev1.NodeSelectorOpIn, nil).Key; got != corev1.LabelTopologyZone {
		t.Errorf("EBS CSI zone key became %s", got)
	}
}

func TestValues(t *testing.T) {
	in := func(vals ...string) Requirement { return New("k", corev1.NodeSelectorOpIn, vals) }
	for _, tc := range []struct {
		reqs        []Requirement
		satisfiable bool
		finite      string // the allowed values, "any" when not bounded by In
		render      string
	}{
		{[]Requirement{in("a", "b", "c"), New("k", corev1.NodeSelectorOpNotIn, []string{"b"})}, true, "[a c]", "[k In [a,c]]"},
		{[]Requirement{in("a"), in("b")}, false, "[]", "[k In []]"},
		{[]Requirement{in("1", "5", "9"), New("k", corev1.NodeSelectorOpGt, []string{"3"}), New("k", Lte, []string{"5"})}, true, "[5]", "[k In [5]]"},
		{[]Requirement{New("k", corev1.NodeSelectorOpGt, []string{"3"}), New("k", corev1.NodeSelectorOpLt, []string{"4"})}, false, "any", "[k Gt [3] k Lt [4]]"},
		{[]Requirement{New("k", corev1.NodeSelectorOpExists, nil), New("k", corev1.NodeSelectorOpDoesNotExist, nil)}, false, "any", "[k DoesNotExist]"},
		{[]Requirement{New("k", corev1.NodeSelectorOpNotIn, []string{"x"}), New("k", corev1.NodeSelectorOpDoesNotExist, nil)}, true, "any", "[k DoesNotExist]"},
		{[]Requirement{New("k", corev1.NodeSelectorOpExists, nil)}, true, "any", "[k Exists]"},
	} {
		v := &Values{}
		for _, r := range tc.reqs {
			v.Add(r)
		}
		finite := "any"
		if vals, ok := v.Finite(); ok {
			finite = fmt.Sprint(vals)
			if vals == nil {
				finite = "[]"
			}
		}
		var rendered []string
		for _, r := range v.Requirements("k") {
			rendered = append(rendered, r.String())
		}
		if v.Satisfiable() != tc.satisfiable || finite != tc.finite || fmt.Sprint(rendered) != tc.render {
			t.Errorf("%v: satisfiable %v, values %s, rendered %v; want %v, %s, %s", tc.reqs, v.Satisfiable(), finite, rendered, tc.satisfiable, tc.finite, tc.render)
		}
	}
	// Intersect keeps both sides' constraints and leaves the original of a clone alone.
	a := Of(in("a", "b"))
	b := a.Clone()
	b.Intersect(Of(in("b", "c")))
	if vals, _ := b.Finite(); !slices.Equal(vals, []string{"b"}) {
		t.Errorf("intersection %v, want [b]", vals)
	}
	if vals, _ := a.Finite(); !slices.Equal(vals, []string{"a", "b"}) {
		t.Errorf("the clone's original changed to %v", vals)
	}
	if !a.Allows("a") || a.Allows("c") {
		t.Error("In [a b] must allow a, not c")
	}
	a.Pin("b")
	if vals, _ := a.Finite(); !slices.Equal(vals, []string{"b"}) {
		t.Errorf("pinned to %v, want [b]", vals)
	}
}
