package schedulingcheck_test

import (
	"fmt"
	"slices"
	"strings"
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

func itype(name string, cpu, memGiB int64, price float64) catalog.InstanceType {
	var c catalog.Resources
	c[catalog.CPU], c[catalog.Memory], c[catalog.Pods] = cpu*1000, memGiB<<30, 20
	a := c
	a[catalog.CPU] -= 100
	it := catalog.InstanceType{Name: name, Capacity: c, Allocatable: a, Labels: map[string]string{
		"node.kubernetes.io/instance-type": name, "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}}
	for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
		it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, CapacityType: "on-demand", PricePerHour: price, Available: true})
	}
	return it
}

func pod(name, app, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

// input: a pool of three sizes; three anti-affine pods, six zone-spread pods, four plain ones.
func input() *scheduling.Input {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
		Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "x"}}}}}
	in := &scheduling.Input{Pools: []scheduling.Pool{{NodePool: np, InstanceTypes: []catalog.InstanceType{
		itype("small", 2, 4, 0.1), itype("medium", 4, 8, 0.2), itype("large", 8, 16, 0.4)}}}}
	for i := 0; i < 3; i++ {
		p := pod(fmt.Sprintf("anti-%d", i), "anti", "500m", "512Mi")
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "anti"}}, TopologyKey: "kubernetes.io/hostname"}}}}
		in.Pods = append(in.Pods, p)
	}
	for i := 0; i < 6; i++ {
		p := pod(fmt.Sprintf("spread-%d", i), "spread", "500m", "512Mi")
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		in.Pods = append(in.Pods, p)
	}
	for i := 0; i < 4; i++ {
		in.Pods = append(in.Pods, pod(fmt.Sprintf("plain-%d", i), "plain", "1", "2Gi"))
	}
	return in
}

func bindingOf(res *scheduling.Result, name string) int {
	for i, b := range res.Bindings {
		if b.Pod.Name == name {
			return i
		}
	}
	return -1
}

// move rebinds a pod to another new NodeClaim (keeping the claims' pod lists consistent).
func move(res *scheduling.Result, name string, to int) {
	i := bindingOf(res, name)
	from := res.Bindings[i].NodeClaim
	p := res.Bindings[i].Pod
	res.NodeClaims[from].Pods = slices.DeleteFunc(res.NodeClaims[from].Pods, func(q *corev1.Pod) bool { return q == p })
	res.NodeClaims[to].Pods = append(res.NodeClaims[to].Pods, p)
	res.Bindings[i].NodeClaim, res.Bindings[i].Node = to, res.NodeClaims[to].Name
}

func TestCheckerAcceptsTheEngine(t *testing.T) {
	in := input()
	if err := schedulingcheck.Check(in, scheduling.Solve(in)); err != nil {
		t.Fatal(err)
	}
}

// Every tampering must be caught, with a message naming the problem.
func TestCheckerCatchesTampering(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(in *scheduling.Input, res *scheduling.Result)
		want   string
	}{
		{"anti-affinity", func(in *scheduling.Input, res *scheduling.Result) {
			move(res, "anti-1", res.Bindings[bindingOf(res, "anti-0")].NodeClaim)
		}, "pod anti-affinity"},
		{"zone spread", func(in *scheduling.Input, res *scheduling.Result) {
			target := res.Bindings[bindingOf(res, "spread-0")].NodeClaim
			for i := 1; i < 6; i++ {
				move(res, fmt.Sprintf("spread-%d", i), target)
			}
		}, "topology spread on topology.kubernetes.io/zone"},
		{"lost pod", func(in *scheduling.Input, res *scheduling.Result) {
			i := bindingOf(res, "plain-0")
			nc := &res.NodeClaims[res.Bindings[i].NodeClaim]
			nc.Pods = slices.DeleteFunc(nc.Pods, func(q *corev1.Pod) bool { return q.Name == "plain-0" })
			res.Bindings = slices.Delete(res.Bindings, i, i+1)
		}, "neither bound nor reported unschedulable"},
		{"schedulable pod reported unschedulable", func(in *scheduling.Input, res *scheduling.Result) {
			i := bindingOf(res, "plain-0")
			p := res.Bindings[i].Pod
			nc := &res.NodeClaims[res.Bindings[i].NodeClaim]
			nc.Pods = slices.DeleteFunc(nc.Pods, func(q *corev1.Pod) bool { return q == p })
			res.Bindings = slices.Delete(res.Bindings, i, i+1)
			res.Unschedulable = append(res.Unschedulable, scheduling.Unschedulable{Pod: p, Reason: "made up"})
		}, "reported unschedulable (made up) but fits"},
		{"too small an instance type", func(in *scheduling.Input, res *scheduling.Result) {
			nc := &res.NodeClaims[res.Bindings[bindingOf(res, "plain-0")].NodeClaim]
			small := in.Pools[0].InstanceTypes[0]
			nc.InstanceTypes = append([]scheduling.InstanceTypeOption{{Type: &small, PricePerHour: 0.1, Offerings: small.Offerings}}, nc.InstanceTypes...)
			nc.Labels["node.kubernetes.io/instance-type"] = "small"
		}, "does not fit"},
		{"unsorted options", func(in *scheduling.Input, res *scheduling.Result) {
			for i := range res.NodeClaims {
				if len(res.NodeClaims[i].InstanceTypes) > 1 {
					slices.Reverse(res.NodeClaims[i].InstanceTypes)
					res.NodeClaims[i].Labels["node.kubernetes.io/instance-type"] = res.NodeClaims[i].InstanceTypes[0].Type.Name
					return
				}
			}
		}, "not sorted by price"},
		{"option beyond the limits", func(in *scheduling.Input, res *scheduling.Result) {
			// A cpu limit exactly at what the NodeClaims' cheapest options use: any larger
			// option would take the pool over it.
			var used int64
			for i := range res.NodeClaims {
				it, _ := res.NodeClaims[i].Cheapest()
				used += it.Capacity[catalog.CPU]
			}
			in.Pools[0].NodePool.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(used, resource.DecimalSI)}
		}, "would take pool default over its cpu limit"},
		{"duplicate binding", func(in *scheduling.Input, res *scheduling.Result) {
			res.Bindings = append(res.Bindings, res.Bindings[0])
		}, "appears 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input()
			res := scheduling.Solve(in)
			tc.tamper(in, res)
			err := schedulingcheck.Check(in, res)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckerCatchesUntoleratedTaint(t *testing.T) {
	in := input()
	in.Pools[0].NodePool.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	for _, p := range in.Pods {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
	res := scheduling.Solve(in)
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Fatal(err)
	}
	res.Bindings[0].Pod.Spec.Tolerations = nil // the pod no longer tolerates the pool's taint
	if err := schedulingcheck.Check(in, res); err == nil || !strings.Contains(err.Error(), "taint dedicated=x:NoSchedule not tolerated") {
		t.Errorf("error %v, want the untolerated taint", err)
	}
}

// A PreferNoSchedule taint is a preference: pods that do not tolerate it may still land on
// such nodes, and the checker must not call that a violation.
func TestCheckerAcceptsPreferNoScheduleTaints(t *testing.T) {
	in := input()
	in.Pools[0].NodePool.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "prefer-not", Effect: corev1.TaintEffectPreferNoSchedule}}
	res := scheduling.Solve(in)
	if len(res.Unschedulable) != 0 || len(res.NodeClaims) == 0 {
		t.Fatalf("%d unschedulable, %d NodeClaims", len(res.Unschedulable), len(res.NodeClaims))
	}
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Fatal(err)
	}
}

// Two pods on one host port, or a pod on a port a daemonset of the node holds, are caught.
func TestCheckerCatchesHostPortClash(t *testing.T) {
	in := input()
	in.Pods = nil
	for i := 0; i < 2; i++ {
		p := pod(fmt.Sprintf("web-%d", i), "web", "100m", "128Mi")
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		in.Pods = append(in.Pods, p)
	}
	res := scheduling.Solve(in)
	if err := schedulingcheck.Check(in, res); err != nil || len(res.NodeClaims) != 2 {
		t.Fatalf("engine: %d NodeClaims, checker: %v; want 2 and no error", len(res.NodeClaims), err)
	}
	move(res, "web-1", res.Bindings[bindingOf(res, "web-0")].NodeClaim)
	if err := schedulingcheck.Check(in, res); err == nil || !strings.Contains(err.Error(), "host port 0.0.0.0:80/TCP is already in use") {
		t.Errorf("two pods on host port 80 of one node: %v", err)
	}

	res = scheduling.Solve(in)
	ds := &appsv1.DaemonSet{}
	ds.Name = "proxy"
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80, HostIP: "10.1.2.3"}}}}
	in.DaemonSets = []*appsv1.DaemonSet{ds}
	if err := schedulingcheck.Check(in, res); err == nil || !strings.Contains(err.Error(), "host port") {
		t.Errorf("pods on a host port a daemonset of every node holds: %v", err)
	}
}
