package nodeclaim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

func claim() *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abc", UID: "uid-1", Labels: map[string]string{"type": "karpenter", karpv1.LabelNodePool: "default"}},
		Spec: karpv1.NodeClaimSpec{
			Taints:        []karpv1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []karpv1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
				"memory": resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("1")}},
		},
	}
}

func TestAdoptNode(t *testing.T) {
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: karpv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule},
	}}}
	adoptNode(node, claim())
	if node.Labels["type"] != "karpenter" || node.Labels[karpv1.LabelNodeRegistered] != "true" {
		t.Errorf("labels %v", node.Labels)
	}
	keys := map[string]int{}
	for _, tt := range node.Spec.Taints {
		keys[tt.Key]++
	}
	if keys[karpv1.TaintKeyUnregistered] != 0 || keys["dedicated"] != 1 || keys["cni-not-ready"] != 1 {
		t.Errorf("taints %v: want the unregistered taint gone, dedicated once, the startup taint added", node.Spec.Taints)
	}
	if len(node.Finalizers) != 1 || node.Finalizers[0] != karpv1.TerminationFinalizer {
		t.Errorf("finalizers %v", node.Finalizers)
	}
	adoptNode(node, claim())
	if len(node.OwnerReferences) != 1 || len(node.Finalizers) != 1 || len(node.Spec.Taints) != 2 {
		t.Errorf("adopting twice changed the node: %+v", node)
	}
}

func TestNotInitialized(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	cases := []struct {
		name string
		node corev1.Node
		want string
	}{
		{"not ready", corev1.Node{}, "node is not Ready"},
		{"startup taint", corev1.Node{
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}},
		}, `startup taint "cni-not-ready" is still on the node`},
		{"gpu missing", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}},
			`extended resource "nvidia.com/gpu" is not registered on the node yet`},
		{"initialized", corev1.Node{Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{ready},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
		}}, ""},
	}
	for _, c := range cases {
		if got := notInitialized(&c.node, claim()); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// Registration hands the pods planned onto the NodeClaim to the kube-scheduler: each still
// pending one is nominated to the node; bound and vanished pods, and pods someone else already
// nominated (KEP-5278: a nomination is not overwritten), are left alone.
func TestHandOffNominatesPlannedPods(t *testing.T) {
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", UID: types.UID(name)}, Spec: corev1.PodSpec{NodeName: node}}
	}
	pending, bound, preemptor := pod("pending", ""), pod("bound", "other-node"), pod("preemptor", "")
	preemptor.Status.NominatedNodeName = "victims-node"
	c := fake.NewClientBuilder().WithObjects(pending, bound, preemptor).WithStatusSubresource(&corev1.Pod{}).Build()
	noms := state.NewNominations()
	noms.Nominate("default-abc", pending, bound, preemptor, pod("gone", ""))
	noms.Nominate("another-claim", pod("elsewhere", ""))
	l := NewLifecycle(c, Options{Nominations: noms})
	l.handOff(context.Background(), claim().Name, "ip-10-0-0-1.ec2.internal", "", false)
	wantNominated(t, c, map[string]string{"pending": "ip-10-0-0-1.ec2.internal", "bound": "", "preemptor": "victims-node"})
}

func wantNominated(t *testing.T, c client.Client, want map[string]string) {
	t.Helper()
	for name, node := range want {
		var got corev1.Pod
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "web", Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.NominatedNodeName != node {
			t.Errorf("pod %s nominated to %q, want %q", name, got.Status.NominatedNodeName, node)
		}
	}
}

// At launch the planned pods the kube-scheduler has tried go to the node name the cloud
// expects, while the instance boots (an untried pod would lose it at its first try);
// registration waits for that, then nominates the rest and moves the pods of a wrong guess to
// the node that registered, and leaves everyone else's nominations alone.
func TestHandOffAtLaunchThenAtRegistration(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", UID: types.UID(name)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	}
	a, b, preemptor, untried := pod("a"), pod("b"), pod("preemptor"), pod("untried")
	preemptor.Status.NominatedNodeName = "victims-node"
	untried.Status.Conditions = nil
	c := fake.NewClientBuilder().WithObjects(a, b, preemptor, untried).WithStatusSubresource(&corev1.Pod{}).Build()
	noms := state.NewNominations()
	noms.Nominate("default-abc", a, b, preemptor, untried)
	l := NewLifecycle(c, Options{Nominations: noms})
	nc := claim()
	nc.UID = "claim-uid"
	l.handOffAtLaunch(context.Background(), nc, "ip-10-0-0-1.ec2.internal")
	if got := noms.Expected(nc.Name); got != "ip-10-0-0-1.ec2.internal" || !noms.ExpectedNodes()[got] {
		t.Errorf("expected node %q, want the launch's name recorded", got)
	}
	l.awaitEarlyHandOff(context.Background(), nc)
	wantNominated(t, c, map[string]string{"a": "ip-10-0-0-1.ec2.internal", "b": "ip-10-0-0-1.ec2.internal", "preemptor": "victims-node", "untried": ""})

	// The node registered under another name: the launch's nominations move to it.
	l.handOff(context.Background(), nc.Name, "i-0abc.ec2.internal", noms.Expected(nc.Name), false)
	wantNominated(t, c, map[string]string{"a": "i-0abc.ec2.internal", "b": "i-0abc.ec2.internal", "preemptor": "victims-node", "untried": "i-0abc.ec2.internal"})
	noms.Registered(nc.Name)
	if noms.Expected(nc.Name) != "" || len(noms.ExpectedNodes()) != 0 {
		t.Error("a registered NodeClaim still expects its node")
	}
	// Without a name from the cloud nothing starts at launch.
	l.handOffAtLaunch(context.Background(), claim(), "")
	if _, ok := l.early.Load(claim().UID); ok || noms.Expected(claim().Name) != "" {
		t.Error("a hand-off started at launch without a node name")
	}
}

// A node stays closed while another NodeClaim of its decision is still on its way, and opens
// once that one is handed off too, or openTogether after its own hand-off; NodeClaims that are
// registered, failed to launch or are gone are not waited for.
func TestCohortOpensTogether(t *testing.T) {
	nc := func(name string, conds ...karpv1.Condition) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{Conditions: conds}}
	}
	launching := nc("launching")
	scheme := runtime.NewScheme()
	if err := karpv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nc("self"), launching,
		nc("registered", karpv1.Condition{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue}),
		nc("failed", karpv1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionFalse})).Build()
	noms := state.NewNominations()
	noms.Decided([]string{"self", "launching", "registered", "failed", "gone"})
	l := NewLifecycle(c, Options{Nominations: noms})
	ctx, t0 := context.Background(), time.Unix(1000, 0)
	if !l.cohortWaiting(ctx, nc("self"), t0, t0.Add(time.Second)) {
		t.Error("open while NodeClaim launching is still on its way")
	}
	if l.cohortWaiting(ctx, nc("self"), t0, t0.Add(openTogether)) {
		t.Error("still closed openTogether after the hand-off")
	}
	noms.HandOff("launching", t0)
	if l.cohortWaiting(ctx, nc("self"), t0, t0.Add(time.Second)) {
		t.Error("closed although the rest of the cohort is handed off, registered, failed or gone")
	}
	noms.Registered("launching")
	if l.cohortWaiting(ctx, nc("alone"), t0, t0) {
		t.Error("closed without a cohort")
	}
}
