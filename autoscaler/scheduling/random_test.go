package scheduling_test

import (
	"fmt"
	"math/rand"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

const gib = int64(1) << 30

var testZones = []string{"zone-a", "zone-b", "zone-c"}

// randomTypes makes n synthetic instance types across categories, generations and archs.
func randomTypes(r *rand.Rand, n int) []catalog.InstanceType {
	var out []catalog.InstanceType
	cats := []struct {
		name  string
		memGB int64 // per vCPU
		price float64
	}{{"c", 2, 0.0425}, {"m", 4, 0.048}, {"r", 8, 0.063}}
	for i := 0; i < n; i++ {
		cat := cats[r.Intn(len(cats))]
		gen := 5 + r.Intn(4)
		arch := "amd64"
		if r.Intn(3) == 0 {
			arch = "arm64"
		}
		cpu := int64(1) << uint(1+r.Intn(5)) // 2..32
		name := fmt.Sprintf("%s%d%s.x%d-%d", cat.name, gen, map[string]string{"amd64": "", "arm64": "g"}[arch], cpu, i)
		var capacity catalog.Resources
		capacity[catalog.CPU] = cpu * 1000
		capacity[catalog.Memory] = cpu * cat.memGB * gib
		capacity[catalog.Pods] = 8 + cpu*4
		capacity[catalog.EphemeralStorage] = 20 * gib
		alloc := capacity
		alloc[catalog.CPU] -= 70 + cpu*5
		alloc[catalog.Memory] -= capacity[catalog.Memory]/12 + 300<<20
		alloc[catalog.EphemeralStorage] = 17 * gib
		price := float64(cpu) * cat.price * (1 + 0.2*r.Float64())
		if arch == "arm64" {
			price *= 0.85
		}
		it := catalog.InstanceType{
			Name: name,
			Labels: map[string]string{
				"node.kubernetes.io/instance-type":      name,
				"kubernetes.io/arch":                    arch,
				"kubernetes.io/os":                      "linux",
				"karpenter.k8s.aws/instance-category":   cat.name,
				"karpenter.k8s.aws/instance-generation": fmt.Sprint(gen),
				"karpenter.k8s.aws/instance-cpu":        fmt.Sprint(cpu),
				"karpenter.k8s.aws/instance-family":     fmt.Sprintf("%s%d", cat.name, gen),
			},
			Capacity: capacity, Allocatable: alloc,
		}
		for _, z := range testZones {
			if r.Intn(5) > 0 {
				it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, CapacityType: "on-demand", PricePerHour: price, Available: r.Intn(10) > 0})
			}
			if r.Intn(2) == 0 {
				it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, CapacityType: "spot", PricePerHour: price * (0.3 + 0.3*r.Float64()), Available: r.Intn(6) > 0})
			}
		}
		sort.Slice(it.Offerings, func(a, b int) bool { return it.Offerings[a].PricePerHour < it.Offerings[b].PricePerHour })
		out = append(out, it)
	}
	return out
}

func nodePool(name string) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
		Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
	}}}
}

func randomPools(r *rand.Rand, types []catalog.InstanceType) []scheduling.Pool {
	n := 1 + r.Intn(3)
	var out []scheduling.Pool
	for i := 0; i < n; i++ {
		np := nodePool(fmt.Sprintf("pool-%d", i))
		spec := &np.Spec.Template.Spec
		if r.Intn(2) == 0 {
			np.Spec.Weight = ptr(int32(1 + r.Intn(50)))
		}
		if r.Intn(3) == 0 {
			spec.Requirements = append(spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m"}})
		}
		if r.Intn(3) == 0 {
			op := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpGt, "Gte", corev1.NodeSelectorOpLt, "Lte"}[r.Intn(4)]
			spec.Requirements = append(spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: op, Values: []string{fmt.Sprint(5 + r.Intn(3))}})
		}
		if r.Intn(3) == 0 {
			spec.Requirements = append(spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{[]string{"spot", "on-demand"}[r.Intn(2)]}})
		}
		if r.Intn(4) == 0 {
			spec.Requirements = append(spec.Requirements, karpv1.NodePoolRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{testZones[r.Intn(3)]}})
		}
		if r.Intn(4) == 0 {
			spec.Requirements = append(spec.Requirements, karpv1.NodePoolRequirement{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"red", "blue"}})
		}
		if r.Intn(5) == 0 {
			spec.Requirements = append(spec.Requirements, karpv1.NodePoolRequirement{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpExists, MinValues: ptr(1 + r.Intn(3))})
		}
		if r.Intn(3) == 0 {
			np.Spec.Template.Labels = map[string]string{"tier": []string{"web", "batch"}[r.Intn(2)]}
		}
		if r.Intn(4) == 0 {
			spec.Taints = []karpv1.Taint{{Key: "dedicated", Value: np.Name, Effect: corev1.TaintEffectNoSchedule}}
		} else if i == 1 {
			// Without a draw, so that the random stream (and every other seed's input) stays.
			spec.Taints = []karpv1.Taint{{Key: "dedicated", Value: np.Name, Effect: corev1.TaintEffectPreferNoSchedule}}
		}
		if r.Intn(4) == 0 {
			spec.StartupTaints = []karpv1.Taint{{Key: "startup", Effect: corev1.TaintEffectNoSchedule}}
		}
		if r.Intn(4) == 0 {
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(8 + r.Intn(60)))}
		}
		if r.Intn(6) == 0 {
			np.Spec.Limits = corev1.ResourceList{"nodes": resource.MustParse(fmt.Sprint(1 + r.Intn(6)))}
		}
		out = append(out, scheduling.Pool{NodePool: np, InstanceTypes: types})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func mkPod(name string, labels map[string]string, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}

func sel(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }

// randomDeployments makes pending pods grouped like Deployments with random constraints.
func randomDeployments(r *rand.Rand, pools []scheduling.Pool) []*corev1.Pod {
	var pods []*corev1.Pod
	nd := 1 + r.Intn(8)
	for d := 0; d < nd; d++ {
		app := fmt.Sprintf("app-%d", d)
		labels := map[string]string{"app": app, "group": []string{"x", "y"}[r.Intn(2)]}
		cpu := []string{"100m", "250m", "500m", "1", "1500m", "3", "7"}[r.Intn(7)]
		mem := []string{"128Mi", "512Mi", "1Gi", "2Gi", "6Gi", "12Gi"}[r.Intn(6)]
		tmpl := mkPod(app, labels, cpu, mem)
		spec := &tmpl.Spec
		if r.Intn(5) == 0 {
			spec.NodeSelector = map[string]string{"kubernetes.io/arch": []string{"amd64", "arm64"}[r.Intn(2)]}
		}
		if r.Intn(6) == 0 {
			spec.NodeSelector = map[string]string{"team": "red"}
		}
		if r.Intn(6) == 0 {
			spec.NodeSelector = map[string]string{"tier": "web"}
		}
		if r.Intn(5) == 0 {
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"5"}}}}},
			}}}
		}
		if r.Intn(4) == 0 {
			if spec.Affinity == nil {
				spec.Affinity = &corev1.Affinity{}
			}
			if spec.Affinity.NodeAffinity == nil {
				spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
			}
			spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{testZones[r.Intn(3)]}}}}}}
		}
		if r.Intn(3) == 0 {
			spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}
		switch r.Intn(8) {
		case 0, 1:
			key := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}[r.Intn(2)]
			when := corev1.DoNotSchedule
			if r.Intn(3) == 0 {
				when = corev1.ScheduleAnyway
			}
			c := corev1.TopologySpreadConstraint{MaxSkew: int32(1 + r.Intn(2)), TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: sel(map[string]string{"app": app})}
			if r.Intn(3) == 0 {
				c.MinDomains = ptr(int32(2 + r.Intn(3)))
			}
			if r.Intn(3) == 0 {
				c.LabelSelector = sel(map[string]string{"group": labels["group"]})
			}
			spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, c)
		case 2:
			key := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}[r.Intn(2)]
			if spec.Affinity == nil {
				spec.Affinity = &corev1.Affinity{}
			}
			spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel(map[string]string{"app": app}), TopologyKey: key}}}
		case 3:
			key := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}[r.Intn(2)]
			target := map[string]string{"app": app}
			if d > 0 && r.Intn(2) == 0 {
				target = map[string]string{"app": fmt.Sprintf("app-%d", r.Intn(d))}
			}
			if spec.Affinity == nil {
				spec.Affinity = &corev1.Affinity{}
			}
			spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel(target), TopologyKey: key}}}
		case 4:
			if spec.Affinity == nil {
				spec.Affinity = &corev1.Affinity{}
			}
			spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel(map[string]string{"app": app}), TopologyKey: "topology.kubernetes.io/zone"}},
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel(map[string]string{"app": app}), TopologyKey: "kubernetes.io/hostname"}}}}
		}
		if r.Intn(10) == 0 {
			spec.Priority = ptr(int32(r.Intn(3) * 1000))
		}
		replicas := 1 + r.Intn(20)
		for i := 0; i < replicas; i++ {
			p := tmpl.DeepCopy()
			p.Name = fmt.Sprintf("%s-%d", app, i)
			p.UID = types.UID(p.Name)
			pods = append(pods, p)
		}
	}
	return pods
}

func randomDaemonSets(r *rand.Rand) []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for i := 0; i < r.Intn(3); i++ {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ds-%d", i), Namespace: "kube-system"}}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "d", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse([]string{"50m", "100m", "200m"}[r.Intn(3)]), corev1.ResourceMemory: resource.MustParse([]string{"64Mi", "200Mi"}[r.Intn(2)])}}}}
		if r.Intn(2) == 0 {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		if r.Intn(3) == 0 {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "amd64"}
		}
		out = append(out, ds)
	}
	return out
}

// randomNodes makes existing nodes (some from the pools) with a few pods bound.
func randomNodes(r *rand.Rand, pools []scheduling.Pool, types []catalog.InstanceType) []scheduling.ExistingNode {
	var out []scheduling.ExistingNode
	for i := 0; i < r.Intn(5); i++ {
		it := types[r.Intn(len(types))]
		name := fmt.Sprintf("node-%d", i)
		lbl := map[string]string{}
		for k, v := range it.Labels {
			lbl[k] = v
		}
		lbl["topology.kubernetes.io/zone"] = testZones[r.Intn(3)]
		lbl["kubernetes.io/hostname"] = name
		if r.Intn(2) == 0 {
			lbl["karpenter.sh/nodepool"] = pools[r.Intn(len(pools))].NodePool.Name
			lbl["karpenter.sh/capacity-type"] = "on-demand"
			lbl["karpenter.sh/initialized"] = "true"
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}}
		n.Status.Allocatable = toList(it.Allocatable)
		n.Status.Capacity = toList(it.Capacity)
		if r.Intn(6) == 0 {
			n.Spec.Unschedulable = true
		}
		if r.Intn(6) == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule}}
		}
		en := scheduling.ExistingNode{Node: n}
		for j := 0; j < r.Intn(4); j++ {
			p := mkPod(fmt.Sprintf("bound-%d-%d", i, j), map[string]string{"app": fmt.Sprintf("app-%d", r.Intn(4))}, "200m", "256Mi")
			p.Spec.NodeName = name
			if r.Intn(4) == 0 {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
					{LabelSelector: sel(map[string]string{"group": "x"}), TopologyKey: "kubernetes.io/hostname"}}}}
			}
			en.Pods = append(en.Pods, p)
		}
		out = append(out, en)
	}
	return out
}

func toList(r catalog.Resources) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := catalog.Resource(0); i < catalog.NumResources; i++ {
		if r[i] == 0 {
			continue
		}
		if i == catalog.CPU {
			out[corev1.ResourceName(catalog.ResourceNames[i])] = *resource.NewMilliQuantity(r[i], resource.DecimalSI)
		} else {
			out[corev1.ResourceName(catalog.ResourceNames[i])] = *resource.NewQuantity(r[i], resource.BinarySI)
		}
	}
	return out
}

func randomInput(seed int64) *scheduling.Input {
	r := rand.New(rand.NewSource(seed))
	types := randomTypes(r, 8+r.Intn(25))
	pools := randomPools(r, types)
	in := &scheduling.Input{
		Pools:      pools,
		DaemonSets: randomDaemonSets(r),
		Nodes:      randomNodes(r, pools, types),
	}
	in.Pods = randomDeployments(r, pools)
	return in
}
