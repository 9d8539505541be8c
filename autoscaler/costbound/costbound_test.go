package costbound

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// Untyped resource indexes so that res() can take them next to quantities.
const (
	cpu  = int64(catalog.CPU)
	mem  = int64(catalog.Memory)
	pods = int64(catalog.Pods)
	gpu  = int64(catalog.NvidiaGPU)
	Mi   = catalog.Mi
	Gi   = catalog.Gi
)

func res(kv ...int64) catalog.Resources {
	var r catalog.Resources
	for i := 0; i < len(kv); i += 2 {
		r[kv[i]] = kv[i+1]
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func mustBound(t *testing.T, p Problem) Result {
	t.Helper()
	r, err := Bound(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOneType(t *testing.T) {
	m5 := Type{Name: "m5.large", Price: 0.096, Allocatable: res(cpu, 1930, mem, 6903*Mi, pods, 29)}
	// 100 pods × (500m, 1Gi): cpu binds, 50000/1930 nodes.
	r := mustBound(t, Problem{Types: []Type{m5}, Pods: []PodGroup{{Requests: res(cpu, 500, mem, Gi), Count: 100}}})
	want := 50000.0 / 1930 * 0.096
	if !near(r.LP, want) || !near(r.LowerBound, want) || !near(r.PodBound, 0.096) {
		t.Errorf("LP %v bound %v pod %v, want LP %v", r.LP, r.LowerBound, r.PodBound, want)
	}
	if len(r.Mix) != 1 || !near(r.Mix[0].Nodes, 50000.0/1930) {
		t.Errorf("mix %+v", r.Mix)
	}
	if !near(r.ShadowPrices[cpu], 0.096/1930) || r.ShadowPrices[mem] != 0 {
		t.Errorf("shadow prices %v", r.ShadowPrices)
	}
	// Workshop: 5 × 1Gi on m5.large: LP = 5Gi/6903Mi of a node, but one whole node is needed.
	r = mustBound(t, Problem{Types: []Type{m5}, Pods: []PodGroup{{Requests: res(mem, Gi), Count: 5}}})
	if !near(r.LP, 5120.0/6903*0.096) || !near(r.LowerBound, 0.096) {
		t.Errorf("workshop: LP %v bound %v", r.LP, r.LowerBound)
	}
	// Pods bind: 58 tiny pods need 2 nodes' worth of pod slots.
	r = mustBound(t, Problem{Types: []Type{m5}, Pods: []PodGroup{{Requests: res(cpu, 1), Count: 58}}})
	if !near(r.LP, 2*0.096) {
		t.Errorf("pods: LP %v", r.LP)
	}
}

func TestMixingBeatsEitherType(t *testing.T) {
	a := Type{Name: "cpu-heavy", Price: 1, Allocatable: res(cpu, 4000, mem, 1*Gi, pods, 100)}
	b := Type{Name: "mem-heavy", Price: 1, Allocatable: res(cpu, 1000, mem, 4*Gi, pods, 100)}
	// 5 cpu and 5Gi: either type alone needs 5 nodes ($5); one of each covers it ($2).
	r := mustBound(t, Problem{Types: []Type{a, b}, Pods: []PodGroup{
		{Requests: res(cpu, 1000), Count: 5},
		{Requests: res(mem, Gi), Count: 5},
	}})
	if !near(r.LP, 2) || len(r.Mix) != 2 || !near(r.Mix[0].Nodes, 1) || !near(r.Mix[1].Nodes, 1) {
		t.Errorf("LP %v mix %+v", r.LP, r.Mix)
	}
	for _, only := range []Type{a, b} {
		r1 := mustBound(t, Problem{Types: []Type{only}, Pods: []PodGroup{{Requests: res(cpu, 1000), Count: 5}, {Requests: res(mem, Gi), Count: 5}}})
		if !near(r1.LP, 5) {
			t.Errorf("%s alone: LP %v, want 5", only.Name, r1.LP)
		}
	}
}

func TestGPUDemandForcesGPUType(t *testing.T) {
	m := Type{Name: "m", Price: 0.4, Allocatable: res(cpu, 8000, mem, 32*Gi, pods, 58)}
	g := Type{Name: "g", Price: 1.0, Allocatable: res(cpu, 4000, mem, 16*Gi, pods, 58, gpu, 1)}
	r := mustBound(t, Problem{Types: []Type{m, g}, Pods: []PodGroup{
		{Requests: res(cpu, 1000), Count: 10},
		{Requests: res(cpu, 1000, gpu, 1), Count: 1},
	}})
	// One g (4 cpu, the GPU) plus 7/8 of an m for the remaining 7 cpu.
	if !near(r.LP, 1.0+7.0/8*0.4) || !near(r.PodBound, 1.0) || !near(r.LowerBound, 1.35) {
		t.Errorf("LP %v pod %v bound %v mix %+v", r.LP, r.PodBound, r.LowerBound, r.Mix)
	}
}

func TestLimits(t *testing.T) {
	a := Type{Name: "a", Price: 1, Allocatable: res(cpu, 4000, mem, 8*Gi, pods, 100)}
	b := Type{Name: "b", Price: 1.5, Allocatable: res(cpu, 8000, mem, 64*Gi, pods, 100)}
	demand := []PodGroup{{Requests: res(cpu, 1000), Count: 16}}
	r := mustBound(t, Problem{Types: []Type{a, b}, Pods: demand})
	if !near(r.LP, 3) {
		t.Errorf("no limits: LP %v", r.LP)
	}
	// Memory ≤ 64Gi: x_b ≤ 2/3, so LP = 4 − 0.5·(2/3).
	r = mustBound(t, Problem{Types: []Type{a, b}, Pods: demand, Limits: &Limits{Resources: map[catalog.Resource]int64{catalog.Memory: 64 * Gi}}})
	if !near(r.LP, 4-1.0/3) {
		t.Errorf("memory limit: LP %v mix %+v", r.LP, r.Mix)
	}
	// Capacity (not allocatable) counts against limits.
	b2 := b
	b2.Capacity = res(cpu, 8000, mem, 128*Gi, pods, 100)
	r = mustBound(t, Problem{Types: []Type{a, b2}, Pods: demand, Limits: &Limits{Resources: map[catalog.Resource]int64{catalog.Memory: 64 * Gi}}})
	// 128·x_b + 8·(4 − 2x_b) ≤ 64 → x_b ≤ 2/7 → 4 − 0.5·2/7.
	if !near(r.LP, 4-1.0/7) {
		t.Errorf("capacity limit: LP %v", r.LP)
	}
	three := int64(3)
	r = mustBound(t, Problem{Types: []Type{a, b}, Pods: demand, Limits: &Limits{Nodes: &three}})
	if !near(r.LP, 3) {
		t.Errorf("nodes ≤ 3: LP %v", r.LP)
	}
	for name, l := range map[string]*Limits{
		"cpu":   {Resources: map[catalog.Resource]int64{catalog.CPU: 8000}},
		"nodes": {Nodes: ptr(int64(1))},
		"zero":  {Resources: map[catalog.Resource]int64{catalog.CPU: 0}},
	} {
		_, err := Bound(Problem{Types: []Type{a, b}, Pods: demand, Limits: l})
		if !errors.Is(err, ErrInfeasible) && name != "zero" {
			t.Errorf("%s limit: err %v, want ErrInfeasible", name, err)
		}
		if name == "zero" {
			// Every type is forbidden, so every pod is unfit.
			r, err := Bound(Problem{Types: []Type{a, b}, Pods: demand, Limits: l})
			if err != nil || len(r.Unfit) != 1 || r.LowerBound != 0 {
				t.Errorf("zero limit: %+v %v", r, err)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestUnfitAndUselessTypes(t *testing.T) {
	small := Type{Name: "small", Price: 0.01, Allocatable: res(cpu, 1000, mem, 1*Gi, pods, 10)} // very cheap per unit
	big := Type{Name: "big", Price: 1, Allocatable: res(cpu, 8000, mem, 32*Gi, pods, 100)}
	r := mustBound(t, Problem{Types: []Type{small, big}, Pods: []PodGroup{
		{Requests: res(cpu, 2000, mem, 2*Gi), Count: 8}, // fits only big
		{Requests: res(cpu, 64000), Count: 1},           // fits nothing
	}})
	if len(r.Unfit) != 1 || r.Unfit[0] != 1 {
		t.Errorf("unfit %v", r.Unfit)
	}
	// small hosts no pod, so it is not in the LP: 16 cpu on big = 2 nodes.
	if !near(r.LP, 2) || len(r.Mix) != 1 || r.Mix[0].Type != "big" {
		t.Errorf("LP %v mix %+v", r.LP, r.Mix)
	}
	// Nothing to place.
	r = mustBound(t, Problem{Types: []Type{small, big}})
	if r.LowerBound != 0 || r.LP != 0 || len(r.Mix) != 0 {
		t.Errorf("empty: %+v", r)
	}
	if _, err := Bound(Problem{Types: []Type{{Name: "x", Price: -1}}}); err == nil {
		t.Error("negative price accepted")
	}
}

// TestDegenerate has many identical and dominated types, which makes the dual degenerate.
func TestDegenerate(t *testing.T) {
	var types []Type
	for i := 0; i < 50; i++ {
		types = append(types, Type{Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), Price: 1,
			Allocatable: res(cpu, 4000, mem, 16*Gi, pods, 50)})
		types = append(types, Type{Name: "d" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Price: 2,
			Allocatable: res(cpu, 8000, mem, 32*Gi, pods, 100)})
	}
	r := mustBound(t, Problem{Types: types, Pods: []PodGroup{{Requests: res(cpu, 1000, mem, 4*Gi), Count: 40}}})
	if !near(r.LP, 10) {
		t.Errorf("LP %v", r.LP)
	}
}

// bestPacking is the exact optimum over every partition of the pods into nodes, each node the
// cheapest type its pods fit on.
func bestPacking(types []Type, pods []catalog.Resources) float64 {
	best := math.Inf(1)
	block := make([]int, len(pods))
	var rec func(i, blocks int)
	rec = func(i, blocks int) {
		if i == len(pods) {
			cost := 0.0
			for b := 0; b < blocks; b++ {
				var sum catalog.Resources
				for p, bp := range block {
					if bp == b {
						for r := range sum {
							sum[r] += pods[p][r]
						}
						sum[catalog.Pods]++
					}
				}
				cheapest := math.Inf(1)
				for _, t := range types {
					if fits(&sum, &t.Allocatable) {
						cheapest = math.Min(cheapest, t.Price)
					}
				}
				cost += cheapest
			}
			best = math.Min(best, cost)
			return
		}
		for b := 0; b <= blocks; b++ {
			block[i] = b
			nb := blocks
			if b == blocks {
				nb++
			}
			rec(i+1, nb)
		}
	}
	rec(0, 0)
	return best
}

func TestPropertyBoundBelowBestPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 400; iter++ {
		nt := 1 + rng.IntN(4)
		var types []Type
		for i := 0; i < nt; i++ {
			types = append(types, Type{
				Name:        string(rune('A' + i)),
				Price:       float64(1+rng.IntN(20)) / 10,
				Allocatable: res(cpu, int64(1+rng.IntN(8)), mem, int64(1+rng.IntN(8)), pods, int64(2+rng.IntN(5)), gpu, int64(rng.IntN(2))),
			})
		}
		np := 1 + rng.IntN(6)
		var podReqs []catalog.Resources
		var groups []PodGroup
		for i := 0; i < np; i++ {
			r := res(cpu, int64(rng.IntN(5)), mem, int64(rng.IntN(5)))
			if rng.IntN(6) == 0 {
				r[gpu] = 1
			}
			groups = append(groups, PodGroup{Requests: r, Count: 1})
			podReqs = append(podReqs, r)
		}
		result, err := Bound(Problem{Types: types, Pods: groups})
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		// Exact packing of the pods that fit somewhere.
		var fitting []catalog.Resources
		for i, pr := range podReqs {
			if !contains(result.Unfit, i) {
				fitting = append(fitting, pr)
			}
		}
		opt := 0.0
		if len(fitting) > 0 {
			opt = bestPacking(types, fitting)
		}
		if result.LowerBound > opt+1e-9 {
			t.Fatalf("iter %d: bound %v > best packing %v\ntypes %+v\npods %+v", iter, result.LowerBound, opt, types, fitting)
		}
		checkCertificate(t, iter, types, fitting, result)
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkCertificate verifies LP optimality independently of the solver: the node mix covers the
// demand, the shadow prices are dual feasible for every type that hosts a pod, and both sides
// have the same value.
func checkCertificate(t *testing.T, iter int, types []Type, pods []catalog.Resources, r Result) {
	t.Helper()
	var demand [catalog.NumResources]float64
	for _, p := range pods {
		for k := range demand {
			demand[k] += float64(p[k])
		}
		demand[catalog.Pods]++
	}
	byName := map[string]Type{}
	for _, ty := range types {
		byName[ty.Name] = ty
	}
	var covered [catalog.NumResources]float64
	primal := 0.0
	for _, s := range r.Mix {
		ty := byName[s.Type]
		primal += s.Nodes * ty.Price
		for k := range covered {
			covered[k] += s.Nodes * float64(ty.Allocatable[k])
		}
	}
	dual := 0.0
	for k := range demand {
		if covered[k] < demand[k]*(1-1e-9)-1e-9 {
			t.Fatalf("iter %d: mix covers %v of resource %d, demand %v", iter, covered[k], k, demand[k])
		}
		if r.ShadowPrices[k] < -1e-12 {
			t.Fatalf("iter %d: negative shadow price", iter)
		}
		dual += demand[k] * r.ShadowPrices[k]
	}
	for _, ty := range types {
		hosts := false
		for _, p := range pods {
			q := p
			q[catalog.Pods] = 1
			if fits(&q, &ty.Allocatable) {
				hosts = true
			}
		}
		if !hosts {
			continue
		}
		v := 0.0
		for k := range demand {
			v += float64(ty.Allocatable[k]) * r.ShadowPrices[k]
		}
		if v > ty.Price+1e-7 {
			t.Fatalf("iter %d: type %s violates the dual: %v > %v", iter, ty.Name, v, ty.Price)
		}
	}
	if !near(primal, r.LP) || math.Abs(dual-r.LP) > 1e-7*math.Max(1, r.LP) {
		t.Fatalf("iter %d: primal %v dual %v LP %v", iter, primal, dual, r.LP)
	}
}

// TestPropertyLargeRandom checks the optimality certificate on bigger random instances with
// realistic magnitudes (millicores, bytes).
func TestPropertyLargeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 100; iter++ {
		var types []Type
		for i := 0; i < 50+rng.IntN(400); i++ {
			vcpu := int64(1) << rng.IntN(8)
			ratio := int64(2) << rng.IntN(3)
			g := int64(0)
			if rng.IntN(10) == 0 {
				g = int64(1 + rng.IntN(8))
			}
			types = append(types, Type{
				Name:        string(rune('A'+i%26)) + string(rune('a'+i/26%26)) + string(rune('0'+i/676)),
				Price:       (float64(vcpu)*0.04 + float64(vcpu*ratio)*0.005 + float64(g)*0.5) * (0.8 + 0.4*rng.Float64()),
				Allocatable: res(cpu, vcpu*1000-100, mem, vcpu*ratio*Gi*92/100, pods, 8+vcpu*7, gpu, g),
			})
		}
		var groups []PodGroup
		var pods []catalog.Resources
		for i := 0; i < 1+rng.IntN(30); i++ {
			r := res(cpu, int64(50+rng.IntN(4000)), mem, int64(64+rng.IntN(16000))*Mi)
			if rng.IntN(15) == 0 {
				r[gpu] = int64(1 + rng.IntN(2))
			}
			n := 1 + rng.IntN(200)
			groups = append(groups, PodGroup{Requests: r, Count: n})
			for j := 0; j < n; j++ {
				pods = append(pods, r)
			}
		}
		result, err := Bound(Problem{Types: types, Pods: groups})
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if len(result.Unfit) != 0 {
			continue
		}
		checkCertificate(t, iter, types, pods, result)
	}
}

func TestTypesFromCatalog(t *testing.T) {
	c, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	its := c.InstanceTypes(catalog.NodeClassOptions{})
	overhead := res(cpu, 200, mem, 300*Mi, pods, 3)
	types := TypesFrom(its, overhead, Eligibility{})
	all := TypesFrom(its, overhead, Eligibility{AllowBurstable: true, AllowHPC: true, AllowMetal: true})
	var m5 *Type
	for i := range types {
		n := types[i].Name
		if n[0] == 't' && n[1] >= '0' && n[1] <= '9' || n[:3] == "hpc" || len(n) > 5 && n[len(n)-5:] == "metal" {
			t.Errorf("ineligible type %s kept", n)
		}
		if n == "m5.large" {
			m5 = &types[i]
		}
	}
	if len(all) <= len(types) || m5 == nil {
		t.Fatalf("eligible %d of %d; m5.large %v", len(types), len(all), m5)
	}
	if m5.Allocatable[cpu] != 1730 || m5.Allocatable[mem] != 6603*Mi || m5.Allocatable[pods] != 26 || m5.Price >= 0.096 {
		t.Errorf("m5.large as bound type: %+v", m5)
	}
	r := mustBound(t, Problem{Types: types, Pods: []PodGroup{{Requests: res(cpu, 250, mem, 512*Mi), Count: 1000}}})
	if r.LowerBound <= 0 || r.LP < r.PodBound {
		t.Errorf("bound %+v", r)
	}
	t.Logf("1000 × (250m, 512Mi) on %d us-east-1 types: LP $%.3f/h, mix %+v, %d pivots", len(types), r.LP, r.Mix, r.Pivots)
}

func fits(req, alloc *catalog.Resources) bool {
	for r := range req {
		if req[r] > alloc[r] {
			return false
		}
	}
	return true
}
