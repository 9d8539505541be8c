package costbound

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
)

// usEast1Types are the eligible us-east-1 types at on-demand prices, all of them or only the c,
// m and r families of generations 5 to 8, with a small daemonset overhead.
func usEast1Types(tb testing.TB, cmrOnly bool) []Type {
	tb.Helper()
	c, err := catalog.Load("us-east-1")
	if err != nil {
		tb.Fatal(err)
	}
	var its []catalog.InstanceType
	for _, it := range c.InstanceTypes(catalog.NodeClassOptions{}) {
		category := it.Labels["karpenter.k8s.aws/instance-category"]
		gen, _ := strconv.Atoi(it.Labels["karpenter.k8s.aws/instance-generation"])
		if cmrOnly && !((category == "c" || category == "m" || category == "r") && gen >= 5 && gen <= 8) {
			continue
		}
		it.Offerings = slices.DeleteFunc(it.Offerings, func(o catalog.Offering) bool { return o.CapacityType != catalog.CapacityTypeOnDemand })
		its = append(its, it)
	}
	return TypesFrom(its, res(cpu, 200, mem, 300*Mi, pods, 3), Eligibility{})
}

// smallDeployments is workload.SmallDeploymentsShapes as pod groups.
func smallDeployments(n int, seed int64) []PodGroup {
	var groups []PodGroup
	for _, s := range workload.SmallDeploymentsShapes(n, seed) {
		groups = append(groups, PodGroup{Requests: res(cpu, s.CPU, mem, s.Memory), Count: s.Replicas})
	}
	return groups
}

// TestWholePodsManySmallDeployments: hundreds of small Deployments with memory:cpu ratios
// spread from 1 to 8 GiB per vCPU, more distinct ratios than the LP has classes. Seed 4 with
// 2,000 pods ran the simplex of the earlier formulation into its pivot limit (minutes). The
// bound must come out, stay below feasible packings and not fall below the resource LP.
func TestWholePodsManySmallDeployments(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the catalog")
	}
	for _, cmrOnly := range []bool{true, false} {
		types := usEast1Types(t, cmrOnly)
		for seed := int64(1); seed <= 6; seed++ {
			for _, n := range []int{2000, 10000} {
				p := Problem{Types: types, Pods: smallDeployments(n, seed)}
				v := mustWholePods(t, p)
				lp := mustBound(t, p).LP
				if v < lp*(1-1e-9) {
					t.Errorf("c/m/r only %v, seed %d, %d pods: whole-pod bound %v below the resource LP %v", cmrOnly, seed, n, v, lp)
				}
				for _, name := range []string{"c6a.8xlarge", "m6a.8xlarge", "r6a.8xlarge"} {
					if c := firstFitDecreasing(p.Pods, typeNamed(t, types, name)); v > c {
						t.Errorf("c/m/r only %v, seed %d, %d pods: whole-pod bound %v above a packing on %s, %v", cmrOnly, seed, n, v, name, c)
					}
				}
			}
		}
	}
}

func typeNamed(t *testing.T, types []Type, name string) Type {
	t.Helper()
	for _, ty := range types {
		if ty.Name == name {
			return ty
		}
	}
	t.Fatalf("no type %s", name)
	return Type{}
}

// BenchmarkWholePodsSmallDeployments is the whole-pod bound of the many-small-Deployments
// workload on the c/m/r pool (generations 5-8), as the cost calibration computes it.
func BenchmarkWholePodsSmallDeployments(b *testing.B) {
	types := usEast1Types(b, true)
	for _, n := range []int{2000, 10000} {
		p := Problem{Types: types, Pods: smallDeployments(n, 1)}
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := WholePods(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
