package scheduling_test

import (
	"fmt"
	"math"
	"os"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
)

// singleTypeFFD packs all pods (largest cpu first) into nodes of one type, first fit.
func singleTypeFFD(reqs []catalog.Resources, usable catalog.Resources) int {
	var bins []catalog.Resources
	for _, r := range reqs {
		placed := false
		for i := range bins {
			ok := true
			for k := range r {
				if bins[i][k]+r[k] > usable[k] {
					ok = false
					break
				}
			}
			if ok {
				for k := range r {
					bins[i][k] += r[k]
				}
				placed = true
				break
			}
		}
		if !placed {
			for k := range r {
				if r[k] > usable[k] {
					return -1
				}
			}
			bins = append(bins, r)
		}
	}
	return len(bins)
}

// bestSingleType is the cheapest first-fit-decreasing packing of the input's pods on one
// instance type of 8 to 64 vCPUs of its only pool: the type and the cost.
func bestSingleType(in *scheduling.Input) (string, float64) {
	var reqs []catalog.Resources
	for _, p := range in.Pods {
		r, _ := scheduling.PodRequests(p)
		reqs = append(reqs, r)
	}
	sort.Slice(reqs, func(i, j int) bool { return reqs[i][0] > reqs[j][0] })
	best, bestName := math.Inf(1), ""
	for _, pt := range scheduling.NewPoolTypes(in).Of(0) {
		if pt.Type.Capacity[catalog.CPU] < 8000 || pt.Type.Capacity[catalog.CPU] > 64000 {
			continue
		}
		if n := singleTypeFFD(reqs, pt.Type.Allocatable); n >= 0 && float64(n)*pt.PricePerHour < best {
			best, bestName = float64(n)*pt.PricePerHour, pt.Type.Name
		}
	}
	return bestName, best
}

func TestCalibrateSingleType(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	for _, np := range []*karpv1.NodePool{allNonBurstablePool(), cmrPool()} {
		in := lognormalInput(t, calibPods(), np)
		bound := lowerBound(t, in).LowerBound
		name, cost := bestSingleType(in)
		t.Logf("best single type %s: $%.2f/h = %.3f × bound %.2f", name, cost, cost/bound, bound)
	}
}

func TestCalibratePerPod(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	in := lognormalInput(t, workload.Lognormal(10000), allNonBurstablePool())
	bound := lowerBound(t, in).LowerBound
	pts := scheduling.NewPoolTypes(in).Of(0)
	sum := 0.0
	use := map[string]float64{}
	for _, p := range in.Pods {
		r, _ := scheduling.PodRequests(p)
		best, bn := 1e18, ""
		for _, pt := range pts {
			u := pt.Type.Allocatable
			f := 0.0
			for k := range r {
				if r[k] > 0 {
					if u[k] <= 0 {
						f = 1e18
						break
					}
					f = max(f, float64(r[k])/float64(u[k]))
				}
			}
			c := f * pt.PricePerHour
			if c < best {
				best, bn = c, pt.Type.Labels["karpenter.k8s.aws/instance-family"]
			}
		}
		sum += best
		use[bn] += best
	}
	t.Logf("per-pod fluid best: $%.2f = %.3f × bound; by family %v", sum, sum/bound, use)
}

func mathLog(x float64) float64 { return math.Log(x) }

// TestCalibrateGroups: the best split of the pods, sorted by memory/cpu ratio, into up to three
// contiguous groups each packed (fluidly) on one family's largest type.
func TestCalibrateGroups(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	for _, np := range []*karpv1.NodePool{allNonBurstablePool(), cmrPool()} {
		in := lognormalInput(t, calibPods(), np)
		bound := lowerBound(t, in).LowerBound
		best := map[string]scheduling.PoolType{}
		for _, pt := range scheduling.NewPoolTypes(in).Of(0) {
			f := pt.Type.Labels["karpenter.k8s.aws/instance-family"]
			if cur, ok := best[f]; !ok || pt.Type.Capacity[0] > cur.Type.Capacity[0] {
				best[f] = pt
			}
		}
		var reqs []catalog.Resources
		for _, p := range in.Pods {
			r, _ := scheduling.PodRequests(p)
			reqs = append(reqs, r)
		}
		sort.Slice(reqs, func(i, j int) bool {
			return float64(reqs[i][1])/float64(reqs[i][0]) < float64(reqs[j][1])/float64(reqs[j][0])
		})
		n := len(reqs)
		pre := make([][3]float64, n+1)
		for i, r := range reqs {
			pre[i+1] = pre[i]
			pre[i+1][0] += float64(r[0])
			pre[i+1][1] += float64(r[1])
			pre[i+1][2]++
		}
		groupCost := func(a, b int) (float64, string) { // pods [a,b)
			if a >= b {
				return 0, ""
			}
			c, m, k := pre[b][0]-pre[a][0], pre[b][1]-pre[a][1], pre[b][2]-pre[a][2]
			bc, bn := 1e18, ""
			for f, pt := range best {
				u := pt.Type.Allocatable
				x := max(c/float64(u[0]), m/float64(u[1]), k/float64(u[3]))
				if x*pt.PricePerHour < bc {
					bc, bn = x*pt.PricePerHour, f
				}
			}
			return bc, bn
		}
		bestCost, desc := 1e18, ""
		step := 50
		for i := 0; i <= n; i += step {
			for j := i; j <= n; j += step {
				c1, f1 := groupCost(0, i)
				c2, f2 := groupCost(i, j)
				c3, f3 := groupCost(j, n)
				if c := c1 + c2 + c3; c < bestCost {
					bestCost, desc = c, fmt.Sprintf("%s[0,%d) %s[%d,%d) %s[%d,%d)", f1, i, f2, i, j, f3, j, n)
				}
			}
		}
		t.Logf("best 3-group fluid split: $%.2f = %.3f × bound (%s)", bestCost, bestCost/bound, desc)
	}
}

func calibPods() []*corev1.Pod {
	seed := int64(1)
	if v := os.Getenv("SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	if os.Getenv("INDEP") != "" {
		var sg float64
		fmt.Sscan(os.Getenv("INDEP"), &sg)
		return workload.Pods(workload.LognormalIndependentShapes(10000, seed, sg))
	}
	return workload.Pods(workload.LognormalShapes(10000, seed))
}

// TestCalibrateBoundMix prints the LP mix behind the bound and how the best single type compares
// for several memory-ratio spreads of the lognormal profile.
func TestCalibrateBoundMix(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	for _, ms := range []float64{0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0} {
		pods := workload.Pods(workload.LognormalShapesWith(10000, 1, 0.9, ms))
		in := lognormalInput(t, pods, allNonBurstablePool())
		b := lowerBound(t, in)
		var c, m float64
		for _, p := range in.Pods {
			r, _ := scheduling.PodRequests(p)
			c += float64(r[catalog.CPU])
			m += float64(r[catalog.Memory])
		}
		name, cost := bestSingleType(in)
		t.Logf("memσ %.1f: GiB/vCPU %.2f, bound $%.2f (mix %v), single %s %.3f ×", ms, m/c*1000/float64(1<<30), b.LowerBound, b.Mix, name, cost/b.LowerBound)
	}
}

// TestCalibrateBoundVariants: the bound, the best single type and the engine on variants of the
// all-types pool (without a1, with spot, generations above 4).
func TestCalibrateBoundVariants(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	pods := workload.Lognormal(10000)
	noA1 := allNonBurstablePool()
	noA1.Spec.Template.Spec.Requirements = append(noA1.Spec.Template.Spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a1"}})
	spot := allNonBurstablePool()
	spot.Spec.Template.Spec.Requirements[0].Values = []string{"spot", "on-demand"}
	nitro := allNonBurstablePool()
	nitro.Spec.Template.Spec.Requirements = append(nitro.Spec.Template.Spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: "Gt", Values: []string{"4"}})
	for _, c := range []struct {
		name string
		np   *karpv1.NodePool
	}{{"all", allNonBurstablePool()}, {"no a1", noA1}, {"spot+od", spot}, {"gen>4", nitro}} {
		in := lognormalInput(t, pods, c.np)
		b := lowerBound(t, in).LowerBound
		name, cost := bestSingleType(in)
		res := scheduling.Solve(in)
		t.Logf("%s: bound $%.2f, whole-pod bound %.3f ×; single %s %.3f ×; engine %.3f ×", c.name, b, wholePodBound(t, in)/b, name, cost/b, res.TotalPricePerHour()/b)
	}
}

// TestCalibrateEngineMix prints the engine's NodeClaims by type with their utilization
// (SEED, INDEP and POOL=cmr select the input).
func TestCalibrateEngineMix(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	pools := []*karpv1.NodePool{allNonBurstablePool(), cmrPool()}
	if os.Getenv("POOL") == "cmr" {
		pools = pools[1:]
	}
	for _, np := range pools {
		in := lognormalInput(t, calibPods(), np)
		res := scheduling.Solve(in)
		type agg struct {
			n          int
			price      float64
			cpu, mem   float64
			acpu, amem float64
		}
		m := map[string]*agg{}
		var names []string
		for _, nc := range res.NodeClaims {
			it, _ := nc.Cheapest()
			a := m[it.Name]
			if a == nil {
				a = &agg{}
				m[it.Name] = a
				names = append(names, it.Name)
			}
			a.n++
			a.price += nc.PricePerHour()
			a.cpu += float64(nc.PodRequests[0])
			a.mem += float64(nc.PodRequests[1])
			a.acpu += float64(it.Allocatable[0])
			a.amem += float64(it.Allocatable[1])
		}
		sort.Strings(names)
		for _, n := range names {
			a := m[n]
			t.Logf("%-16s ×%3d $%7.2f cpu %.1f%% mem %.1f%% podratio %.2f", n, a.n, a.price, 100*a.cpu/a.acpu, 100*a.mem/a.amem, a.mem/a.cpu*1000/(1<<30))
		}
		t.Logf("total $%.2f", res.TotalPricePerHour())
	}
}

// TestCalibrateSeeds prints cost/bound (and, in parentheses, cost/whole-pod bound) over several
// seeds, profiles and pools.
func TestCalibrateSeeds(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	pools := calibPools()
	for _, prof := range []string{"lognormal", "independent"} {
		for _, pl := range pools {
			line := ""
			sum := 0.0
			for seed := int64(1); seed <= 6; seed++ {
				var pods []*corev1.Pod
				if prof == "lognormal" {
					pods = workload.Pods(workload.LognormalShapes(10000, seed))
				} else {
					pods = workload.Pods(workload.LognormalIndependentShapes(10000, seed, 0.9))
				}
				in := lognormalInput(t, pods, pl.np())
				res := scheduling.Solve(in)
				r := res.TotalPricePerHour() / lowerBound(t, in).LowerBound
				sum += r
				line += fmt.Sprintf(" %.4f (%.4f)", r, res.TotalPricePerHour()/wholePodBound(t, in))
			}
			t.Logf("%-11s %-4s mean %.4f:%s", prof, pl.name, sum/6, line)
		}
	}
}

// calibPool is a named pool of the calibration inputs.
type calibPool struct {
	name string
	np   func() *karpv1.NodePool
}

// calibPools are the calibration's pools: all non-burstable types, c/m/r, and all with spot.
func calibPools() []calibPool {
	spot := func() *karpv1.NodePool {
		np := allNonBurstablePool()
		np.Spec.Template.Spec.Requirements[0].Values = []string{"spot", "on-demand"}
		return np
	}
	return []calibPool{{"all", allNonBurstablePool}, {"cmr", cmrPool}, {"spot", spot}}
}
