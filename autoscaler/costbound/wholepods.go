package costbound

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/lp"
)

// WholePods is a second lower bound, for packings that put every pod whole on one node (all
// real ones). The resource LP of Bound lets a pod's cpu and memory be covered by different
// types: when the cheapest cpu comes from a type short of memory (a1: 2 GiB per vCPU) and the
// cheapest memory from another (r6g), it mixes the two in a way pods of ~3 GiB per vCPU cannot
// follow, and no packing gets near it. WholePods keeps each pod's memory:cpu ratio ρ:
//
//	minimize Σ_T p_T·x_T  over node types T
//	s.t. every pod group's cpu d_g is split over the types, a_{T,g} ≥ 0, Σ_T a_{T,g} = d_g,
//	     and what T gets fits x_T nodes: Σ_g a_{T,g} ≤ cpu_T·x_T, Σ_g ρ_g·a_{T,g} ≤ mem_T·x_T
//
// Its dual gives every type a price per millicore α_T and per byte β_T, both ≥ 0, at which a
// node is worth no more than it costs (cpu_T·α_T + mem_T·β_T ≤ p_T); a millicore of group g is
// then worth v_g = min_T (α_T + ρ_g·β_T), and Σ_g d_g·v_g is the bound. Any such prices give a
// valid bound (weak duality), so the LP only has to find good ones (wholePodPrices finds the
// optimal ones), and the bound is what they are worth on every group's exact ratio.
//
// Types no pod fits on are left out (no packing uses them), and so are types another type beats
// on both price per cpu and price per byte: the better type's prices, scaled by the price
// ratio, are valid for them and worth at least as much.
// Pod slots, other resources, pool limits, the sizes of single pods and pods without cpu are
// ignored — each only lowers the value, so it stays a lower bound on every feasible packing.
//
// It returns 0 when no pod requests cpu and fits some type.
func WholePods(p Problem) (float64, error) {
	for i := range p.Types {
		if pr := p.Types[i].Price; pr < 0 || math.IsNaN(pr) || math.IsInf(pr, 0) {
			return 0, fmt.Errorf("type %s: price %v is not a finite non-negative number", p.Types[i].Name, pr)
		}
	}
	// Pods that request cpu and fit some type, as millicores per memory:cpu ratio.
	cpuAt := map[float64]float64{}
	var fitting []catalog.Resources
	for g, pg := range p.Pods {
		if pg.Count < 0 {
			return 0, fmt.Errorf("pod group %d: negative count %d", g, pg.Count)
		}
		c, m := pg.Requests[catalog.CPU], pg.Requests[catalog.Memory]
		if pg.Count == 0 || c <= 0 || !fitsSome(&pg.Requests, p.Types) {
			continue
		}
		cpuAt[float64(m)/float64(c)] += float64(c) * float64(pg.Count)
		fitting = append(fitting, pg.Requests)
	}
	groups := make([]ratioGroup, 0, len(cpuAt))
	for r, c := range cpuAt {
		groups = append(groups, ratioGroup{cpu: c, ratio: r})
	}
	slices.SortFunc(groups, func(a, b ratioGroup) int { return cmp.Compare(a.ratio, b.ratio) })
	smallest := smallestRequests(fitting)
	types := paretoTypes(p.Types, smallest)
	if len(groups) == 0 || len(types) == 0 || types[0].Price == 0 {
		// Nothing to place, or a free type: fractional nodes of it hold everything for nothing.
		return 0, nil
	}
	prices, err := wholePodPrices(types, groups)
	if err != nil {
		return 0, err
	}
	memless := memlessPrice(p.Types, smallest)
	bound := 0.0
	for _, g := range groups {
		v, _ := worth(prices, g.ratio)
		if g.ratio == 0 {
			v = min(v, memless)
		}
		bound += g.cpu * v
	}
	return bound, nil
}

// ratioGroup is cpu (millicores) requested at one memory:cpu ratio (bytes per millicore).
type ratioGroup struct {
	cpu, ratio float64
}

// worth is what a millicore at the ratio is worth at the prices, and the type that sets it
// (the first of equal ones).
func worth(prices []typePrices, ratio float64) (float64, int) {
	v, at := math.Inf(1), -1
	for t, pr := range prices {
		if w := pr.cpu + ratio*pr.mem; w < v {
			v, at = w, t
		}
	}
	return v, at
}

// wholePodClasses caps the ratio classes the WholePods LP starts from; it has about
// types × classes constraints and classes + 2·types variables.
const wholePodClasses = 24

// wholePodRefinements caps how often wholePodPrices splits classes and solves again.
const wholePodRefinements = 16

// wholePodPrices returns optimal prices of the WholePods dual. More than wholePodClasses groups
// are merged into that many classes of equal geometric width (pods without memory in their
// own), each at its cpu-weighted mean ratio, which keeps the LP small. Since v_g is concave in
// ρ_g, merging can only raise the LP's optimum; so when the class optimum's prices are worth as
// much on the groups as on the classes, they are optimal for the groups too. They fall short
// only where a class straddles a ratio at which another type starts to set v; such classes are
// cut there and the LP solved again, until the value meets the class optimum (2 to 7 rounds on
// the many-small-Deployments workload). Should the cap stop that early, the best prices so far
// are still valid, only not quite optimal.
func wholePodPrices(types []*Type, groups []ratioGroup) ([]typePrices, error) {
	lo, hi := math.Inf(1), 0.0
	for _, g := range groups {
		if g.ratio > 0 {
			lo, hi = min(lo, g.ratio), max(hi, g.ratio)
		}
	}
	// cut[i]: group i starts a class. Groups are sorted by ratio, so each class is a run.
	cut := make([]bool, len(groups))
	bucket := func(i int) int {
		if r := groups[i].ratio; r > 0 {
			return min(wholePodClasses-2, int(float64(wholePodClasses-1)*math.Log(r/lo)/math.Log(hi/lo)))
		}
		return -1
	}
	for i := range groups {
		cut[i] = i == 0 || len(groups) <= wholePodClasses || bucket(i) != bucket(i-1)
	}
	var best []typePrices
	bestValue := -1.0
	setBy := make([]int, len(groups)) // the type that sets v_g at the last prices
	for round := 0; ; round++ {
		var classes []ratioGroup
		for i, g := range groups {
			if cut[i] {
				classes = append(classes, ratioGroup{})
			}
			c := &classes[len(classes)-1]
			c.cpu += g.cpu
			c.ratio += g.cpu * g.ratio // divided by cpu below: the mean
		}
		for k := range classes {
			classes[k].ratio /= classes[k].cpu
		}
		prices, optimum, err := solveClasses(types, classes)
		if err != nil {
			return nil, err
		}
		value := 0.0
		for i, g := range groups {
			v, at := worth(prices, g.ratio)
			value += g.cpu * v
			// Keep the previous group's type where it is worth as much up to round-off: types
			// with equal prices would otherwise take turns and cut every class.
			if i > 0 {
				if prev := prices[setBy[i-1]]; prev.cpu+g.ratio*prev.mem <= v*(1+1e-12) {
					at = setBy[i-1]
				}
			}
			setBy[i] = at
		}
		if value > bestValue {
			best, bestValue = prices, value
		}
		split := false
		for i := 1; i < len(groups); i++ {
			if !cut[i] && setBy[i] != setBy[i-1] {
				cut[i], split = true, true
			}
		}
		if value >= optimum*(1-1e-9) || !split || round == wholePodRefinements {
			return best, nil
		}
	}
}

// typePrices are one type's dual prices: $ per millicore and per byte.
type typePrices struct {
	cpu, mem float64
}

// solveClasses solves the dual of the WholePods LP on ratio classes,
//
//	maximize Σ_k d_k·u_k  s.t.  u_k ≤ α_T + ρ_k·β_T  and  cpu_T·α_T + mem_T·β_T ≤ p_T,
//
// and returns α and β per type, made exactly feasible, and the optimum in $/h. Variables are
// scaled so that every coefficient is near 1: u_k in units of the cheapest price per millicore
// π_0, α_T and β_T as the shares of p_T they charge for cpu and memory.
//
// This compact form has types × (classes + 1) constraints. The equivalent form with one
// constraint per way of filling a node (each class alone, and every pair of classes on either
// side of the type's ratio, ~types × classes²/4) is far more degenerate — at the optimum all
// fillings of a type are tight at once — and stalled the simplex for minutes.
func solveClasses(types []*Type, classes []ratioGroup) ([]typePrices, float64, error) {
	nt, m := len(types), len(classes)
	total := 0.0
	for _, c := range classes {
		total += c.cpu
	}
	perCPU := func(t *Type) float64 { return t.Price / float64(t.Allocatable[catalog.CPU]) }
	ratioOf := func(t *Type) float64 {
		return float64(t.Allocatable[catalog.Memory]) / float64(t.Allocatable[catalog.CPU])
	}
	pi0 := perCPU(types[0]) // the front is sorted by price per millicore

	d := lp.NewDictionary(nt*(m+1), m+2*nt)
	for k, c := range classes {
		d.C[k] = c.cpu / total
	}
	cols := d.M
	for t, ty := range types {
		for k, c := range classes {
			i := t*m + k
			row := d.A[i*cols : (i+1)*cols]
			row[k] = pi0 / perCPU(ty)
			row[m+t] = -1
			row[m+nt+t] = -c.ratio / ratioOf(ty)
		}
		i := nt*m + t
		d.A[i*cols+m+t] = 1
		d.A[i*cols+m+nt+t] = 1
		d.B[i] = 1
	}
	switch d.Solve(50*(d.N+d.M) + 1000) {
	case lp.Unbounded:
		return nil, 0, fmt.Errorf("whole-pod bound: the LP is unbounded (numerical trouble)")
	case lp.IterationLimit:
		return nil, 0, fmt.Errorf("whole-pod bound: simplex did not converge after %d pivots", d.Pivots)
	}
	y := d.Primal()
	out := make([]typePrices, nt)
	for t, ty := range types {
		a, b := max(y[m+t], 0), max(y[m+nt+t], 0)
		if s := a + b; s > 1 { // round-off: charge no more than the price
			a, b = a/s, b/s
		}
		out[t] = typePrices{cpu: a * perCPU(ty), mem: b * ty.Price / float64(ty.Allocatable[catalog.Memory])}
	}
	return out, d.Z * pi0 * total, nil
}

// paretoTypes are the types with cpu and memory that fit one of the pods, and whose price no
// other such type beats on both price per millicore and price per byte (the first of equal
// ones), by price per millicore.
func paretoTypes(all []Type, smallest []catalog.Resources) []*Type {
	var cand []*Type
	for i := range all {
		t := &all[i]
		if t.Allocatable[catalog.CPU] > 0 && t.Allocatable[catalog.Memory] > 0 && fitsOne(t, smallest) {
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

// memlessPrice is the cheapest price per millicore of the types with cpu but no memory to give
// that fit one of the pods, +Inf if none: they hold pods without memory, which the front's
// prices do not account for.
func memlessPrice(all []Type, smallest []catalog.Resources) float64 {
	best := math.Inf(1)
	for i := range all {
		if t := &all[i]; t.Allocatable[catalog.CPU] > 0 && t.Allocatable[catalog.Memory] <= 0 && fitsOne(t, smallest) {
			best = min(best, t.Price/float64(t.Allocatable[catalog.CPU]))
		}
	}
	return best
}

func fitsSome(req *catalog.Resources, types []Type) bool {
	for i := range types {
		if fitsCPUMemory(req, &types[i]) {
			return true
		}
	}
	return false
}

// fitsCPUMemory reports whether the request fits the type in cpu and memory, the resources
// WholePods looks at.
func fitsCPUMemory(req *catalog.Resources, t *Type) bool {
	return req[catalog.CPU] <= t.Allocatable[catalog.CPU] && req[catalog.Memory] <= t.Allocatable[catalog.Memory]
}

// smallestRequests are the pod requests no other one is below in both cpu and memory: a type
// fits one of the pods if and only if it fits one of these.
func smallestRequests(reqs []catalog.Resources) []catalog.Resources {
	sorted := slices.Clone(reqs)
	slices.SortFunc(sorted, func(a, b catalog.Resources) int {
		if c := cmp.Compare(a[catalog.CPU], b[catalog.CPU]); c != 0 {
			return c
		}
		return cmp.Compare(a[catalog.Memory], b[catalog.Memory])
	})
	var out []catalog.Resources
	for _, r := range sorted {
		if len(out) == 0 || r[catalog.Memory] < out[len(out)-1][catalog.Memory] {
			out = append(out, r)
		}
	}
	return out
}

func fitsOne(t *Type, reqs []catalog.Resources) bool {
	for i := range reqs {
		if fitsCPUMemory(&reqs[i], t) {
			return true
		}
	}
	return false
}
