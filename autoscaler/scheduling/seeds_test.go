package scheduling_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// The seed scenarios of DESIGN.md section 6, on the embedded us-east-1 catalog.

func replicas(name string, n int, labels map[string]string, req corev1.ResourceList) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
				Resources: corev1.ResourceRequirements{Requests: req}}}},
		})
	}
	return out
}

func solveChecked(t *testing.T, in *scheduling.Input) *scheduling.Result {
	t.Helper()
	res := scheduling.Solve(in)
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Fatalf("checker: %v", err)
	}
	for _, u := range res.Unschedulable {
		t.Errorf("pod %s unschedulable: %s", u.Pod.Name, u.Reason)
	}
	return res
}

func mib(n int64) int64 { return n << 20 }

// Workshop (seed 003): a pool limited to c5.large, m5.large, r5.large and m5.xlarge on-demand;
// 5 × 1Gi ⇒ exactly one m5.large on-demand (1930m / 6903Mi / 29 pods).
func TestSeedWorkshop(t *testing.T) {
	np := nodePool("default")
	np.Spec.Template.Labels = map[string]string{"type": "karpenter"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{
		{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large", "m5.large", "r5.large", "m5.xlarge"}},
		{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
	pods := replicas("inflate", 5, map[string]string{"app": "inflate"}, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")})
	for _, p := range pods {
		p.Namespace = "other"
		p.Spec.NodeSelector = map[string]string{"type": "karpenter"}
	}
	in := &scheduling.Input{Pods: pods, Pools: []scheduling.Pool{{NodePool: np, InstanceTypes: usEast1(t)}}}
	res := solveChecked(t, in)
	if len(res.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(res.NodeClaims))
	}
	nc := &res.NodeClaims[0]
	it, o := nc.Cheapest()
	if it.Name != "m5.large" || o.CapacityType != "on-demand" || len(nc.Pods) != 5 {
		t.Fatalf("got %s %s with %d pods, want m5.large on-demand with 5", it.Name, o.CapacityType, len(nc.Pods))
	}
	a := it.Allocatable
	if a[catalog.CPU] != 1930 || a[catalog.Memory] != mib(6903) || a[catalog.Pods] != 29 {
		t.Errorf("m5.large allocatable %s, want cpu=1930m memory=6903Mi pods=29", scheduling.FormatResources(a))
	}
	if nc.Labels["type"] != "karpenter" || nc.Labels["karpenter.sh/nodepool"] != "default" || nc.Labels["node.kubernetes.io/instance-type"] != "m5.large" {
		t.Errorf("labels %v", nc.Labels)
	}
	// The other options are the pricier types that also fit, cheapest first.
	var names []string
	for _, opt := range nc.InstanceTypes {
		names = append(names, opt.Type.Name)
	}
	if fmt.Sprint(names) != "[m5.large r5.large m5.xlarge]" {
		t.Errorf("options %v, want [m5.large r5.large m5.xlarge]", names)
	}
}

// Weasel (seed 004): a spot-only t3.medium pool; three pending pods plus five daemonsets
// requesting 430m / 870Mi / 8 pods in all ⇒ one t3.medium spot node (1930m / 3246Mi / 17 pods).
func TestSeedWeasel(t *testing.T) {
	np := nodePool("default")
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{
		{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
		{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"t3.medium"}},
	}
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
	req := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	var pods []*corev1.Pod
	for _, p := range []struct{ name, cpu, mem string }{
		{"grafana-867556d6f5-2lpdh", "100m", "128Mi"},
		{"prometheus-server-5d8d4b9d9b-kmhld", "50m", "256Mi"},
		{"prometheus-alertmanager-0", "25m", "64Mi"},
	} {
		pod := replicas(p.name, 1, map[string]string{"app": p.name}, req(p.cpu, p.mem))[0]
		pod.Name, pod.Namespace = p.name, "monitoring"
		pods = append(pods, pod)
	}
	var daemonSets []*appsv1.DaemonSet
	for _, d := range []struct{ name, cpu, mem string }{
		{"aws-node", "25m", "0"}, {"kube-proxy", "100m", "0"}, {"ebs-csi-node", "30m", "120Mi"},
		{"node-exporter", "50m", "150Mi"}, {"fluent-bit", "50m", "152Mi"},
	} {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: "kube-system"}}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: d.name, Resources: corev1.ResourceRequirements{Requests: req(d.cpu, d.mem)}}}
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		daemonSets = append(daemonSets, ds)
	}
	in := &scheduling.Input{Pods: pods, DaemonSets: daemonSets, Pools: []scheduling.Pool{{NodePool: np, InstanceTypes: usEast1(t)}}}
	res := solveChecked(t, in)
	if len(res.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(res.NodeClaims))
	}
	nc := &res.NodeClaims[0]
	it, o := nc.Cheapest()
	if it.Name != "t3.medium" || o.CapacityType != "spot" || len(nc.Pods) != 3 {
		t.Fatalf("got %s %s with %d pods, want one t3.medium spot with 3", it.Name, o.CapacityType, len(nc.Pods))
	}
	total := nc.PodRequests
	for r := range total {
		total[r] += nc.DaemonSetRequests[r]
	}
	if total[catalog.CPU] != 430 || total[catalog.Memory] != mib(870) || total[catalog.Pods] != 8 {
		t.Errorf("requests with daemonsets %s, want cpu=430m memory=870Mi pods=8", scheduling.FormatResources(total))
	}
	a := it.Allocatable
	if a[catalog.CPU] != 1930 || a[catalog.Memory] != mib(3246) || a[catalog.Pods] != 17 {
		t.Errorf("t3.medium allocatable %s, want cpu=1930m memory=3246Mi pods=17", scheduling.FormatResources(a))
	}
}

// Spot + dedicated (seed 000): provisioner1 is spot-only; provisioner2 is on-demand c5.xlarge in
// one zone with taint cpuIntensive=true:NoSchedule and label nodeType=cpu-node. inflate1 (5 ×
// 1 cpu, nodeSelector capacity-type spot) lands only on spot nodes; inflate2 (5 × 1 cpu,
// nodeSelector nodeType=cpu-node, tolerating the taint) only on c5.xlarge on-demand nodes:
// 3 pods per 3920m node ⇒ 2 nodes.
func TestSeedSpotAndDedicated(t *testing.T) {
	p1 := nodePool("provisioner1")
	p1.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{
		{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
	}
	p1.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
	p2 := nodePool("provisioner2")
	p2.Spec.Template.Labels = map[string]string{"phase": "test2", "nodeType": "cpu-node"}
	p2.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "cpuIntensive", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	p2.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{
		{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.xlarge"}},
		{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
		{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	p2.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}

	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	inflate1 := replicas("inflate1", 5, map[string]string{"app": "inflate1"}, cpu)
	for _, p := range inflate1 {
		p.Namespace = "karpenter-inflate"
		p.Spec.NodeSelector = map[string]string{"karpenter.sh/capacity-type": "spot"}
	}
	inflate2 := replicas("inflate2", 5, map[string]string{"app": "inflate2"}, cpu)
	for _, p := range inflate2 {
		p.Namespace = "karpenter-inflate"
		p.Spec.NodeSelector = map[string]string{"nodeType": "cpu-node"}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "cpuIntensive", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	types := usEast1(t)
	in := &scheduling.Input{
		Pods:  append(inflate1, inflate2...),
		Pools: []scheduling.Pool{{NodePool: p1, InstanceTypes: types}, {NodePool: p2, InstanceTypes: types}},
	}
	res := solveChecked(t, in)
	dedicated := 0
	for _, nc := range res.NodeClaims {
		it, o := nc.Cheapest()
		for _, p := range nc.Pods {
			switch p.Labels["app"] {
			case "inflate1":
				if nc.Pool != "provisioner1" || o.CapacityType != "spot" {
					t.Errorf("inflate1 pod %s on %s %s %s", p.Name, nc.Pool, it.Name, o.CapacityType)
				}
			case "inflate2":
				if nc.Pool != "provisioner2" || it.Name != "c5.xlarge" || o.CapacityType != "on-demand" || o.Zone != "us-east-1a" {
					t.Errorf("inflate2 pod %s on %s %s %s %s", p.Name, nc.Pool, it.Name, o.CapacityType, o.Zone)
				}
			}
		}
		if nc.Pool == "provisioner2" {
			dedicated++
			if len(nc.Pods) > 3 {
				t.Errorf("%d pods on a c5.xlarge (3920m), at most 3 fit", len(nc.Pods))
			}
			if it.Allocatable[catalog.CPU] != 3920 {
				t.Errorf("c5.xlarge allocatable cpu %dm, want 3920m", it.Allocatable[catalog.CPU])
			}
		}
	}
	if dedicated != 2 {
		t.Errorf("%d provisioner2 nodes, want 2", dedicated)
	}
}
