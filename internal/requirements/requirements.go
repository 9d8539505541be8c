// Package requirements evaluates node selector requirements the way Karpenter reads them: the
// core operators plus Gte and Lte, keys normalized (an alias such as beta.kubernetes.io/arch
// means kubernetes.io/arch, see karpv1.NormalizedLabels), and the set of values a label may take
// under several requirements at once. The scheduling engine, the AWS cloud provider and
// `karpool vet` all evaluate requirements here.
package requirements

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// Operators Karpenter adds to the core node selector operators.
const (
	Gte corev1.NodeSelectorOperator = "Gte"
	Lte corev1.NodeSelectorOperator = "Lte"
)

// Requirement is one node selector requirement, its key normalized and a numeric operand
// parsed once.
type Requirement struct {
	Key      string
	Operator corev1.NodeSelectorOperator
	Values   []string
	num      int64
	numOK    bool
}

// New builds a requirement.
func New(key string, op corev1.NodeSelectorOperator, values []string) Requirement {
	r := Requirement{Key: karpv1.NormalizeLabel(key), Operator: op, Values: values}
	if isNumeric(op) && len(values) == 1 {
		if n, err := strconv.ParseInt(values[0], 10, 64); err == nil {
			r.num, r.numOK = n, true
		}
	}
	return r
}

func isNumeric(op corev1.NodeSelectorOperator) bool {
	return op == corev1.NodeSelectorOpGt || op == corev1.NodeSelectorOpLt || op == Gte || op == Lte
}

// Matches reports whether a label with this value (present: the node carries the label)
// satisfies the requirement.
func (r *Requirement) Matches(value string, present bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	}
	if !present || !r.numOK || !isNumeric(r.Operator) {
		return false
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpGt:
		return n > r.num
	case corev1.NodeSelectorOpLt:
		return n < r.num
	case Gte:
		return n >= r.num
	default:
		return n <= r.num
	}
}

// Match reports whether a node's labels satisfy every requirement.
func Match(reqs []Requirement, labels map[string]string) bool {
	for i := range reqs {
		v, ok := labels[reqs[i].Key]
		if !reqs[i].Matches(v, ok) {
			return false
		}
	}
	return true
}

// String renders the requirement as `key In [a,b]` or `key Exists`.
func (r *Requirement) String() string {
	switch r.Operator {
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		return fmt.Sprintf("%s %s", r.Key, r.Operator)
	}
	return fmt.Sprintf("%s %s [%s]", r.Key, r.Operator, strings.Join(r.Values, ","))
}

// Values is the set of values one label may take under the requirements added to it: present
// or absent, one of a set (In), none of a set (NotIn), within numeric bounds. The zero value
// allows anything, the label's absence included.
type Values struct {
	exists, absent bool
	in             []string // sorted; nil: no In requirement
	notIn          []string // sorted
	lo, hi         int64    // exclusive bounds, where hasLo/hasHi
	hasLo, hasHi   bool
}

// Of is the set one requirement allows.
func Of(r Requirement) *Values {
	v := &Values{}
	v.Add(r)
	return v
}

// Add narrows the set by a requirement on its key.
func (v *Values) Add(r Requirement) {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		v.exists = true
		v.and(&Values{in: sortedSet(r.Values)})
	case corev1.NodeSelectorOpNotIn:
		v.notIn = union(v.notIn, sortedSet(r.Values))
	case corev1.NodeSelectorOpExists:
		v.exists = true
	case corev1.NodeSelectorOpDoesNotExist:
		v.absent = true
	default: // Gt, Lt, Gte, Lte; an operand that is no integer leaves only the existence
		v.exists = true
		if !r.numOK {
			return
		}
		switch r.Operator {
		case corev1.NodeSelectorOpGt:
			v.and(&Values{lo: r.num, hasLo: true})
		case Gte:
			v.and(&Values{lo: r.num - 1, hasLo: true})
		case corev1.NodeSelectorOpLt:
			v.and(&Values{hi: r.num, hasHi: true})
		case Lte:
			v.and(&Values{hi: r.num + 1, hasHi: true})
		}
	}
}

// Intersect narrows the set by another of the same key.
func (v *Values) Intersect(o *Values) {
	v.exists = v.exists || o.exists
	v.absent = v.absent || o.absent
	v.and(o)
}

func (v *Values) and(o *Values) {
	switch {
	case o.in == nil:
	case v.in == nil:
		v.in = slices.Clone(o.in)
	default:
		v.in = slices.DeleteFunc(v.in, func(x string) bool { _, ok := slices.BinarySearch(o.in, x); return !ok })
		if v.in == nil {
			v.in = []string{}
		}
	}
	if len(o.notIn) > 0 {
		v.notIn = union(v.notIn, o.notIn)
	}
	if o.hasLo && (!v.hasLo || o.lo > v.lo) {
		v.lo, v.hasLo = o.lo, true
	}
	if o.hasHi && (!v.hasHi || o.hi < v.hi) {
		v.hi, v.hasHi = o.hi, true
	}
}

// Clone copies the set.
func (v *Values) Clone() *Values {
	c := *v
	c.in, c.notIn = slices.Clone(v.in), slices.Clone(v.notIn)
	return &c
}

// Allows reports whether a node carrying the label with this value is in the set.
func (v *Values) Allows(x string) bool {
	if v.absent {
		return false
	}
	if v.in != nil {
		if _, ok := slices.BinarySearch(v.in, x); !ok {
			return false
		}
	}
	if _, ok := slices.BinarySearch(v.notIn, x); ok {
		return false
	}
	if v.hasLo || v.hasHi {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil || v.hasLo && n <= v.lo || v.hasHi && n >= v.hi {
			return false
		}
	}
	return true
}

// Finite returns the values the set allows when an In requirement bounds it, sorted; ok is
// false when any value not excluded is allowed.
func (v *Values) Finite() (vals []string, ok bool) {
	if v.in == nil {
		return nil, false
	}
	for _, x := range v.in {
		if v.Allows(x) {
			vals = append(vals, x)
		}
	}
	return vals, true
}

// In returns the values of the In requirements before exclusions (nil when there is none).
func (v *Values) In() []string { return v.in }

// Pin confines the set to one value.
func (v *Values) Pin(x string) {
	v.exists = true
	v.and(&Values{in: []string{x}})
}

// Satisfiable reports whether some node (with some value, or without the label) is in the set.
func (v *Values) Satisfiable() bool {
	if v.absent {
		return !v.exists
	}
	if v.in != nil {
		vals, _ := v.Finite()
		return len(vals) > 0
	}
	if v.hasLo && v.hasHi && v.hi-v.lo <= 1 {
		return false
	}
	return true
}

// Requirements renders the set as requirements on key (none when it allows anything).
func (v *Values) Requirements(key string) []Requirement {
	switch {
	case v.absent:
		return []Requirement{New(key, corev1.NodeSelectorOpDoesNotExist, nil)}
	case v.in != nil:
		vals, _ := v.Finite()
		return []Requirement{New(key, corev1.NodeSelectorOpIn, vals)}
	}
	var out []Requirement
	if len(v.notIn) > 0 {
		out = append(out, New(key, corev1.NodeSelectorOpNotIn, slices.Clone(v.notIn)))
	}
	if v.hasLo {
		out = append(out, New(key, corev1.NodeSelectorOpGt, []string{strconv.FormatInt(v.lo, 10)}))
	}
	if v.hasHi {
		out = append(out, New(key, corev1.NodeSelectorOpLt, []string{strconv.FormatInt(v.hi, 10)}))
	}
	if len(out) == 0 && v.exists {
		out = append(out, New(key, corev1.NodeSelectorOpExists, nil))
	}
	return out
}

func sortedSet(vals []string) []string {
	out := slices.Clone(vals)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
