package scheduling_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// The benchmarks reproduce Karpenter's scheduling benchmark input exactly (see package workload):
// 400 fake instance types, one unconstrained NodePool, the five-group pod mix or the preference
// pods, fixed seed. They report pods/s like Karpenter's, and check (once, outside the timed loop)
// that every pod is scheduled and that the independent checker accepts the result.

func benchInput(pods []*corev1.Pod) *scheduling.Input {
	return &scheduling.Input{
		Pods:  pods,
		Pools: []scheduling.Pool{{NodePool: workload.BenchNodePool(), InstanceTypes: workload.FakeInstanceTypes(400)}},
	}
}

func runBench(b *testing.B, in *scheduling.Input, check bool) {
	b.Helper()
	res := scheduling.Solve(in)
	if len(res.Unschedulable) > 0 {
		b.Fatalf("%d pods unschedulable, first: %s", len(res.Unschedulable), res.Unschedulable[0].Reason)
	}
	if check {
		if err := schedulingcheck.Check(in, res); err != nil {
			b.Fatalf("checker: %v", err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res = scheduling.Solve(in)
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(len(in.Pods))*float64(b.N)/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(len(res.NodeClaims)), "nodes")
	b.ReportMetric(res.TotalPricePerHour(), "$/h")
}

func BenchmarkKarpenterMix1k(b *testing.B) {
	runBench(b, benchInput(workload.KarpenterMix(1000)), true)
}
func BenchmarkKarpenterMix5k(b *testing.B) {
	runBench(b, benchInput(workload.KarpenterMix(5000)), true)
}
func BenchmarkKarpenterMix20k(b *testing.B) {
	runBench(b, benchInput(workload.KarpenterMix(20000)), true)
}

// BenchmarkPreferences4k is Karpenter's "respect preferences" case.
func BenchmarkPreferences4k(b *testing.B) {
	runBench(b, benchInput(workload.PreferencePods(4000)), true)
}

// BenchmarkLognormal10k packs 10,000 lognormal pods onto the real us-east-1 catalog (all
// non-burstable types, on-demand).
func BenchmarkLognormal10k(b *testing.B) {
	in := lognormalInput(b, workload.Lognormal(10000), allNonBurstablePool())
	runBench(b, in, false)
}

func usEast1(tb testing.TB) []catalog.InstanceType {
	tb.Helper()
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		tb.Fatalf("catalog: %v", err)
	}
	return cat.InstanceTypes(catalog.NodeClassOptions{})
}

func lognormalInput(tb testing.TB, pods []*corev1.Pod, np *karpv1.NodePool) *scheduling.Input {
	return &scheduling.Input{Pods: pods, Pools: []scheduling.Pool{{NodePool: np, InstanceTypes: usEast1(tb)}}}
}

var metalSizes = []string{"metal", "metal-12xl", "metal-16xl", "metal-24xl", "metal-32xl", "metal-48xl", "metal-96xl"}

// allNonBurstablePool may launch every on-demand us-east-1 type except burstable (t*), HPC and
// bare-metal ones — the types the cost lower bound considers by default.
func allNonBurstablePool() *karpv1.NodePool {
	np := workload.BenchNodePool()
	np.Spec.Limits = nil
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
		{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"t", "hpc"}},
		{Key: "karpenter.k8s.aws/instance-size", Operator: corev1.NodeSelectorOpNotIn, Values: metalSizes},
	}
	return np
}

// cmrPool is restricted to c, m and r families of generations 5 to 8, on-demand.
func cmrPool() *karpv1.NodePool {
	np := allNonBurstablePool()
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
		karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
		karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: "Gte", Values: []string{"5"}},
		karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: "Lte", Values: []string{"8"}},
	)
	return np
}
