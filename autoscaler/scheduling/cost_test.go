package scheduling_test

import (
	"slices"
	"testing"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/costbound"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// lowerBound computes the cost lower bound of all pods of the input on its only pool.
func lowerBound(tb testing.TB, in *scheduling.Input) costbound.Result {
	tb.Helper()
	res, err := costbound.Bound(boundProblem(in))
	if err != nil {
		tb.Fatalf("bound: %v", err)
	}
	return res
}

// wholePodBound computes costbound.WholePods for all pods of the input on its only pool.
func wholePodBound(tb testing.TB, in *scheduling.Input) float64 {
	tb.Helper()
	v, err := costbound.WholePods(boundProblem(in))
	if err != nil {
		tb.Fatalf("whole-pod bound: %v", err)
	}
	return v
}

func boundProblem(in *scheduling.Input) costbound.Problem {
	var types []costbound.Type
	for _, pt := range scheduling.NewPoolTypes(in).Of(0) {
		if !costbound.Eligible(&pt.Type, costbound.Eligibility{}) {
			continue
		}
		t := costbound.Type{Name: pt.Type.Name, Price: pt.PricePerHour, Capacity: pt.Type.Capacity}
		for r := range t.Allocatable {
			t.Allocatable[r] = pt.Type.Allocatable[r] - pt.DaemonSetOverhead[r]
		}
		types = append(types, t)
	}
	groups := map[catalog.Resources]int{}
	var order []catalog.Resources
	for _, p := range in.Pods {
		r, _ := scheduling.PodRequests(p)
		if groups[r] == 0 {
			order = append(order, r)
		}
		groups[r]++
	}
	prob := costbound.Problem{Types: types}
	for _, r := range order {
		prob.Pods = append(prob.Pods, costbound.PodGroup{Requests: r, Count: groups[r]})
	}
	return prob
}

// costCase solves one lognormal case on the real us-east-1 catalog and returns cost/bound and
// the whole-pod bound/bound.
func costCase(t *testing.T, name string, in *scheduling.Input) (ratio, wholePods float64) {
	t.Helper()
	res := scheduling.Solve(in)
	if len(res.Unschedulable) > 0 {
		t.Fatalf("%s: %d unschedulable: %s", name, len(res.Unschedulable), res.Unschedulable[0].Reason)
	}
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Fatalf("%s: checker: %v", name, err)
	}
	b := lowerBound(t, in).LowerBound
	w := wholePodBound(t, in)
	ratio, wholePods = res.TotalPricePerHour()/b, w/b
	t.Logf("%s: %d nodes, $%.2f/h; lower bound $%.2f/h, ratio %.4f; whole-pod bound $%.2f/h = %.4f × the lower bound, cost %.4f × it",
		name, len(res.NodeClaims), res.TotalPricePerHour(), b, ratio, w, wholePods, res.TotalPricePerHour()/w)
	return ratio, wholePods
}

// TestLognormalCostNearBound: 10k pods of the "lognormal" profile (memory about 3 GiB per vCPU)
// against the LP lower bound of package costbound (DESIGN.md section 7).
//
// The c/m/r pool meets the target (≤ 1.05). With every non-burstable type the target of
// 1.10 cannot be met by any packing: the LP covers cpu with a1 (Graviton 1, $0.0255 per vCPU,
// 2 GiB per vCPU) and memory with r6g, a split pods of ~3 GiB per vCPU cannot make, and the
// whole-pod bound (costbound.WholePods, valid for every packing of whole pods) is 1.19 × the
// LP. The test asserts that, and guards how close the packer gets to the whole-pod bound.
func TestLognormalCostNearBound(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the catalog and solves 10k pods twice")
	}
	pods := workload.Lognormal(10000)
	if r, _ := costCase(t, "c/m/r generations 5-8", lognormalInput(t, pods, cmrPool())); r > 1.05 {
		t.Errorf("c/m/r: cost %.4f × the lower bound, want ≤ 1.05", r)
	}
	r, w := costCase(t, "all non-burstable types", lognormalInput(t, pods, allNonBurstablePool()))
	if w <= 1.10 {
		t.Errorf("all types: whole-pod bound %.4f × the lower bound; the issue's 1.10 might be reachable", w)
	}
	if r > w*1.015 {
		t.Errorf("all types: cost %.4f × the lower bound, %.4f × the whole-pod bound, want ≤ 1.015 × it", r, r/w)
	}
}

// TestLognormalIndependentCostNearBound: the same with cpu and memory drawn independently
// (both lognormal, σ 0.9, medians 250m and 750Mi), where pods of very different shapes let a
// mixed packing approach the LP.
func TestLognormalIndependentCostNearBound(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the catalog and solves 10k pods twice")
	}
	pods := workload.Pods(workload.LognormalIndependentShapes(10000, 1, 0.9))
	if r, _ := costCase(t, "independent, all non-burstable types", lognormalInput(t, pods, allNonBurstablePool())); r > 1.03 {
		t.Errorf("cost %.4f × the lower bound, want ≤ 1.03", r)
	}
	if r, _ := costCase(t, "independent, c/m/r generations 5-8", lognormalInput(t, pods, cmrPool())); r > 1.01 {
		t.Errorf("cost %.4f × the lower bound, want ≤ 1.01", r)
	}
}

// A node's EBS volumes are part of its price, so of two plans with the same vCPUs the one with
// fewer nodes is cheaper: a batch goes to one larger node instead of scattering over 1-vCPU ones.
func TestNodeVolumesPreferFewerLargerNodes(t *testing.T) {
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	family := func(nco catalog.NodeClassOptions) []catalog.InstanceType {
		var out []catalog.InstanceType
		for _, it := range cat.InstanceTypes(nco) {
			if it.Labels["karpenter.k8s.aws/instance-family"] != "c6g" {
				continue
			}
			it.Offerings = slices.DeleteFunc(it.Offerings, func(o catalog.Offering) bool { return o.CapacityType != catalog.CapacityTypeOnDemand })
			out = append(out, it)
		}
		return out
	}
	plan := func(nco catalog.NodeClassOptions, n int) []string {
		in := &scheduling.Input{Pods: pods("web", n, "900m", "1Gi"),
			Pools: []scheduling.Pool{{NodePool: nodePool("default"), InstanceTypes: family(nco)}}}
		var types []string
		for _, nc := range solve(t, in).NodeClaims {
			types = append(types, cheapest(&nc))
		}
		return types
	}
	// c6g on-demand prices are linear in size: without a per-node cost four mediums and one
	// xlarge cost the same.
	flat := plan(catalog.NodeClassOptions{}, 4)
	withVolumes, err := catalog.NodeClassOptionsFor(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := plan(withVolumes, 4)
	if len(got) != 1 || got[0] != "c6g.xlarge" {
		t.Fatalf("with the root volume priced: %v, want one c6g.xlarge (without it: %v)", got, flat)
	}
	t.Logf("without volume prices: %v; with: %v", flat, got)
}
