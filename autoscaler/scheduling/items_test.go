package scheduling_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

func withHostPort(port int32, ip string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 8080, HostPort: port, HostIP: ip})
	}
}

func TestHostPortsNeverShareANode(t *testing.T) {
	// Two small pods that would share one node, but ask for the same host port.
	in := &scheduling.Input{Pods: pods("web", 2, "100m", "128Mi", withHostPort(80, "")), Pools: []scheduling.Pool{pool("default")}}
	res := solve(t, in)
	if len(res.NodeClaims) != 2 || len(res.Unschedulable) != 0 {
		t.Fatalf("got %d NodeClaims, %d unschedulable; want 2 and 0", len(res.NodeClaims), len(res.Unschedulable))
	}
	// Different addresses on the same port do not conflict; the wildcard conflicts with any.
	in = &scheduling.Input{Pods: append(pods("a", 1, "100m", "128Mi", withHostPort(80, "10.0.0.1")),
		pods("b", 1, "100m", "128Mi", withHostPort(80, "10.0.0.2"))...), Pools: []scheduling.Pool{pool("default")}}
	if res := solve(t, in); len(res.NodeClaims) != 1 {
		t.Errorf("pods on different host IPs: %d NodeClaims, want 1", len(res.NodeClaims))
	}
	in = &scheduling.Input{Pods: append(pods("a", 1, "100m", "128Mi", withHostPort(80, "10.0.0.1")),
		pods("b", 1, "100m", "128Mi", withHostPort(80, "0.0.0.0"))...), Pools: []scheduling.Pool{pool("default")}}
	if res := solve(t, in); len(res.NodeClaims) != 2 {
		t.Errorf("a wildcard and a specific IP on one port: %d NodeClaims, want 2", len(res.NodeClaims))
	}
}

func TestDaemonSetHostPortsCountOnEveryNode(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	ds.Name, ds.Namespace = "exporter", "kube-system"
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}}}
	// An existing node already runs the daemonset's pod; new nodes will too.
	node := &corev1.Node{}
	node.Name = "existing"
	node.Labels = map[string]string{"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", corev1.LabelHostname: "existing"}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("58")}
	dsPod := mkPod("exporter-x", map[string]string{"app": "exporter"}, "0", "0")
	dsPod.Spec.Containers[0].Ports = ds.Spec.Template.Spec.Containers[0].Ports
	in := &scheduling.Input{
		Pods:       pods("clash", 1, "100m", "128Mi", withHostPort(9100, "")),
		Nodes:      []scheduling.ExistingNode{{Node: node, Pods: []*corev1.Pod{dsPod}}},
		DaemonSets: []*appsv1.DaemonSet{ds},
		Pools:      []scheduling.Pool{pool("default")},
	}
	res := solve(t, in)
	if len(res.Unschedulable) != 1 || len(res.NodeClaims) != 0 {
		t.Fatalf("got %d NodeClaims, %d unschedulable; want the pod pending", len(res.NodeClaims), len(res.Unschedulable))
	}
	if got := res.Unschedulable[0].Reason; !containsAll(got, "9100/TCP", "daemonset") {
		t.Errorf("reason %q does not name the port and the daemonset", got)
	}
	// A daemonset confined to arm64 leaves the port free on amd64 types.
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "arm64"}
	in.Nodes = nil
	res = solve(t, in)
	if len(res.NodeClaims) != 1 {
		t.Fatalf("got %d NodeClaims (plan %v), want 1", len(res.NodeClaims), summary(res))
	}
	for _, o := range res.NodeClaims[0].InstanceTypes {
		if o.Type.Labels["kubernetes.io/arch"] != "amd64" {
			t.Errorf("option %s runs the daemonset that takes the pod's port", o.Type.Name)
		}
	}
}

func TestLabelAliases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		check  func(*scheduling.NodeClaim) bool
	}{
		{"beta arch in nodeSelector", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"beta.kubernetes.io/arch": "arm64"}
		}, func(nc *scheduling.NodeClaim) bool { return nc.Labels["kubernetes.io/arch"] == "arm64" }},
		{"beta instance type in node affinity", func(p *corev1.Pod) {
			p.Spec.Affinity = requiredAffinity("beta.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "r5.large")
		}, func(nc *scheduling.NodeClaim) bool { return cheapest(nc) == "r5.large" }},
		{"beta zone", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"failure-domain.beta.kubernetes.io/zone": "zone-b"}
		}, func(nc *scheduling.NodeClaim) bool { return nc.Labels[corev1.LabelTopologyZone] == "zone-b" }},
		{"EBS CSI zone", func(p *corev1.Pod) {
			p.Spec.Affinity = requiredAffinity("topology.ebs.csi.aws.com/zone", corev1.NodeSelectorOpIn, "zone-c")
		}, func(nc *scheduling.NodeClaim) bool { return nc.Labels[corev1.LabelTopologyZone] == "zone-c" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := solve(t, &scheduling.Input{Pods: pods("p", 1, "500m", "1Gi", tc.mutate), Pools: []scheduling.Pool{pool("default")}})
			if len(res.NodeClaims) != 1 || !tc.check(&res.NodeClaims[0]) {
				t.Fatalf("plan %v does not honour the alias", summary(res))
			}
		})
	}
	// A zone spread over the beta zone key spreads over zones.
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "failure-domain.beta.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel(map[string]string{"app": "s"})}}
	}
	res := solve(t, &scheduling.Input{Pods: pods("s", 3, "100m", "128Mi", spread), Pools: []scheduling.Pool{pool("default")}})
	zones := map[string]bool{}
	for i := range res.NodeClaims {
		zones[res.NodeClaims[i].Labels[corev1.LabelTopologyZone]] = true
	}
	if len(zones) != 3 {
		t.Errorf("3 pods spread over the beta zone key landed in %d zones, want 3", len(zones))
	}
}

func TestTemplateLabelsConstrainLikeRequirements(t *testing.T) {
	zoneA := pool("zonal", func(np *karpv1.NodePool) {
		np.Spec.Template.Labels = map[string]string{corev1.LabelTopologyZone: "zone-a"}
	})
	res := solve(t, &scheduling.Input{Pods: pods("p", 3, "1", "1Gi"), Pools: []scheduling.Pool{zoneA}})
	for i := range res.NodeClaims {
		if z := res.NodeClaims[i].Zones; len(z) != 1 || z[0] != "zone-a" {
			t.Errorf("NodeClaim %s may launch in %v, want only zone-a", res.NodeClaims[i].Name, z)
		}
	}
	// A pod asking for another zone cannot use the pool.
	res = solve(t, &scheduling.Input{Pods: pods("q", 1, "1", "1Gi", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "zone-b"}
	}), Pools: []scheduling.Pool{zoneA}})
	if len(res.Unschedulable) != 1 {
		t.Errorf("a pod for zone-b was planned on a pool confined to zone-a: %v", summary(res))
	}
	// An instance type label confines the pool's types.
	typed := pool("typed", func(np *karpv1.NodePool) {
		np.Spec.Template.Labels = map[string]string{corev1.LabelInstanceTypeStable: "m5.xlarge"}
	})
	res = solve(t, &scheduling.Input{Pods: pods("r", 1, "100m", "128Mi"), Pools: []scheduling.Pool{typed}})
	if len(res.NodeClaims) != 1 || len(res.NodeClaims[0].InstanceTypes) != 1 || cheapest(&res.NodeClaims[0]) != "m5.xlarge" {
		t.Errorf("plan %v, want one m5.xlarge only", summary(res))
	}
}

func TestPodLevelAndInitContainerRequests(t *testing.T) {
	restart := corev1.ContainerRestartPolicyAlways
	p := mkPod("p", map[string]string{"app": "p"}, "100m", "128Mi")
	// Pod-level requests win over the containers' for cpu and memory.
	p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("2Gi")}}
	got, _ := scheduling.PodRequests(p)
	if got[catalog.CPU] != 3000 || got[catalog.Memory] != 2<<30 {
		t.Errorf("pod-level limits as requests: cpu %dm memory %d, want 3000m and 2Gi", got[catalog.CPU], got[catalog.Memory])
	}
	// A sidecar runs beside the containers; a plain init container only before them.
	q := mkPod("q", map[string]string{"app": "q"}, "1", "1Gi")
	q.Spec.InitContainers = []corev1.Container{
		{Name: "sidecar", RestartPolicy: &restart, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}},
		{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}},
	}
	q.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	got, _ = scheduling.PodRequests(q)
	// max(1 + 0.5, 2 + 0.5) + 0.25
	if got[catalog.CPU] != 2750 {
		t.Errorf("init/sidecar/overhead cpu %dm, want 2750m", got[catalog.CPU])
	}
	res := solve(t, &scheduling.Input{Pods: []*corev1.Pod{p}, Pools: []scheduling.Pool{pool("default")}})
	if len(res.NodeClaims) != 1 || cheapest(&res.NodeClaims[0]) != "m6g.xlarge" {
		t.Errorf("a pod requesting 3 cpu at pod level: plan %v, want one m6g.xlarge", summary(res))
	}
}

func requiredAffinity(key string, op corev1.NodeSelectorOperator, vals ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: vals}}}},
	}}}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A 2-cpu pod and a 1-cpu pod whose preferred pod affinity cannot hold (no pod matches): the
// second is placed first, on a node of its own, and the first did not fit its room, which left
// two nodes (t3a.small and c8gd.xlarge on the full catalog) where the larger one alone holds
// both for less. The final fold moves the small node's pod into the other's spare room.
func TestFoldCheapNodeIntoSpareRoom(t *testing.T) {
	a := mkPod("a", map[string]string{"app": "a"}, "2", "4Gi")
	b := mkPod("b", map[string]string{"app": "b"}, "1", "1Gi")
	b.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelTopologyZone, LabelSelector: sel(map[string]string{"app": "absent"})}}}}}
	in := &scheduling.Input{Pods: []*corev1.Pod{a, b}, Pools: []scheduling.Pool{{NodePool: nodePool("default"), InstanceTypes: usEast1(t)}}}
	res := solve(t, in)
	if len(res.NodeClaims) != 1 || len(res.NodeClaims[0].Pods) != 2 {
		t.Fatalf("plan %v, want both pods on one node", summary(res))
	}
	// The one node costs less than the two cheapest nodes the pods fit apart.
	alone := func(p *corev1.Pod) float64 {
		r := solve(t, &scheduling.Input{Pods: []*corev1.Pod{p}, Pools: in.Pools})
		return r.TotalPricePerHour()
	}
	if got, apart := res.TotalPricePerHour(), alone(a.DeepCopy())+alone(b.DeepCopy()); got >= apart {
		t.Errorf("one node at $%.4f/h, the pods apart $%.4f/h", got, apart)
	}
}
