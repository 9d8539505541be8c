package costbound

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/karpool/karpool/autoscaler/catalog"
)

func mustWholePods(t *testing.T, p Problem) float64 {
	t.Helper()
	v, err := WholePods(p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Two types, one short of memory and cheap per cpu, one with plenty of memory.
var (
	lean = Type{Name: "lean", Price: 1, Allocatable: res(cpu, 1000, mem, 1*Gi, pods, 100)}
	fat  = Type{Name: "fat", Price: 2, Allocatable: res(cpu, 1000, mem, 4*Gi, pods, 100)}
)

func TestWholePodsAboveTheResourceLP(t *testing.T) {
	// 40 pods of 250m and 640Mi (2.5Gi per cpu). The resource LP covers their 10 cpu and 25Gi
	// with 5 nodes of each type ($15); whole pods cannot split that way: on lean memory binds
	// (25 nodes, $25), on fat cpu (10 nodes, $20).
	p := Problem{Types: []Type{lean, fat}, Pods: []PodGroup{{Requests: res(cpu, 250, mem, 640*Mi), Count: 40}}}
	if r := mustBound(t, p); !near(r.LP, 15) {
		t.Fatalf("LP %v, want 15", r.LP)
	}
	if v := mustWholePods(t, p); !near(v, 20) {
		t.Errorf("whole pods %v, want 20", v)
	}
}

func TestWholePodsEqualsLPWhenRatiosMatchTypes(t *testing.T) {
	// Pods shaped like each type: every pod fills its own type exactly, as the LP does.
	p := Problem{Types: []Type{lean, fat}, Pods: []PodGroup{
		{Requests: res(cpu, 500, mem, 512*Mi), Count: 10},  // 5 lean nodes, $5
		{Requests: res(cpu, 500, mem, 2048*Mi), Count: 10}, // 5 fat nodes, $10
	}}
	lp := mustBound(t, p).LP
	if v := mustWholePods(t, p); !near(lp, 15) || !near(v, 15) {
		t.Errorf("LP %v, whole pods %v, want both 15", lp, v)
	}
}

func TestWholePodsPairsComplementaryPods(t *testing.T) {
	// Pods of 4Gi per cpu and of no memory at all share a "mid" node (1 cpu, 2Gi, $1) exactly:
	// half a cpu of each per node. On their own each wastes half of the node.
	mid := Type{Name: "mid", Price: 1, Allocatable: res(cpu, 1000, mem, 2*Gi, pods, 100)}
	p := Problem{Types: []Type{mid}, Pods: []PodGroup{
		{Requests: res(cpu, 500, mem, 2*Gi), Count: 4},
		{Requests: res(cpu, 500), Count: 4},
	}}
	if v := mustWholePods(t, p); !near(v, 4) {
		t.Errorf("whole pods %v, want 4", v)
	}
}

// TestWholePodsBetweenLPAndPackings: on random problems the bound is no more than a feasible
// packing (every pod alone on the cheapest type it fits) and no more than the sum of every
// pod's fluid cost on its best type (which mixing pods can only beat); and it is not below the
// resource LP. Problems of up to 8 pod groups get the exact LP; those of 100 to 300 groups have
// more distinct ratios than the LP has classes.
func TestWholePodsBetweenLPAndPackings(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	for trial := 0; trial < 400; trial++ {
		var types []Type
		for i := 0; i < 1+rng.IntN(5); i++ {
			c := int64(1000 * (1 + rng.IntN(16)))
			types = append(types, Type{
				Name:        "t",
				Price:       0.01 + rng.Float64(),
				Allocatable: res(cpu, c, mem, c*int64(1+rng.IntN(8))*Gi/1000, pods, 1000),
			})
		}
		n := 1 + rng.IntN(8)
		if trial >= 300 {
			n = 100 + rng.IntN(200)
		}
		var groups []PodGroup
		for i := 0; i < n; i++ {
			groups = append(groups, PodGroup{Requests: res(cpu, int64(100+rng.IntN(900)), mem, int64(64+rng.IntN(4000))*Mi), Count: 1 + rng.IntN(30)})
		}
		p := Problem{Types: types, Pods: groups}
		v := mustWholePods(t, p)
		// Feasible packings: every pod alone on the cheapest type it fits (if all fit).
		alone := 0.0
		for _, g := range groups {
			best := math.Inf(1)
			for _, ty := range types {
				if g.Requests[cpu] <= ty.Allocatable[cpu] && g.Requests[mem] <= ty.Allocatable[mem] {
					best = min(best, ty.Price)
				}
			}
			alone += best * float64(g.Count)
		}
		if v > alone*(1+1e-9) {
			t.Fatalf("trial %d: whole-pod bound %v above a feasible packing %v", trial, v, alone)
		}
		for _, ty := range types {
			if c := firstFitDecreasing(groups, ty); v > c*(1+1e-9) {
				t.Fatalf("trial %d: whole-pod bound %v above first-fit decreasing on one type, %v", trial, v, c)
			}
		}
		fluid := 0.0
		for _, g := range groups {
			best := math.Inf(1)
			for _, ty := range types {
				f := max(float64(g.Requests[cpu])/float64(ty.Allocatable[cpu]), float64(g.Requests[mem])/float64(ty.Allocatable[mem]))
				best = min(best, f*ty.Price)
			}
			fluid += best * float64(g.Count)
		}
		if v > fluid*(1+1e-9) {
			t.Fatalf("trial %d: whole-pod bound %v above the per-pod fluid cost %v", trial, v, fluid)
		}
		r, err := Bound(p)
		if err != nil {
			t.Fatalf("trial %d: %v\n%+v", trial, err, p)
		}
		if lp := r.LP; v < lp*(1-1e-9) {
			t.Fatalf("trial %d: whole-pod bound %v below the resource LP %v", trial, v, lp)
		}
	}
}

func TestWholePodsMemorylessType(t *testing.T) {
	// A type without memory to give still holds pods that request none: 4 × 500m fill two
	// "bare" nodes ($1), below what the front's lean type charges for them ($2).
	bare := Type{Name: "bare", Price: 0.5, Allocatable: res(cpu, 1000, pods, 100)}
	p := Problem{Types: []Type{lean, bare}, Pods: []PodGroup{{Requests: res(cpu, 500), Count: 4}}}
	if v := mustWholePods(t, p); !near(v, 1) {
		t.Errorf("whole pods %v, want 1", v)
	}
}

func TestWholePodsInput(t *testing.T) {
	if _, err := WholePods(Problem{Types: []Type{{Name: "x", Price: -1, Allocatable: res(cpu, 1000, mem, Gi)}}}); err == nil {
		t.Error("negative price accepted")
	}
	if _, err := WholePods(Problem{Types: []Type{lean}, Pods: []PodGroup{{Requests: res(cpu, 1), Count: -1}}}); err == nil {
		t.Error("negative count accepted")
	}
	// Nothing to place, or nothing that fits: 0.
	if v := mustWholePods(t, Problem{Types: []Type{lean}}); v != 0 {
		t.Errorf("no pods: %v", v)
	}
	if v := mustWholePods(t, Problem{Types: []Type{lean}, Pods: []PodGroup{{Requests: res(cpu, 5000), Count: 3}}}); v != 0 {
		t.Errorf("unfit pods: %v", v)
	}
}

// firstFitDecreasing packs the pods (largest cpu first) on nodes of one type and returns the
// cost, +Inf if some pod does not fit the type.
func firstFitDecreasing(groups []PodGroup, ty Type) float64 {
	var reqs [][2]int64
	for _, g := range groups {
		for range g.Count {
			reqs = append(reqs, [2]int64{g.Requests[cpu], g.Requests[mem]})
		}
	}
	slices.SortStableFunc(reqs, func(a, b [2]int64) int { return cmp.Compare(b[0], a[0]) })
	var nodes [][2]int64
	for _, r := range reqs {
		if r[0] > ty.Allocatable[cpu] || r[1] > ty.Allocatable[mem] {
			return math.Inf(1)
		}
		placed := false
		for i := range nodes {
			if nodes[i][0]+r[0] <= ty.Allocatable[cpu] && nodes[i][1]+r[1] <= ty.Allocatable[mem] {
				nodes[i][0] += r[0]
				nodes[i][1] += r[1]
				placed = true
				break
			}
		}
		if !placed {
			nodes = append(nodes, r)
		}
	}
	return float64(len(nodes)) * ty.Price
}

// TestWholePodsReachesTheGroupsOptimum: with more ratios than classes, the classes and their
// refinement end at the optimum of the LP over the groups themselves.
func TestWholePodsReachesTheGroupsOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for trial := 0; trial < 30; trial++ {
		var types []Type
		for i := 0; i < 2+rng.IntN(6); i++ {
			c := int64(1000 * (1 + rng.IntN(16)))
			types = append(types, Type{Name: "t", Price: 0.01 + rng.Float64(), Allocatable: res(cpu, c, mem, c*int64(1+rng.IntN(8))*Gi/1000)})
		}
		p := Problem{Types: types}
		var reqs []catalog.Resources
		cpuAt := map[float64]float64{}
		for range 50 + rng.IntN(100) {
			g := PodGroup{Requests: res(cpu, int64(100+rng.IntN(900)), mem, int64(64+rng.IntN(4000))*Mi), Count: 1 + rng.IntN(30)}
			if fitsSome(&g.Requests, types) {
				p.Pods = append(p.Pods, g)
				reqs = append(reqs, g.Requests)
				cpuAt[float64(g.Requests[mem])/float64(g.Requests[cpu])] += float64(g.Requests[cpu]) * float64(g.Count)
			}
		}
		var groups []ratioGroup
		for r, c := range cpuAt {
			groups = append(groups, ratioGroup{cpu: c, ratio: r})
		}
		front := paretoTypes(types, smallestRequests(reqs))
		_, want, err := solveClasses(front, groups)
		if err != nil {
			t.Fatal(err)
		}
		if v := mustWholePods(t, p); math.Abs(v-want) > 1e-9*want {
			t.Errorf("trial %d: whole-pod bound %v, the groups' LP %v", trial, v, want)
		}
	}
}
