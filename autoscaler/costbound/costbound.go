// Package costbound computes a lower bound on the hourly cost of the new capacity a set of
// pending pods needs in one NodePool (DESIGN.md section 7):
//
//	bound = max(LP, PodBound)
//
//	LP:       minimize Σ price_i·x_i  s.t.  Σ alloc_{i,r}·x_i ≥ demand_r for every resource r
//	          (cpu, memory, pods, ephemeral-storage, each GPU/accelerator kind, ...),
//	          Σ cap_{i,l}·x_i ≤ limit_l for every pool limit l,  x ≥ 0
//	PodBound: max over pods of the price of the cheapest type the pod fits on alone
//
// Both are valid lower bounds for any feasible packing (every pod lands on some node, and a
// packing is an integer point of the LP), so their maximum is too. Types no pod fits on are left
// out of the LP (no sensible packing uses them), which tightens it.
//
// The LP is solved through its dual, maximize Σ demand_r·y_r − Σ limit_l·z_l subject to
// alloc_i·y − cap_i·z ≤ price_i, y, z ≥ 0: one variable per resource and limit, one constraint
// per type, and the origin is feasible (prices are ≥ 0), so the dense dictionary simplex of
// package lp solves it without a phase one, in a few pivots. It is pure and in-process, with no LP library.
package costbound

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/lp"
)

// Type is one instance type the pool may launch, as the bound sees it.
type Type struct {
	Name string
	// Price is the $/h of the cheapest offering the pool may use.
	Price float64
	// Allocatable is what pods may request on a node of the type, with the pool's daemonset
	// overhead already subtracted.
	Allocatable catalog.Resources
	// Capacity is counted against pool limits (Karpenter counts node capacity). The zero vector
	// means Allocatable.
	Capacity catalog.Resources
}

// PodGroup is Count identical pods. Each pod counts as one against the Pods resource, whatever
// Requests[catalog.Pods] says.
type PodGroup struct {
	Requests catalog.Resources
	Count    int
}

// Limits caps the total capacity of the new nodes: the pool's limits minus what its existing
// nodes already use. A resource absent from Resources is unlimited; Nodes nil means no node limit.
type Limits struct {
	Resources map[catalog.Resource]int64
	Nodes     *int64
}

// Problem is one pool's bound input.
type Problem struct {
	Types  []Type
	Pods   []PodGroup
	Limits *Limits
}

// Share is a fractional number of nodes of a type in the LP solution.
type Share struct {
	Type  string
	Nodes float64
}

// Result is the bound and how it was reached.
type Result struct {
	// LowerBound is max(LP, PodBound) in $/h.
	LowerBound float64
	// LP is the optimum of the resource LP in $/h.
	LP float64
	// PodBound is the price of the cheapest type that fits the hardest pod alone.
	PodBound float64
	// Mix is the LP solution: fractional node counts, largest first (then by name).
	Mix []Share
	// ShadowPrices is the LP's marginal $/h of one more unit of each resource (millicore, byte,
	// pod, device), 0 where the resource is not binding.
	ShadowPrices [catalog.NumResources]float64
	// Unfit lists the indices of the pod groups that fit no type; they are left out of the bound.
	Unfit []int
	// Pivots is the number of simplex pivots.
	Pivots int
}

// ErrInfeasible says the pods that fit cannot all be placed within the pool limits.
var ErrInfeasible = errors.New("the pods cannot be placed within the pool limits")

// Bound computes the lower bound of one pool. It returns ErrInfeasible (wrapped) when the
// limits leave no room for the demand, and an error for invalid input (negative prices or
// counts) or if the simplex fails its own optimality check.
func Bound(p Problem) (Result, error) {
	var res Result
	for i := range p.Types {
		if p.Types[i].Price < 0 || math.IsNaN(p.Types[i].Price) || math.IsInf(p.Types[i].Price, 0) {
			return res, fmt.Errorf("type %s: price %v is not a finite non-negative number", p.Types[i].Name, p.Types[i].Price)
		}
	}

	// Types the limits forbid outright (a limit of 0 or less on something they have).
	types := make([]*Type, 0, len(p.Types))
	for i := range p.Types {
		if allowedByLimits(&p.Types[i], p.Limits) {
			types = append(types, &p.Types[i])
		}
	}
	demand, fitting, err := podDemand(p.Pods, types, &res)
	if err != nil {
		return res, err
	}
	// The LP's types host at least one pod (in their order). Small pods are tried first: a
	// type usually hosts the first one it is tried with.
	order := smallFirst(fitting)
	lpTypes := types[:0:0]
	for _, t := range types {
		if hostsOne(t, fitting, order) {
			lpTypes = append(lpTypes, t)
		}
	}
	if err := solveLP(lpTypes, &demand, p.Limits, &res); err != nil {
		return res, err
	}
	res.LowerBound = math.Max(res.LP, res.PodBound)
	return res, nil
}

// fitGroup is a pod group's requests (with the pod slot) and the resources it requests.
type fitGroup struct {
	req catalog.Resources
	nz  [catalog.NumResources]catalog.Resource
	nnz int
}

// podDemand sums the demand of the pod groups that fit some type, sets res.PodBound (the
// dearest cheapest type of a pod) and res.Unfit, and returns the fitting groups. Checks compare
// only the resources a pod requests, types are tried cheapest first, and each group stops at
// the first type it fits.
func podDemand(pods []PodGroup, types []*Type, res *Result) ([catalog.NumResources]float64, []fitGroup, error) {
	var demand [catalog.NumResources]float64
	byPrice := make([]int, len(types))
	for i := range byPrice {
		byPrice[i] = i
	}
	slices.SortFunc(byPrice, func(a, b int) int {
		if types[a].Price != types[b].Price {
			return cmp.Compare(types[a].Price, types[b].Price)
		}
		return a - b
	})
	fitting := make([]fitGroup, 0, len(pods))
	for g, pg := range pods {
		if pg.Count < 0 {
			return demand, nil, fmt.Errorf("pod group %d: negative count %d", g, pg.Count)
		}
		if pg.Count == 0 {
			continue
		}
		gr := fitGroup{req: pg.Requests}
		gr.req[catalog.Pods] = 1
		for r, v := range gr.req {
			if v > 0 {
				gr.nz[gr.nnz] = catalog.Resource(r)
				gr.nnz++
			}
		}
		found := false
		for _, i := range byPrice {
			if fitsOn(&gr.req, gr.nz[:gr.nnz], &types[i].Allocatable) {
				found = true
				if types[i].Price > res.PodBound {
					res.PodBound = types[i].Price
				}
				break
			}
		}
		if !found {
			res.Unfit = append(res.Unfit, g)
			continue
		}
		fitting = append(fitting, gr)
		for r := range demand {
			demand[r] += float64(gr.req[r]) * float64(pg.Count)
		}
	}
	return demand, fitting, nil
}

// smallFirst orders the groups by cpu, then memory, then index.
func smallFirst(fitting []fitGroup) []int {
	order := make([]int, len(fitting))
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := &fitting[a].req, &fitting[b].req
		if ra[catalog.CPU] != rb[catalog.CPU] {
			return cmp.Compare(ra[catalog.CPU], rb[catalog.CPU])
		}
		if ra[catalog.Memory] != rb[catalog.Memory] {
			return cmp.Compare(ra[catalog.Memory], rb[catalog.Memory])
		}
		return a - b
	})
	return order
}

// hostsOne reports whether some group fits on the type, trying them in order.
func hostsOne(t *Type, fitting []fitGroup, order []int) bool {
	for _, k := range order {
		if fitsOn(&fitting[k].req, fitting[k].nz[:fitting[k].nnz], &t.Allocatable) {
			return true
		}
	}
	return false
}

func fitsOn(req *catalog.Resources, nz []catalog.Resource, alloc *catalog.Resources) bool {
	for _, r := range nz {
		if req[r] > alloc[r] {
			return false
		}
	}
	return true
}

func capacityOf(t *Type) *catalog.Resources {
	if t.Capacity == (catalog.Resources{}) {
		return &t.Allocatable
	}
	return &t.Capacity
}

func allowedByLimits(t *Type, l *Limits) bool {
	if l == nil {
		return true
	}
	if l.Nodes != nil && *l.Nodes <= 0 {
		return false
	}
	c := capacityOf(t)
	for r, max := range l.Resources {
		if max <= 0 && c[r] > 0 {
			return false
		}
	}
	return true
}

// limitRow is one pool limit as an LP row: per-type usage over the limit.
type limitRow struct {
	resource catalog.Resource // -1 for the node count
	max      float64
}

func solveLP(types []*Type, demand *[catalog.NumResources]float64, limits *Limits, res *Result) error {
	var resources []catalog.Resource
	for r := range demand {
		if demand[r] > 0 {
			resources = append(resources, catalog.Resource(r))
		}
	}
	if len(resources) == 0 {
		return nil // nothing to place
	}
	var lim []limitRow
	if limits != nil {
		if limits.Nodes != nil {
			lim = append(lim, limitRow{-1, float64(*limits.Nodes)})
		}
		keys := make([]catalog.Resource, 0, len(limits.Resources))
		for r := range limits.Resources {
			keys = append(keys, r)
		}
		slices.Sort(keys)
		for _, r := range keys {
			if consumed(types, r) { // a limit nothing consumes cannot bind
				lim = append(lim, limitRow{r, float64(limits.Resources[r])})
			}
		}
	}
	n, m := len(types), len(resources)+len(lim)
	d := lp.NewDictionary(n, m)
	fillDual(d, types, resources, demand, lim)
	switch d.Solve(50*(n+m) + 1000) {
	case lp.Unbounded:
		return fmt.Errorf("%w (demand %s)", ErrInfeasible, describe(resources, demand))
	case lp.IterationLimit:
		return fmt.Errorf("cost bound: simplex did not converge after %d pivots", d.Pivots)
	}
	res.Pivots = d.Pivots
	res.LP = d.Z
	return readSolution(d, types, resources, demand, res)
}

// consumed reports whether some type has some of the resource.
func consumed(types []*Type, r catalog.Resource) bool {
	for _, t := range types {
		if capacityOf(t)[r] > 0 {
			return true
		}
	}
	return false
}

// fillDual writes the dual into d, scaled: y'_r = y_r·demand_r and z'_l = z_l·limit_l, so
// every objective coefficient is ±1; each type row is divided by its price so every
// right-hand side is 1 (rows of free types keep right-hand side 0).
func fillDual(d *lp.Dictionary, types []*Type, resources []catalog.Resource, demand *[catalog.NumResources]float64, lim []limitRow) {
	m := d.M
	for j := range resources {
		d.C[j] = 1
	}
	for k := range lim {
		d.C[len(resources)+k] = -1
	}
	for i, t := range types {
		scale := 1.0
		if t.Price > 0 {
			scale = 1 / t.Price
			d.B[i] = 1
		}
		row := d.A[i*m : (i+1)*m]
		for j, r := range resources {
			row[j] = float64(t.Allocatable[r]) / demand[r] * scale
		}
		c := capacityOf(t)
		for k, l := range lim {
			use := 1.0
			if l.resource >= 0 {
				use = float64(c[l.resource])
			}
			row[len(resources)+k] = -use / l.max * scale
		}
	}
}

// readSolution takes the node counts (the covering LP's solution) and the shadow prices from
// the solved dictionary, checking the certificate on the way: the covering solution meets the
// demand and costs what the dual says.
func readSolution(d *lp.Dictionary, types []*Type, resources []catalog.Resource, demand *[catalog.NumResources]float64, res *Result) error {
	xs := d.Dual()
	primalCost := 0.0
	got := make([]float64, len(resources))
	for i, t := range types {
		x := xs[i]
		if t.Price > 0 {
			x /= t.Price
		}
		if x > 1e-12 {
			res.Mix = append(res.Mix, Share{Type: t.Name, Nodes: x})
			primalCost += x * t.Price
			for j, r := range resources {
				got[j] += x * float64(t.Allocatable[r])
			}
		}
	}
	y := d.Primal()
	for j, r := range resources {
		res.ShadowPrices[r] = y[j] / demand[r]
	}
	for j, r := range resources {
		if got[j] < demand[r]*(1-1e-6) {
			return fmt.Errorf("cost bound: LP solution covers %g of %s, demand %g (numerical trouble)", got[j], catalog.ResourceNames[r], demand[r])
		}
	}
	if math.Abs(primalCost-res.LP) > 1e-6*math.Max(1, res.LP) {
		return fmt.Errorf("cost bound: primal cost %g and dual bound %g differ (numerical trouble)", primalCost, res.LP)
	}
	slices.SortFunc(res.Mix, func(a, b Share) int {
		if c := cmp.Compare(b.Nodes, a.Nodes); c != 0 {
			return c
		}
		return cmp.Compare(a.Type, b.Type)
	})
	return nil
}

func describe(resources []catalog.Resource, demand *[catalog.NumResources]float64) string {
	s := ""
	for i, r := range resources {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %g", catalog.ResourceNames[r], demand[r])
	}
	return s
}
