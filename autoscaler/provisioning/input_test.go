package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

func pendingPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

func TestInputNominationsAndInFlightCapacity(t *testing.T) {
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	its := cat.InstanceTypes(catalog.NodeClassOptions{})
	// An unlaunched NodeClaim that may become c5.large (2 vCPU) or c5.xlarge (4 vCPU).
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-1", Labels: map[string]string{karpv1.LabelNodePool: "pool"}},
		Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large", "c5.xlarge"}}}},
	}
	a, b := pendingPod("a", "1"), pendingPod("b", "500m")
	c := state.New([]*corev1.Pod{a, b}, nil, []*karpv1.NodeClaim{nc})
	pools := []scheduling.Pool{{NodePool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}}, InstanceTypes: its}}
	in := input(c, pools, Nominations{a.UID: "pool-1"}, "us-east-1")

	if len(in.Pods) != 1 || in.Pods[0] != b {
		t.Fatalf("pending pods %v: want only b (a is nominated)", in.Pods)
	}
	if len(in.NodeClaims) != 1 || len(in.NodeClaims[0].Pods) != 1 || in.NodeClaims[0].Pods[0] != a {
		t.Fatalf("in-flight claims %+v: want pool-1 holding a", in.NodeClaims)
	}
	shown := in.NodeClaims[0].NodeClaim
	if got := shown.Status.Capacity.Cpu().MilliValue(); got != 4000 {
		t.Errorf("capacity counted against limits = %dm cpu, want the largest option's 4000m", got)
	}
	if got := shown.Status.Allocatable.Cpu().MilliValue(); got != 1000 {
		t.Errorf("allocatable = %dm, want only what the nominated pod takes (1000m)", got)
	}
	if nc.Status.Capacity != nil {
		t.Error("the snapshot's NodeClaim was modified")
	}
}

func TestNewNodeClaim(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
	np.Spec.Template.Labels = map[string]string{"type": "karpenter"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	planned := &scheduling.NodeClaim{
		Pool: "default",
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "r5.large"}},
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
		},
	}
	planned.PodRequests[catalog.Memory] = 5 << 30
	planned.PodRequests[catalog.Pods] = 5
	planned.DaemonSetRequests[catalog.CPU] = 100
	nc := newNodeClaim(np, planned)
	if nc.GenerateName != "default-" || nc.Labels[karpv1.LabelNodePool] != "default" || nc.Labels["type"] != "karpenter" {
		t.Errorf("metadata %+v", nc.ObjectMeta)
	}
	if nc.Labels[corev1.LabelTopologyZone] != "us-east-1a" || nc.Labels[corev1.LabelInstanceTypeStable] != "" {
		t.Errorf("labels %v: want the single-valued zone, not the two-valued instance type", nc.Labels)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].UID != "pool-uid" {
		t.Errorf("owner %v", nc.OwnerReferences)
	}
	req := nc.Spec.Resources.Requests
	if req.Memory().String() != "5Gi" || req.Cpu().String() != "100m" || req.Pods().Value() != 5 {
		t.Errorf("requests %v: want pods plus daemonsets", req)
	}
	if len(nc.Spec.Taints) != 1 || nc.Spec.NodeClassRef.Name != "default" {
		t.Errorf("spec %+v", nc.Spec)
	}
	np.Spec.Template.Spec.Taints[0].Key = "changed"
	if nc.Spec.Taints[0].Key != "k" {
		t.Error("the NodeClaim shares the pool's taint slice")
	}
}
