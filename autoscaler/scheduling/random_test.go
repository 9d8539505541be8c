package scheduling_test

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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
	addHostPorts(featureRand(seed, "host ports"), in)
	addVolumes(featureRand(seed, "volumes"), in)
	addPodLevelRequests(featureRand(seed, "pod-level requests"), in)
	addInFlight(featureRand(seed, "in-flight NodeClaims"), in)
	return in
}

// addInFlight adds in-flight NodeClaims to a third of the inputs: launched ones (instance type,
// zone and capacity in labels and status) and ones not launched yet (2-4 instance types in a
// requirement, sometimes one zone), with the pool's labels and taints and now and then a
// nominated pod of 200m.
func addInFlight(x *rand.Rand, in *scheduling.Input) {
	if x.Intn(3) != 0 {
		return
	}
	for i := 0; i < 1+x.Intn(3); i++ {
		pool := in.Pools[x.Intn(len(in.Pools))]
		np := pool.NodePool
		if len(pool.InstanceTypes) == 0 {
			continue
		}
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flight-%d", i), Labels: map[string]string{}}}
		maps.Copy(nc.Labels, np.Spec.Template.Labels)
		nc.Labels[karpv1.LabelNodePool] = np.Name
		nc.Spec.Taints = np.Spec.Template.Spec.Taints
		if x.Intn(2) == 0 {
			it := pool.InstanceTypes[x.Intn(len(pool.InstanceTypes))]
			maps.Copy(nc.Labels, it.Labels)
			nc.Labels[corev1.LabelTopologyZone] = testZones[x.Intn(3)]
			nc.Labels[karpv1.LabelCapacityType] = "on-demand"
			nc.Status.Capacity, nc.Status.Allocatable = toList(it.Capacity), toList(it.Allocatable)
		} else {
			var names []string
			for j := 0; j < 2+x.Intn(3); j++ {
				names = append(names, pool.InstanceTypes[x.Intn(len(pool.InstanceTypes))].Name)
			}
			nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: names}}
			if x.Intn(2) == 0 {
				nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
					Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{testZones[x.Intn(3)]}})
			}
		}
		fl := scheduling.InFlightNodeClaim{NodeClaim: nc}
		if x.Intn(2) == 0 {
			fl.Pods = append(fl.Pods, mkPod(fmt.Sprintf("nominated-%d", i), map[string]string{"app": "nominated"}, "200m", "256Mi"))
		}
		in.NodeClaims = append(in.NodeClaims, fl)
	}
}

// featureRand is the random source of a feature added to randomInput after the first ones: each
// has its own, seeded from the seed and the feature's name, so that every seed keeps the
// workload it had before the feature came (with the feature on top), and a feature left out
// while hunting a failure changes nothing else.
func featureRand(seed int64, feature string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(feature))
	return rand.New(rand.NewSource(seed ^ int64(h.Sum64())))
}

// deployments splits the pending pods into their Deployments (consecutive pods with the same
// app label).
func deployments(pods []*corev1.Pod) [][]*corev1.Pod {
	var out [][]*corev1.Pod
	for i, p := range pods {
		if i == 0 || p.Labels["app"] != pods[i-1].Labels["app"] {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], p)
	}
	return out
}

// randomHostPort draws a host port: few ports so that pods and daemonsets share some, mostly
// TCP, mostly on every address, sometimes on one of two IPs or an explicit wildcard.
func randomHostPort(x *rand.Rand) corev1.ContainerPort {
	port := int32([]int{8080, 8081, 9100}[x.Intn(3)])
	cp := corev1.ContainerPort{ContainerPort: port, HostPort: port}
	if x.Intn(5) == 0 {
		cp.Protocol = corev1.ProtocolUDP
	}
	switch x.Intn(8) {
	case 0, 1:
		cp.HostIP = []string{"10.0.0.1", "10.0.0.2"}[x.Intn(2)]
	case 2:
		cp.HostIP = "0.0.0.0"
	}
	return cp
}

// addHostPorts gives some Deployments, daemonsets and bound pods host ports; a Deployment's
// port is sometimes on a sidecar (restartable init container) instead of its container.
func addHostPorts(x *rand.Rand, in *scheduling.Input) {
	for _, d := range deployments(in.Pods) {
		if x.Intn(4) != 0 {
			continue
		}
		ports := []corev1.ContainerPort{randomHostPort(x)}
		if x.Intn(4) == 0 {
			ports = append(ports, randomHostPort(x))
		}
		sidecar := x.Intn(6) == 0
		for _, p := range d {
			if sidecar {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "proxy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways), Ports: ports})
			} else {
				p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, ports...)
			}
		}
	}
	for _, ds := range in.DaemonSets {
		if x.Intn(3) == 0 {
			ds.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{randomHostPort(x)}
		}
	}
	for _, n := range in.Nodes {
		for _, p := range n.Pods {
			if x.Intn(5) == 0 {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{randomHostPort(x)}
			}
		}
	}
}

// addVolumes gives some Deployments volumes: per-replica claims (as a StatefulSet's) or one
// shared claim, bound to volumes with zone node affinity (on the stable key or the EBS CSI
// driver's alias, one or two zones, or none), or unbound claims of WaitForFirstConsumer classes
// with allowed topologies (or none), sometimes through generic ephemeral volumes; now and then
// a claim, volume or class is missing. Existing nodes carry the label aliases a real node has.
func addVolumes(x *rand.Rand, in *scheduling.Input) {
	for _, n := range in.Nodes {
		karpv1.WithLabelAliases(n.Node.Labels)
	}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	for i := 0; i < 3; i++ {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("class-%d", i)}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc}
		if i > 0 { // class-0 allows every zone
			zones := randomZones(x)
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: zones}}}}
			if x.Intn(3) == 0 { // a second term (OR) on the EBS CSI key
				sc.AllowedTopologies = append(sc.AllowedTopologies, corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "topology.ebs.csi.aws.com/zone", Values: randomZones(x)}}})
			}
		}
		in.StorageClasses = append(in.StorageClasses, sc)
	}
	for _, d := range deployments(in.Pods) {
		kind := x.Intn(10)
		if kind >= 5 {
			continue
		}
		bound := kind < 3
		shared := x.Intn(3) == 0
		ephemeral := !bound && x.Intn(3) == 0
		zones := randomZones(x)
		// Now and then one replica's claim is missing, or its bound volume or its class.
		broken, missing := -1, x.Intn(3)
		if x.Intn(12) == 0 {
			broken = x.Intn(len(d))
		}
		for i, p := range d {
			claim := "data-" + p.Name
			if shared {
				claim = "data-" + p.Labels["app"]
			}
			vol := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
			if ephemeral {
				claim = p.Name + "-data" // the claim the ephemeral volume controller makes
				vol.VolumeSource = corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}
			}
			p.Spec.Volumes = append(p.Spec.Volumes, vol)
			if shared && !ephemeral && i > 0 {
				continue
			}
			if i == broken && missing == 0 {
				continue
			}
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: p.Namespace}}
			in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, pvc)
			if bound {
				pvc.Spec.VolumeName = "pv-" + claim
				if i != broken || missing != 1 {
					in.PersistentVolumes = append(in.PersistentVolumes, randomVolume(x, pvc.Spec.VolumeName, zones))
				}
				continue
			}
			class := fmt.Sprintf("class-%d", x.Intn(3))
			if i == broken && missing == 2 {
				class = "missing"
			}
			pvc.Spec.StorageClassName = &class
		}
	}
}

// randomZones draws one zone, sometimes two.
func randomZones(x *rand.Rand) []string {
	z := x.Intn(len(testZones))
	if x.Intn(4) == 0 {
		return []string{testZones[z], testZones[(z+1)%len(testZones)]}
	}
	return []string{testZones[z]}
}

// randomVolume is a volume in zones (usually a Deployment's, sometimes its own) on the stable
// zone key or the EBS CSI driver's, or one without node affinity (as a network file system).
func randomVolume(x *rand.Rand, name string, zones []string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if x.Intn(8) == 0 {
		return pv
	}
	if x.Intn(3) == 0 {
		zones = randomZones(x)
	}
	key := corev1.LabelTopologyZone
	if x.Intn(4) == 0 {
		key = "topology.ebs.csi.aws.com/zone"
	}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: zones}},
	}}}}
	return pv
}

// addPodLevelRequests gives some Deployments and daemonsets pod-level resources (spec.resources):
// requests at or above the containers' sum, or only limits, which the requests default to.
func addPodLevelRequests(x *rand.Rand, in *scheduling.Input) {
	for _, d := range deployments(in.Pods) {
		if x.Intn(6) == 0 {
			rr := podLevel(x, &d[0].Spec)
			for _, p := range d[1:] {
				p.Spec.Resources = rr.DeepCopy()
			}
		}
	}
	for _, ds := range in.DaemonSets {
		if x.Intn(5) == 0 {
			podLevel(x, &ds.Spec.Template.Spec)
		}
	}
}

// podLevel sets random pod-level resources on spec and returns them: for cpu and memory, each
// at times, the containers' sum plus 0, 50, 100 or 150 %, as a request or as a limit.
func podLevel(x *rand.Rand, spec *corev1.PodSpec) *corev1.ResourceRequirements {
	rr := &corev1.ResourceRequirements{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if x.Intn(3) == 0 {
			continue // left to the containers
		}
		sum := resource.Quantity{}
		for _, c := range spec.Containers {
			sum.Add(c.Resources.Requests[name])
		}
		extra := int64(x.Intn(4))
		v := *resource.NewQuantity(sum.Value()*(2+extra)/2, resource.BinarySI)
		if name == corev1.ResourceCPU {
			v = *resource.NewMilliQuantity(sum.MilliValue()*(2+extra)/2, resource.DecimalSI)
		}
		if x.Intn(3) == 0 {
			rr.Limits = setQuantity(rr.Limits, name, v)
		} else {
			rr.Requests = setQuantity(rr.Requests, name, v)
		}
	}
	spec.Resources = rr
	return rr
}

func setQuantity(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) corev1.ResourceList {
	if l == nil {
		l = corev1.ResourceList{}
	}
	l[name] = q
	return l
}
