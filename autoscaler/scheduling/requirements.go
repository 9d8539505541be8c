package scheduling

import (
	"math/bits"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// Label keys the engine treats specially.
const (
	labelZone         = corev1.LabelTopologyZone
	labelRegion       = corev1.LabelTopologyRegion
	labelHostname     = corev1.LabelHostname
	labelCapacityType = karpv1.LabelCapacityType
	labelNodePool     = karpv1.LabelNodePool
	labelInstanceType = corev1.LabelInstanceTypeStable
)

// Operators Karpenter adds to the core node selector operators.
const (
	opGte corev1.NodeSelectorOperator = "Gte"
	opLte corev1.NodeSelectorOperator = "Lte"
)

// req is one normalized label requirement.
type req struct {
	key    string
	op     corev1.NodeSelectorOperator
	values []string
	num    int64
	numOK  bool
}

// newReq normalizes the key (an alias such as beta.kubernetes.io/arch means kubernetes.io/arch,
// see karpv1.NormalizedLabels) and parses numeric operands.
func newReq(key string, op corev1.NodeSelectorOperator, values []string) req {
	r := req{key: karpv1.NormalizeLabel(key), op: op, values: values}
	switch op {
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, opGte, opLte:
		if len(values) == 1 {
			if n, err := strconv.ParseInt(values[0], 10, 64); err == nil {
				r.num, r.numOK = n, true
			}
		}
	}
	return r
}

// matches reports whether a label value (has = the label exists) satisfies the requirement.
func (r *req) matches(v string, has bool) bool {
	switch r.op {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, opGte, opLte:
		if !has || !r.numOK {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		switch r.op {
		case corev1.NodeSelectorOpGt:
			return n > r.num
		case corev1.NodeSelectorOpLt:
			return n < r.num
		case opGte:
			return n >= r.num
		default:
			return n <= r.num
		}
	}
	return false
}

// matchLabels reports whether a label map satisfies every requirement.
func matchLabels(reqs []req, labels map[string]string) bool {
	for i := range reqs {
		v, has := labels[reqs[i].key]
		if !reqs[i].matches(v, has) {
			return false
		}
	}
	return true
}

// tolerates reports whether a toleration list tolerates a taint (Kubernetes semantics).
func tolerates(tols []corev1.Toleration, key, value string, effect corev1.TaintEffect) bool {
	for i := range tols {
		t := &tols[i]
		if t.Effect != "" && t.Effect != effect {
			continue
		}
		if t.Key == "" {
			if t.Operator == corev1.TolerationOpExists {
				return true
			}
			continue
		}
		if t.Key != key {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if t.Value == value {
				return true
			}
		}
	}
	return false
}

// blockingEffect reports whether a taint effect keeps pods that do not tolerate it away.
func blockingEffect(e corev1.TaintEffect) bool {
	return e == corev1.TaintEffectNoSchedule || e == corev1.TaintEffectNoExecute
}

// domain is the set of values a custom (pool-defined, non-instance-type) label may take on a new
// node: either a finite set, or any value except excl.
type domain struct {
	finite bool
	vals   []string // sorted, when finite
	excl   []string // when !finite
	absent bool     // the label must not exist
}

func (d *domain) clone() *domain {
	c := *d
	c.vals = slices.Clone(d.vals)
	c.excl = slices.Clone(d.excl)
	return &c
}

func (d *domain) empty() bool { return !d.absent && d.finite && len(d.vals) == 0 }

// domainFromReq builds the domain a pool requirement allows.
func domainFromReq(r req) *domain {
	switch r.op {
	case corev1.NodeSelectorOpIn:
		v := slices.Clone(r.values)
		slices.Sort(v)
		return &domain{finite: true, vals: slices.Compact(v)}
	case corev1.NodeSelectorOpNotIn:
		return &domain{excl: slices.Clone(r.values)}
	case corev1.NodeSelectorOpDoesNotExist:
		return &domain{absent: true}
	default: // Exists, Gt, Lt, Gte, Lte: any value (numeric bounds are applied to finite sets only)
		return &domain{}
	}
}

// narrow intersects the domain with a requirement; it returns false when nothing is left.
func (d *domain) narrow(r *req) bool {
	if d.absent {
		return r.matches("", false)
	}
	switch r.op {
	case corev1.NodeSelectorOpDoesNotExist:
		return false
	case corev1.NodeSelectorOpExists:
		return !d.empty()
	case corev1.NodeSelectorOpNotIn:
		if d.finite {
			d.vals = slices.DeleteFunc(d.vals, func(v string) bool { return slices.Contains(r.values, v) })
		} else {
			d.excl = append(d.excl, r.values...)
		}
	case corev1.NodeSelectorOpIn:
		if d.finite {
			d.vals = slices.DeleteFunc(d.vals, func(v string) bool { return !slices.Contains(r.values, v) })
		} else {
			v := slices.DeleteFunc(slices.Clone(r.values), func(v string) bool { return slices.Contains(d.excl, v) })
			slices.Sort(v)
			d.vals, d.finite, d.excl = slices.Compact(v), true, nil
		}
	default:
		if d.finite {
			d.vals = slices.DeleteFunc(d.vals, func(v string) bool { return !r.matches(v, true) })
		}
	}
	return !d.empty()
}

// intersect narrows d by o (both domains of the same key).
func (d *domain) intersect(o *domain) bool {
	if o.absent {
		if !d.absent {
			return false
		}
		return true
	}
	if d.absent {
		return false
	}
	if o.finite {
		return d.narrow(&req{op: corev1.NodeSelectorOpIn, values: o.vals})
	}
	if len(o.excl) > 0 {
		return d.narrow(&req{op: corev1.NodeSelectorOpNotIn, values: o.excl})
	}
	return !d.empty()
}

// bitset is a set of small integers (instance type indexes of a pool).
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i>>6] |= 1 << uint(i&63) }
func (b bitset) has(i int) bool { return b[i>>6]&(1<<uint(i&63)) != 0 }
func (b bitset) clear(i int)    { b[i>>6] &^= 1 << uint(i&63) }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// and stores a∧o into b (which may alias a).
func (b bitset) and(a, o bitset) {
	for i := range b {
		b[i] = a[i] & o[i]
	}
}

func (b bitset) clone() bitset { return slices.Clone(b) }

func (b bitset) equal(o bitset) bool { return slices.Equal(b, o) }

// each calls f for every member in increasing order until f returns false.
func (b bitset) each(f func(i int) bool) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			if !f(wi*64 + t) {
				return
			}
			w &= w - 1
		}
	}
}
