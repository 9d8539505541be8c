package scheduling

import (
	"math/bits"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/internal/requirements"
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

// req is a node selector requirement: key normalized, numeric operand parsed once.
type req = requirements.Requirement

func newReq(key string, op corev1.NodeSelectorOperator, values []string) req {
	return requirements.New(key, op, values)
}

// Tolerates reports whether a toleration list tolerates the taint (Kubernetes semantics).
func Tolerates(tols []corev1.Toleration, t corev1.Taint) bool {
	return tolerates(tols, t.Key, t.Value, t.Effect)
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

// domain is the set of values a pool-defined label (not an instance type label, zone or
// capacity type) may take on a new node.
type domain = requirements.Values

// narrow intersects the domain with a requirement; it returns false when nothing is left.
func narrow(d *domain, r *req) bool {
	d.Add(*r)
	return d.Satisfiable()
}

// intersect narrows d by o (domains of one key); it returns false when nothing is left.
func intersect(d, o *domain) bool {
	d.Intersect(o)
	return d.Satisfiable()
}

// finiteOf lists the values a domain allows when they are finitely many (nil otherwise).
func finiteOf(d *domain) []string {
	vals, _ := d.Finite()
	return vals
}

// single is the domain's value when it allows exactly one.
func single(d *domain) (string, bool) {
	if vals, ok := d.Finite(); ok && len(vals) == 1 {
		return vals[0], true
	}
	return "", false
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
