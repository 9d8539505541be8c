package provisioning

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/testbed/schedulingcheck"
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

// TestPartialBatchFillsInFlightNodeClaim: a pod of a later batch lands in the free room of a
// NodeClaim an earlier batch created and that has not launched yet, instead of on a new node
// (issue 13). The NodeClaim may become c5.large or c5.xlarge and holds a nominated 1-cpu pod:
// whichever launches, c5.large's room is there, so a 500m pod joins it; a pod that fits only
// c5.xlarge's room does not (a new NodeClaim); and the pool's limits count the in-flight
// NodeClaim as its largest option.
func TestPartialBatchFillsInFlightNodeClaim(t *testing.T) {
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	its := cat.InstanceTypes(catalog.NodeClassOptions{})
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-1", Labels: map[string]string{karpv1.LabelNodePool: "pool"}},
		Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large", "c5.xlarge"}}}},
	}
	pool := func(limits corev1.ResourceList) []scheduling.Pool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}}
		np.Spec.Limits = limits
		return []scheduling.Pool{{NodePool: np, InstanceTypes: its}}
	}
	nominated := pendingPod("a", "1")
	noms := map[k8stypes.UID]string{nominated.UID: "pool-1"}
	plan := func(pods []*corev1.Pod, limits corev1.ResourceList) *scheduling.Result {
		c := state.New(append([]*corev1.Pod{nominated}, pods...), nil, []*karpv1.NodeClaim{nc})
		in := input(c, pool(limits), noms, "us-east-1")
		if len(in.NodeClaims) != 1 || len(in.NodeClaims[0].Pods) != 1 || in.NodeClaims[0].Pods[0] != nominated {
			t.Fatalf("in-flight claims %+v: want pool-1 holding the nominated pod", in.NodeClaims)
		}
		if len(in.Pods) != len(pods) {
			t.Fatalf("pending pods %v: want %d (the nominated one is not pending)", in.Pods, len(pods))
		}
		res := scheduling.Solve(in)
		if err := schedulingcheck.Check(in, res); err != nil {
			t.Errorf("checker: %v", err)
		}
		return res
	}

	res := plan([]*corev1.Pod{pendingPod("b", "500m")}, nil)
	if len(res.NodeClaims) != 0 || len(res.Bindings) != 1 || res.Bindings[0].Node != "pool-1" {
		t.Errorf("a 500m pod: %d new NodeClaims, bindings %+v; want it on pool-1", len(res.NodeClaims), res.Bindings)
	}
	res = plan([]*corev1.Pod{pendingPod("c", "2")}, nil)
	if len(res.NodeClaims) != 1 || len(res.Placements()) != 0 {
		t.Errorf("a 2-cpu pod (room only if c5.xlarge launches): %d new NodeClaims, %d placements; want a new NodeClaim",
			len(res.NodeClaims), len(res.Placements()))
	}
	// 4 cpu of limit: the in-flight NodeClaim may become a 4-vCPU c5.xlarge, nothing is left.
	res = plan([]*corev1.Pod{pendingPod("c", "2")}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")})
	if len(res.NodeClaims) != 0 || len(res.Unschedulable) != 1 {
		t.Errorf("under a 4-cpu limit: %d new NodeClaims, %d unschedulable; want none and 1", len(res.NodeClaims), len(res.Unschedulable))
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
	// Karpenter marks every NodeClaim with whether its minValues were relaxed.
	if v := nc.Annotations[karpv1.AnnotationMinValuesRelaxed]; v != "false" {
		t.Errorf("%s=%q, want false", karpv1.AnnotationMinValuesRelaxed, v)
	}
	planned.MinValuesRelaxed = true
	if v := newNodeClaim(np, planned).Annotations[karpv1.AnnotationMinValuesRelaxed]; v != "true" {
		t.Errorf("relaxed: %s=%q, want true", karpv1.AnnotationMinValuesRelaxed, v)
	}
}

// Pods planned onto a NodeClaim whose node registered but is not initialized yet keep its room
// until the hand-off gives them their nominated node: the next round does not pack them again.
// Once the node is initialized, a pod still pending without a nomination is planned afresh.
func TestStartingNodeKeepsItsPlannedPods(t *testing.T) {
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc"}, Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-1"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-1", Labels: map[string]string{}}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	planned, other := pendingPod("planned", "1"), pendingPod("other", "1")
	noms := map[k8stypes.UID]string{planned.UID: "default-abc"}

	in := input(state.New([]*corev1.Pod{planned, other}, []*corev1.Node{node}, []*karpv1.NodeClaim{claim}), nil, noms, "us-east-1")
	if len(in.Pods) != 1 || in.Pods[0] != other {
		t.Errorf("pending while the node starts: %v, want only other", names(in.Pods))
	}
	if len(in.Nodes) != 1 || len(in.Nodes[0].Pods) != 1 || in.Nodes[0].Pods[0] != planned {
		t.Errorf("the starting node holds %v, want planned", names(in.Nodes[0].Pods))
	}

	node.Labels[karpv1.LabelNodeInitialized] = "true"
	in = input(state.New([]*corev1.Pod{planned, other}, []*corev1.Node{node}, []*karpv1.NodeClaim{claim}), nil, noms, "us-east-1")
	if len(in.Pods) != 2 || len(in.Nodes[0].Pods) != 0 {
		t.Errorf("after initialization: pending %v, on the node %v; want both pending", names(in.Pods), names(in.Nodes[0].Pods))
	}
}

// A pod handed off at launch, nominated to the node its NodeClaim's instance boots as, still
// takes the NodeClaim's room: otherwise the next batch sees the NodeClaim empty and plans other
// pods into it.
func TestBootingNodeClaimKeepsItsHandedOffPods(t *testing.T) {
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc"}, Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-1"}}
	handed, other, preemptor := pendingPod("handed", "1"), pendingPod("other", "1"), pendingPod("preemptor", "1")
	handed.Status.NominatedNodeName = "ip-10-0-0-1.ec2.internal"
	preemptor.Status.NominatedNodeName = "ip-10-0-0-2.ec2.internal"
	noms := map[k8stypes.UID]string{handed.UID: "default-abc"}

	in := input(state.New([]*corev1.Pod{handed, other, preemptor}, nil, []*karpv1.NodeClaim{claim}), nil, noms, "us-east-1")
	if len(in.NodeClaims) != 1 || len(in.NodeClaims[0].Pods) != 1 || in.NodeClaims[0].Pods[0] != handed {
		t.Errorf("the booting NodeClaim holds %v, want handed", names(in.NodeClaims[0].Pods))
	}
	if len(in.Pods) != 1 || in.Pods[0] != other {
		t.Errorf("pending: %v, want only other (a nominated pod is not provisionable)", names(in.Pods))
	}
}

// The pods still on a node that is being deleted need room in a disruption's simulation, as
// the pods of the nodes it asks about do: the 3-cpu pod of the draining node is planned onto
// another node.
func TestSimulateWithoutMovesDrainingPods(t *testing.T) {
	c := handOffCluster()
	for _, nc := range c.NodeClaims {
		if nc.Name == "claim-managed" {
			nc.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
		}
	}
	for _, n := range c.Nodes {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	p := New(nil, Options{})
	res := p.SimulateWithout(c, nil, map[string]bool{})
	if len(res.Bindings) != 1 || res.Bindings[0].Pod.Name != "big" || res.Bindings[0].Node == "managed" {
		t.Fatalf("bindings %+v, unschedulable %+v: want big moved off the draining node", res.Bindings, res.Unschedulable)
	}
}

// A decision for many pods nominates every one of them but posts Nominated events at
// Karpenter's pace (a burst of 10, then 5 per second), not one per pod at once.
func TestNominatedEventsRateLimited(t *testing.T) {
	rec := record.NewFakeRecorder(200)
	p := New(nil, Options{Recorder: rec})
	var pods []*corev1.Pod
	for i := range 100 {
		pods = append(pods, pendingPod(fmt.Sprintf("p%d", i), "100m"))
	}
	p.nominate(pods, "big-claim")
	if got := len(p.opts.Nominations.Pods("big-claim")); got != 100 {
		t.Errorf("%d pods nominated, want 100", got)
	}
	// The burst may have refilled by a token or two while the loop ran.
	if got := len(rec.Events); got < nominatedEventsBurst || got > nominatedEventsBurst+2 {
		t.Errorf("%d Nominated events for 100 pods at once, want about %d", got, nominatedEventsBurst)
	}
}
