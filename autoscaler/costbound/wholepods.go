package costbound

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// WholePods is a second lower bound, for packings that put every pod whole on one node (all
// real ones). The resource LP of Bound lets a pod's cpu and memory be covered by different
// types: when the cheapest cpu comes from a type short of memory (a1: 2 GiB per vCPU) and the
// cheapest memory from another (r6g), it mixes the two in a way pods of ~3 GiB per vCPU cannot
// follow, and no packing gets near it. WholePods keeps each pod's memory:cpu ratio:
//
//	minimize Σ price_T·x_T  over node types T
//	s.t. the pods are assigned (fractionally) to types, and the pods assigned to T fit into
//	     x_T nodes of T in cpu and in memory.
//
// For cpu and memory alone the ways to fill one node are spanned by one ratio class alone,
// and two classes on either side of the type's own ratio mixed so that both resources are used
// up, so the LP has one column per such filling and one row per ratio class. To stay a valid
// bound while keeping the LP small, pods are grouped into classes of geometric ratio width
// with every pod's memory rounded down to its class's lowest ratio; types another type beats
// on both price per cpu and price per byte are left out (fractional nodes of the better type
// replace them at no more cost). Pod slots, other resources, pool limits, the sizes of single
// pods and pods without cpu are ignored — each only lowers the value, so it stays a lower
// bound on every feasible packing.
//
// It returns 0 when no pod requests cpu and fits some type.
func WholePods(p Problem) (float64, error) {
	for i := range p.Types {
		if pr := p.Types[i].Price; pr < 0 || math.IsNaN(pr) || math.IsInf(pr, 0) {
			return 0, fmt.Errorf("type %s: price %v is not a finite non-negative number", p.Types[i].Name, pr)
		}
	}
	types := paretoTypes(p.Types)
	if len(types) == 0 {
		return 0, nil
	}

	// Pods that request cpu and fit some type, as (cpu, ratio) with their counts.
	type group struct {
		cpu, ratio float64
	}
	var groups []group
	for g, pg := range p.Pods {
		if pg.Count < 0 {
			return 0, fmt.Errorf("pod group %d: negative count %d", g, pg.Count)
		}
		c, m := pg.Requests[catalog.CPU], pg.Requests[catalog.Memory]
		if pg.Count == 0 || c <= 0 || !fitsSome(&pg.Requests, p.Types) {
			continue
		}
		groups = append(groups, group{cpu: float64(c) * float64(pg.Count), ratio: float64(m) / float64(c)})
	}
	if len(groups) == 0 {
		return 0, nil
	}

	// Ratio classes: pods without memory in their own, the others in wholePodClasses classes
	// of equal geometric width; each class is represented by the lowest ratio it may hold.
	lo, hi := math.Inf(1), 0.0
	for _, g := range groups {
		if g.ratio > 0 {
			lo, hi = min(lo, g.ratio), max(hi, g.ratio)
		}
	}
	classOf := func(r float64) int {
		if r == 0 {
			return 0
		}
		if hi <= lo {
			return 1
		}
		return 1 + min(wholePodClasses-1, int(float64(wholePodClasses)*math.Log(r/lo)/math.Log(hi/lo)))
	}
	floorOf := func(k int) float64 {
		if k == 0 {
			return 0
		}
		return lo * math.Pow(hi/lo, float64(k-1)/wholePodClasses)
	}
	demand := map[int]float64{}
	for _, g := range groups {
		demand[classOf(g.ratio)] += g.cpu
	}
	keys := make([]int, 0, len(demand))
	for k := range demand {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	m := len(keys)
	rho := make([]float64, m)
	for j, k := range keys {
		rho[j] = floorOf(k)
	}

	// Columns (one LP constraint each in the dual): cpu of each class one node holds.
	type column struct {
		price  float64
		a, b   int // classes; b < 0 for one class alone
		qa, qb float64
	}
	var cols []column
	for _, t := range types {
		c, mem := float64(t.Allocatable[catalog.CPU]), float64(t.Allocatable[catalog.Memory])
		r := mem / c
		for a := range m {
			q := c
			if rho[a] > 0 {
				q = min(c, mem/rho[a])
			}
			cols = append(cols, column{price: t.Price, a: a, b: -1, qa: q})
			if rho[a] >= r {
				continue
			}
			for b := a + 1; b < m; b++ {
				if rho[b] <= r {
					continue
				}
				qb := (mem - c*rho[a]) / (rho[b] - rho[a])
				cols = append(cols, column{price: t.Price, a: a, b: b, qa: c - qb, qb: qb})
			}
		}
	}

	// Dual: maximize Σ demand_k·u_k s.t. Σ_k q_{col,k}·u_k ≤ price_col, u ≥ 0, scaled like
	// solveLP (u'_k = u_k·demand_k, rows divided by their price).
	d := newDictionary(len(cols), m)
	for j := range m {
		d.c[j] = 1
	}
	for i, col := range cols {
		scale := 1.0
		if col.price > 0 {
			scale = 1 / col.price
			d.b[i] = 1
		}
		d.a[i*m+col.a] = col.qa / demand[keys[col.a]] * scale
		if col.b >= 0 {
			d.a[i*m+col.b] = col.qb / demand[keys[col.b]] * scale
		}
	}
	switch d.solve(50*(len(cols)+m) + 1000) {
	case lpUnbounded:
		return 0, fmt.Errorf("whole-pod bound: the LP is unbounded (numerical trouble)")
	case lpIterationLimit:
		return 0, fmt.Errorf("whole-pod bound: simplex did not converge after %d pivots", d.pivots)
	}
	return d.z, nil
}

// wholePodClasses is the number of ratio classes of WholePods: rounding takes from each pod at
// most a factor (highest ratio / lowest ratio)^(1/96) of its memory (1.7 % for a 5× range),
// and the LP has about types × classes²/4 constraints.
const wholePodClasses = 96

// paretoTypes are the types with cpu, memory and a price that no other type beats on both price
// per millicore and price per byte (the first of equal ones).
func paretoTypes(all []Type) []*Type {
	var cand []*Type
	for i := range all {
		t := &all[i]
		if t.Allocatable[catalog.CPU] > 0 && t.Allocatable[catalog.Memory] > 0 {
			cand = append(cand, t)
		}
	}
	perCPU := func(t *Type) float64 { return t.Price / float64(t.Allocatable[catalog.CPU]) }
	perByte := func(t *Type) float64 { return t.Price / float64(t.Allocatable[catalog.Memory]) }
	slices.SortStableFunc(cand, func(a, b *Type) int {
		if c := cmp.Compare(perCPU(a), perCPU(b)); c != 0 {
			return c
		}
		return cmp.Compare(perByte(a), perByte(b))
	})
	var front []*Type
	for _, t := range cand {
		if len(front) == 0 || perByte(t) < perByte(front[len(front)-1]) {
			front = append(front, t)
		}
	}
	return front
}

func fitsSome(req *catalog.Resources, types []Type) bool {
	for i := range types {
		if req[catalog.CPU] <= types[i].Allocatable[catalog.CPU] && req[catalog.Memory] <= types[i].Allocatable[catalog.Memory] {
			return true
		}
	}
	return false
}
