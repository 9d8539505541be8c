// Package workload generates synthetic scheduling inputs: Karpenter's own scheduling benchmark
// (its fake instance types and its pod mix, reproduced draw for draw), the "respect preferences"
// case, and mixes of Deployments for cost experiments (lognormal, many small Deployments).
package workload

import (
	"fmt"
	"math"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

// FakeInstanceTypes reproduces Karpenter's fake.InstanceTypes(n): type i ("fake-it-i") has
// i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, kube-reserved 100m cpu and 10Mi memory, and costs
// 0.1 per vCPU plus 0.1 per GB (10^9 bytes) in every offering: spot in test-zone-1 and -2,
// on-demand in test-zone-1, -2 and -3.
func FakeInstanceTypes(n int) []catalog.InstanceType {
	out := make([]catalog.InstanceType, n)
	for i := 0; i < n; i++ {
		cpu := int64(i + 1)
		var capacity catalog.Resources
		capacity[catalog.CPU] = cpu * 1000
		capacity[catalog.Memory] = 2 * cpu * gi
		capacity[catalog.Pods] = 10 * cpu
		alloc := capacity
		alloc[catalog.CPU] -= 100
		alloc[catalog.Memory] -= 10 * mi
		price := 0.1*float64(cpu) + 0.1*float64(capacity[catalog.Memory])/1e9
		size := "small"
		if cpu > 4 && capacity[catalog.Memory] > 8*gi {
			size = "large"
		}
		name := fmt.Sprintf("fake-it-%d", i)
		it := catalog.InstanceType{
			Name: name,
			Labels: map[string]string{
				corev1.LabelInstanceTypeStable: name,
				corev1.LabelArchStable:         "amd64",
				corev1.LabelOSStable:           "linux",
				"size":                         size,
				"integer":                      fmt.Sprint(cpu),
			},
			Capacity:    capacity,
			Allocatable: alloc,
		}
		for _, o := range []struct{ zone, ct string }{
			{"test-zone-1", catalog.CapacityTypeSpot}, {"test-zone-2", catalog.CapacityTypeSpot},
			{"test-zone-1", catalog.CapacityTypeOnDemand}, {"test-zone-2", catalog.CapacityTypeOnDemand},
			{"test-zone-3", catalog.CapacityTypeOnDemand},
		} {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: o.zone, CapacityType: o.ct, PricePerHour: price, Available: true})
		}
		out[i] = it
	}
	return out
}

// BenchNodePool is the benchmark's NodePool: no requirements, effectively unlimited.
func BenchNodePool() *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			}},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10000000"),
				corev1.ResourceMemory: resource.MustParse("10000000Gi"),
			},
		},
	}
}

// gen draws random values in the same sequence as Karpenter's benchmark (math/rand, seed 42).
type gen struct {
	r *rand.Rand
	n int
}

func newGen(seed int64) *gen { return &gen{r: rand.New(rand.NewSource(seed))} }

func (g *gen) labelValue() string { return []string{"a", "b", "c", "d", "e", "f", "g"}[g.r.Intn(7)] }
func (g *gen) cpu() resource.Quantity {
	return resource.MustParse(fmt.Sprintf("%dm", []int{100, 250, 500, 1000, 1500}[g.r.Intn(5)]))
}
func (g *gen) memory() resource.Quantity {
	return resource.MustParse(fmt.Sprintf("%dMi", []int{100, 256, 512, 1024, 2048, 4096}[g.r.Intn(6)]))
}

func (g *gen) pod(labels map[string]string, cpu, mem resource.Quantity) *corev1.Pod {
	g.n++
	name := fmt.Sprintf("pod-%05d", g.n)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}},
		}}},
	}
}

// KarpenterMix reproduces Karpenter's makeDiversePods(count): five equal groups — plain pods;
// topology spread (maxSkew 1, DoNotSchedule) on zone; the same on hostname; self pod affinity on
// zone; required pod anti-affinity on hostname among the group — the remainder plain.
func KarpenterMix(count int) []*corev1.Pod {
	g := newGen(42)
	var pods []*corev1.Pod
	n := count / 5
	pods = append(pods, g.generic(n)...)
	pods = append(pods, g.spread(n, corev1.LabelTopologyZone)...)
	pods = append(pods, g.spread(n, corev1.LabelHostname)...)
	pods = append(pods, g.affinity(n, corev1.LabelTopologyZone)...)
	pods = append(pods, g.antiAffinity(n, corev1.LabelHostname)...)
	pods = append(pods, g.generic(count-len(pods))...)
	return pods
}

func (g *gen) generic(n int) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		labels := map[string]string{"my-label": g.labelValue()}
		cpu := g.cpu()
		out = append(out, g.pod(labels, cpu, g.memory()))
	}
	return out
}

func (g *gen) spread(n int, key string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		labels := map[string]string{"my-label": g.labelValue()}
		sel := map[string]string{"my-label": g.labelValue()}
		cpu := g.cpu()
		p := g.pod(labels, cpu, g.memory())
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
		}}
		out = append(out, p)
	}
	return out
}

func (g *gen) affinity(n int, key string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		labels := map[string]string{"my-affininity": g.labelValue()}
		cpu := g.cpu()
		p := g.pod(labels, cpu, g.memory())
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key,
			}},
		}}
		out = append(out, p)
	}
	return out
}

func (g *gen) antiAffinity(n int, key string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	labels := map[string]string{"app": "nginx"}
	for i := 0; i < n; i++ {
		cpu := g.cpu()
		p := g.pod(labels, cpu, g.memory())
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key,
			}},
		}}
		out = append(out, p)
	}
	return out
}

// PreferencePods reproduces Karpenter's makePreferencePods(count): app=nginx pods preferring
// zone test-zone-1 (node affinity, weight 1), with preferred anti-affinity among themselves of
// weight 10 on zone (cannot hold beyond three pods) and weight 1 on hostname (can).
func PreferencePods(count int) []*corev1.Pod {
	g := newGen(42)
	labels := map[string]string{"app": "nginx"}
	cpu, mem := g.cpu(), g.memory()
	out := make([]*corev1.Pod, 0, count)
	for i := 0; i < count; i++ {
		p := g.pod(labels, cpu, mem)
		p.Spec.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-1"},
				}}},
			}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelTopologyZone}},
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname}},
			}},
		}
		out = append(out, p)
	}
	return out
}

// Shape is one Deployment of a generated workload.
type Shape struct {
	Name     string
	Replicas int
	CPU      int64 // millicores
	Memory   int64 // bytes
}

// LognormalShapes draws Deployments until they hold count pods: replica counts Zipf-distributed
// (s = 1.5, 1..200), cpu lognormal with median 250m (σ = 0.9, 10m steps, 10m..16 cores), memory
// about 3 GiB per vCPU (a lognormal factor with σ = 0.2 around it, 1Mi steps, at least 16Mi).
func LognormalShapes(count int, seed int64) []Shape {
	return LognormalShapesWith(count, seed, 0.9, 0.2)
}

// LognormalShapesWith is LognormalShapes with the cpu and memory-ratio spreads as parameters.
func LognormalShapesWith(count int, seed int64, cpuSigma, memSigma float64) []Shape {
	r := rand.New(rand.NewSource(seed))
	z := rand.NewZipf(r, 1.5, 1, 199)
	var out []Shape
	total := 0
	for total < count {
		replicas := min(int(z.Uint64())+1, count-total)
		cpu := int64(math.Round(250*math.Exp(cpuSigma*r.NormFloat64())/10) * 10)
		cpu = max(10, min(cpu, 16000))
		mem := float64(cpu) / 1000 * 3 * float64(gi) * math.Exp(memSigma*r.NormFloat64())
		memMi := max(16, int64(math.Round(mem/float64(mi))))
		out = append(out, Shape{Name: fmt.Sprintf("deploy-%04d", len(out)), Replicas: replicas, CPU: cpu, Memory: memMi * mi})
		total += replicas
	}
	return out
}

// LognormalIndependentShapes draws cpu and memory independently: cpu lognormal with median
// 250m, memory lognormal with median 750Mi (3 GiB per vCPU), both with spread sigma.
func LognormalIndependentShapes(count int, seed int64, sigma float64) []Shape {
	r := rand.New(rand.NewSource(seed))
	z := rand.NewZipf(r, 1.5, 1, 199)
	var out []Shape
	total := 0
	for total < count {
		replicas := min(int(z.Uint64())+1, count-total)
		cpu := int64(math.Round(250*math.Exp(sigma*r.NormFloat64())/10) * 10)
		cpu = max(10, min(cpu, 16000))
		memMi := int64(math.Round(750 * math.Exp(sigma*r.NormFloat64())))
		memMi = max(16, min(memMi, 64<<10))
		out = append(out, Shape{Name: fmt.Sprintf("deploy-%04d", len(out)), Replicas: replicas, CPU: cpu, Memory: memMi * mi})
		total += replicas
	}
	return out
}

// SmallDeploymentsShapes draws many small Deployments until they hold count pods: 1 to 8
// replicas each (uniform), cpu lognormal with median 250m (σ = 0.9, 10m steps, 10m..16 cores),
// and per Deployment a memory:cpu ratio drawn log-uniformly between 1 and 8 GiB per vCPU (1Mi
// steps, at least 16Mi). Unlike LognormalShapes, whose pods share one ratio, the pods' shapes
// spread over the whole c/m/r range, and no Deployment is large enough to fill nodes of its own.
func SmallDeploymentsShapes(count int, seed int64) []Shape {
	r := rand.New(rand.NewSource(seed))
	var out []Shape
	total := 0
	for total < count {
		replicas := min(1+r.Intn(8), count-total)
		cpu := int64(math.Round(250*math.Exp(0.9*r.NormFloat64())/10) * 10)
		cpu = max(10, min(cpu, 16000))
		ratio := math.Exp(r.Float64() * math.Log(8)) // GiB per vCPU, log-uniform in [1, 8)
		memMi := max(16, int64(math.Round(float64(cpu)/1000*ratio*1024)))
		out = append(out, Shape{Name: fmt.Sprintf("deploy-%04d", len(out)), Replicas: replicas, CPU: cpu, Memory: memMi * mi})
		total += replicas
	}
	return out
}

// Pods expands shapes into pods (namespace "default", label app=<name>).
func Pods(shapes []Shape) []*corev1.Pod {
	var out []*corev1.Pod
	for _, s := range shapes {
		labels := map[string]string{"app": s.Name}
		req := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(s.CPU, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(s.Memory, resource.BinarySI),
		}
		for i := 0; i < s.Replicas; i++ {
			name := fmt.Sprintf("%s-%05d", s.Name, i)
			out = append(out, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
					Resources: corev1.ResourceRequirements{Requests: req},
				}}},
			})
		}
	}
	return out
}

// Lognormal is Pods(LognormalShapes(count, 1)).
func Lognormal(count int) []*corev1.Pod { return Pods(LognormalShapes(count, 1)) }

// SmallDeployments is Pods(SmallDeploymentsShapes(count, 1)).
func SmallDeployments(count int) []*corev1.Pod { return Pods(SmallDeploymentsShapes(count, 1)) }
