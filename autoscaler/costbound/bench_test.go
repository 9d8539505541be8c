package costbound

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// lognormalGroups: n deployments, Zipf-ish replica counts summing to about pods, cpu lognormal
// with median 250m, memory about 3GiB per vCPU.
func lognormalGroups(rng *rand.Rand, n, pods int) []PodGroup {
	var groups []PodGroup
	total := 0.0
	for i := 1; i <= n; i++ {
		total += 1 / float64(i)
	}
	for i := 1; i <= n; i++ {
		c := int64(250 * math.Exp(rng.NormFloat64()*0.8))
		c = max(c, 10)
		m := int64(float64(c) / 1000 * 3 * float64(catalog.Gi) * math.Exp(rng.NormFloat64()*0.3))
		groups = append(groups, PodGroup{
			Requests: res(cpu, c, mem, m),
			Count:    max(1, int(float64(pods)/float64(i)/total)),
		})
	}
	return groups
}

// BenchmarkBoundUSEast1 is the bound of a 10k-pod lognormal workload on every eligible
// us-east-1 type (~1,170 LP constraints, 3 resources), as karpool simulate computes it.
func BenchmarkBoundUSEast1(b *testing.B) {
	c, err := catalog.Load("us-east-1")
	if err != nil {
		b.Fatal(err)
	}
	types := TypesFrom(c.InstanceTypes(catalog.NodeClassOptions{}), res(cpu, 200, mem, 300*Mi, pods, 3), Eligibility{})
	p := Problem{Types: types, Pods: lognormalGroups(rand.New(rand.NewPCG(1, 1)), 200, 10000)}
	b.ReportAllocs()
	var r Result
	for b.Loop() {
		r, err = Bound(p)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(types)), "types")
	b.ReportMetric(float64(r.Pivots), "pivots")
}

// BenchmarkBound300 is a 300-type problem with cpu, memory, pods and GPUs, and a memory and a
// node limit (5 dual variables).
func BenchmarkBound300(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var types []Type
	for i := 0; i < 300; i++ {
		vcpu := int64(1) << rng.IntN(8)
		ratio := int64(2) << rng.IntN(3)
		g := int64(0)
		if i%10 == 0 {
			g = int64(1 + rng.IntN(8))
		}
		types = append(types, Type{
			Name:        "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Price:       (float64(vcpu)*0.04 + float64(vcpu*ratio)*0.005 + float64(g)*0.5) * (0.8 + 0.4*rng.Float64()),
			Allocatable: res(cpu, vcpu*1000-100, mem, vcpu*ratio*Gi*92/100, pods, 8+vcpu*7, gpu, g),
		})
	}
	groups := lognormalGroups(rng, 100, 5000)
	groups = append(groups, PodGroup{Requests: res(cpu, 2000, mem, 8*Gi, gpu, 1), Count: 20})
	nodes := int64(100000)
	p := Problem{Types: types, Pods: groups, Limits: &Limits{Resources: map[catalog.Resource]int64{catalog.Memory: 1 << 50}, Nodes: &nodes}}
	b.ReportAllocs()
	var r Result
	var err error
	for b.Loop() {
		r, err = Bound(p)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.Pivots), "pivots")
}
