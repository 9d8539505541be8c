package scheduling

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/costbound"
)

// repacker solves the pods of the most wasteful NodeClaims again (repack.go).
type repacker struct{ *solver }

// Re-packing the most wasteful NodeClaims.
//
// The cost packer fills nodes one at a time against the LP's prices for all the remaining
// demand, so the last nodes of a pool take whatever mix of cpu and memory is left: a plan can
// end with an m node full of memory but short of cpu next to an r node full of cpu with memory
// to spare. Neither shrinks, and fold cannot empty one into the other. Solved again on their
// own, the pods of a few such NodeClaims are priced for their own ratio and often need less.
// repack does that for the NodeClaims of a pool that waste the most (price above the value of
// their pods at the pool's dual prices), as sub-problems of growing size, and keeps the plan
// that saves the most. A sub-problem is solved only when its whole-pod lower bound leaves room
// for a larger saving than the best so far: on well-packed plans nothing is solved again.

// repackSizes are the numbers of NodeClaims solved again together (which size saves most
// varies from plan to plan); repackRounds caps how often a pool's plan is improved.
var repackSizes = [...]int{2, 3, 5, 8, 13, 21}

const repackRounds = 2

// repackGate: a pool's plan is left as it is when its movable NodeClaims cost at most this
// factor of their pods' whole-pod lower bound: below it the sub-problems cost time (seconds at
// 10,000 pods) for little (at most a few tenths of a percent on the calibration inputs).
const repackGate = 1.025

// repack improves the plan (see above); sub-problems are solved by solveBest, so they are not
// re-packed themselves. A plan that leaves pods unschedulable is kept as it is: a sub-plan may
// leave room (or pool limits) such a pod could use, and only the full solve places pods.
func (s *repacker) repack(res *Result) *Result {
	if len(res.Unschedulable) > 0 {
		return res
	}
	groups := s.claimGroups()
	for _, p := range s.pools {
		if len(p.minValues) > 0 {
			continue // a NodeClaim's options depend on the others' (see keepsMinValues)
		}
		var types []costbound.Type
		added := 0 // NodeClaims the pool's plan gained (p.nodes counts the plan before repack)
		for round := 0; round < repackRounds; round++ {
			claims := s.repackable(res, p, groups)
			if len(claims) < 2 {
				break
			}
			if types == nil {
				types = boundTypes(p)
			}
			if cost, bound := claimsBound(res, claims, groups, types); cost <= repackGate*bound {
				break
			}
			plan, planGroups, k := s.bestRepack(res, p, claims, groups, types, added)
			if plan == nil {
				break
			}
			res, groups = replaceClaims(res, claims[:k], plan, groups, planGroups)
			added += len(plan.NodeClaims) - k
		}
	}
	return res
}

// claimGroups lists the pods of every NodeClaim of the solver's result whose pods are all free
// to move (no topology spread, affinity or host ports count them, as for fold) as groups of
// equal requests, in the order first seen; nil for the other NodeClaims.
func (s *repacker) claimGroups() [][]costbound.PodGroup {
	out := make([][]costbound.PodGroup, len(s.claimBins))
	for i, b := range s.claimBins {
		if !s.foldable(b) || !s.movable(b) {
			continue
		}
		at := map[*class]int{}
		for _, pi := range b.pods {
			c := s.podClass[pi]
			j, ok := at[c]
			if !ok {
				j = len(out[i])
				at[c] = j
				out[i] = append(out[i], costbound.PodGroup{Requests: c.req})
			}
			out[i][j].Count++
		}
	}
	return out
}

// repackable lists the pool's movable NodeClaims, most wasteful first.
func (s *repacker) repackable(res *Result, p *poolState, groups [][]costbound.PodGroup) []int {
	var claims []int
	var demand catalog.Resources
	for i := range res.NodeClaims {
		nc := &res.NodeClaims[i]
		if nc.Pool == p.name && groups[i] != nil {
			claims = append(claims, i)
			addTo(&demand, &nc.PodRequests, 1)
		}
	}
	if len(claims) < 2 {
		return nil
	}
	var duals [catalog.NumResources]float64
	s.groupDuals(p, &demand, p.all, &duals)
	waste := make(map[int]float64, len(claims))
	for _, i := range claims {
		nc := &res.NodeClaims[i]
		v := 0.0
		for r := range duals {
			v += duals[r] * float64(nc.PodRequests[r])
		}
		waste[i] = nc.PricePerHour() - v
	}
	sort.SliceStable(claims, func(a, b int) bool { return waste[claims[a]] > waste[claims[b]] })
	return claims
}

// boundTypes are the pool's types as the whole-pod bound sees them.
func boundTypes(p *poolState) []costbound.Type {
	var types []costbound.Type
	for i := range p.types {
		t := &p.types[i]
		if !math.IsInf(t.price, 0) {
			types = append(types, costbound.Type{Name: t.it.Name, Price: t.price, Allocatable: t.usable})
		}
	}
	return types
}

// claimsBound is what the NodeClaims cost and the whole-pod lower bound of their pods.
func claimsBound(res *Result, claims []int, groups [][]costbound.PodGroup, types []costbound.Type) (float64, float64) {
	cost := 0.0
	prob := costbound.Problem{Types: types}
	for _, i := range claims {
		cost += res.NodeClaims[i].PricePerHour()
		prob.Pods = append(prob.Pods, groups[i]...)
	}
	bound, err := costbound.WholePods(prob)
	if err != nil {
		return cost, cost // no bound: nothing to gain that we can tell
	}
	return cost, bound
}

// bestRepack solves the pods of the k most wasteful NodeClaims again, for k in repackSizes, and
// returns the plan that saves the most (nil if none saves), its claimGroups and k.
func (s *repacker) bestRepack(res *Result, p *poolState, claims []int, groups [][]costbound.PodGroup, types []costbound.Type, added int) (*Result, [][]costbound.PodGroup, int) {
	var best *Result
	var bestSolver *solver
	bestK, saving := 0, 1e-9
	for _, k := range repackSizes {
		if k > len(claims) {
			break
		}
		cur, bound := claimsBound(res, claims[:k], groups, types)
		if cur-bound <= saving {
			continue // no plan of these pods can save more than the best so far
		}
		plan, sub := solveBest(s.subInput(res, p, claims[:k], added))
		if len(plan.Unschedulable) > 0 {
			continue
		}
		if d := cur - plan.TotalPricePerHour(); d > saving {
			best, bestSolver, bestK, saving = plan, sub, k, d
		}
	}
	if best == nil {
		return nil, nil, 0
	}
	return best, bestSolver.claimGroups(), bestK
}

// subInput is the input of the sub-problem: the NodeClaims' pods, the pool alone (limited to
// what the NodeClaims use of every limited resource, so that the others' options stay valid,
// and to the nodes left), and everything else of the input that shapes a node.
func (s *repacker) subInput(res *Result, p *poolState, claims []int, added int) *Input {
	sub := &Input{
		DaemonSets: s.in.DaemonSets, Namespaces: s.in.Namespaces, Region: s.in.Region, Options: s.in.Options,
		PersistentVolumeClaims: s.in.PersistentVolumeClaims, PersistentVolumes: s.in.PersistentVolumes,
		StorageClasses: s.in.StorageClasses,
	}
	var used catalog.Resources
	for _, i := range claims {
		nc := &res.NodeClaims[i]
		sub.Pods = append(sub.Pods, nc.Pods...)
		if t, _ := nc.Cheapest(); t != nil {
			addTo(&used, &t.Capacity, 1)
		}
	}
	pool := s.in.Pools[p.idx]
	if p.costLimited() {
		pool.NodePool = withCostLimit(pool.NodePool, s.claimsWorst(res, p, claims))
	}
	if len(pool.NodePool.Spec.Limits) > 0 {
		np := pool.NodePool.DeepCopy()
		for name := range np.Spec.Limits {
			if name == "nodes" {
				left := p.nodeLimit - p.nodes - int64(added) + int64(len(claims))
				np.Spec.Limits[name] = *resource.NewQuantity(left, resource.DecimalSI)
			} else if r, ok := ResourceIndex(name); ok {
				np.Spec.Limits[name] = limitQuantity(r, used[r])
			}
		}
		pool.NodePool = np
	}
	sub.Pools = []Pool{pool}
	return sub
}

// claimsWorst is what the NodeClaims count against their pool's cost limit: each its dearest
// option's dearest offering in the pool.
func (s *repacker) claimsWorst(res *Result, p *poolState, claims []int) float64 {
	worst := map[string]float64{}
	for i := range p.types {
		worst[p.types[i].it.Name] = p.types[i].worst
	}
	sum := 0.0
	for _, i := range claims {
		w := 0.0
		for _, o := range res.NodeClaims[i].InstanceTypes {
			w = max(w, worst[o.Type.Name])
		}
		sum += w
	}
	return sum
}

// withCostLimit is a copy of the NodePool whose cost limit is v, rounded up to the annotation's
// precision.
func withCostLimit(np *karpv1.NodePool, v float64) *karpv1.NodePool {
	np = np.DeepCopy()
	np.Annotations[karpoolv1alpha1.AnnotationLimitPerHour] = strconv.FormatFloat(math.Ceil(v*1e6)/1e6, 'f', 6, 64)
	return np
}

// limitQuantity is v (in catalog units) as a quantity of resource r.
func limitQuantity(r catalog.Resource, v int64) resource.Quantity {
	if r == catalog.CPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

// replaceClaims returns the plan with the given NodeClaims replaced by the sub-plan's (their
// pods' bindings follow, the NodeClaims are numbered again) and the claim groups that go with it.
func replaceClaims(res *Result, claims []int, plan *Result, groups, planGroups [][]costbound.PodGroup) (*Result, [][]costbound.PodGroup) {
	out := &Result{Unschedulable: res.Unschedulable}
	var outGroups [][]costbound.PodGroup
	newIdx := make([]int, len(res.NodeClaims))
	for i := range res.NodeClaims {
		newIdx[i] = -1
		if !slices.Contains(claims, i) {
			newIdx[i] = len(out.NodeClaims)
			out.NodeClaims = append(out.NodeClaims, res.NodeClaims[i])
			outGroups = append(outGroups, groups[i])
		}
	}
	base := len(out.NodeClaims)
	out.NodeClaims = append(out.NodeClaims, plan.NodeClaims...)
	outGroups = append(outGroups, planGroups...)
	renumber(out.NodeClaims)
	for _, bd := range res.Bindings {
		if bd.NodeClaim >= 0 {
			if bd.NodeClaim = newIdx[bd.NodeClaim]; bd.NodeClaim < 0 {
				continue
			}
			bd.Node = out.NodeClaims[bd.NodeClaim].Name
		}
		out.Bindings = append(out.Bindings, bd)
	}
	for _, bd := range plan.Bindings {
		bd.NodeClaim += base
		bd.Node = out.NodeClaims[bd.NodeClaim].Name
		out.Bindings = append(out.Bindings, bd)
	}
	return out, outGroups
}

// renumber names NodeClaims after their pool and position, as result does.
func renumber(ncs []NodeClaim) {
	perPool := map[string]int{}
	for i := range ncs {
		nc := &ncs[i]
		perPool[nc.Pool]++
		nc.Name = fmt.Sprintf("%s-%05d", nc.Pool, perPool[nc.Pool])
		nc.Labels = copyLabels(nc.Labels)
		nc.Labels[labelHostname] = nc.Name
	}
}
