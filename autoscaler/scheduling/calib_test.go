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

func TestCalibrateSingleType(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip()
	}
	type cfg struct{ cs, ms float64 }
	for _, cf := range []cfg{{0.9, 0.2}} {
		for _, np := range []*karpv1.NodePool{allNonBurstablePool(), cmrPool()} {
			in := lognormalInput(t, calibPods(), np)
			var reqs []catalog.Resources
			for _, p := range in.Pods {
				r, _ := scheduling.PodRequests(p)
				reqs = append(reqs, r)
			}
			sort.Slice(reqs, func(i, j int) bool { return reqs[i][0] > reqs[j][0] })
			bound := lowerBound(t, in).LowerBound
			best, bestName := 1e18, ""
			for _, pt := range scheduling.PoolTypes(in, 0) {
				if pt.Type.Capacity[catalog.CPU] < 8000 || pt.Type.Capacity[catalog.CPU] > 64000 {
					continue
				}
				n := singleTypeFFD(reqs, pt.Type.Allocatable)
				if n < 0 {
					continue
				}
				c := float64(n) * pt.PricePerHour
				if c < best {
					best, bestName = c, pt.Type.Name
				}
			}
			t.Logf("cpuσ %.1f memσ %.1f best single type %s: $%.2f/h = %.3f × bound %.2f", cf.cs, cf.ms, bestName, best, best/bound, bound)
		}
	}
}

func TestCalibratePerPod(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip()
	}
	in := lognormalInput(t, workload.Lognormal(10000), allNonBurstablePool())
	bound := lowerBound(t, in).LowerBound
	pts := scheduling.PoolTypes(in, 0)
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
		t.Skip()
	}
	for _, np := range []*karpv1.NodePool{allNonBurstablePool(), cmrPool()} {
		in := lognormalInput(t, calibPods(), np)
		bound := lowerBound(t, in).LowerBound
		best := map[string]scheduling.PoolType{}
		for _, pt := range scheduling.PoolTypes(in, 0) {
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
	if os.Getenv("INDEP") != "" {
		var sg float64
		fmt.Sscan(os.Getenv("INDEP"), &sg)
		return workload.Pods(workload.LognormalIndependentShapes(10000, 1, sg))
	}
	return workload.Lognormal(10000)
}
