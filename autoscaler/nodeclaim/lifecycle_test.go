package nodeclaim

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	b "github.com/karpool/karpool/testbed/builders"
	"github.com/karpool/karpool/testbed/fakecloud"
)

// A new NodeClaim gets the termination finalizer and one instance, on the cheapest offering: the
// launch labels and the class's hash on the NodeClaim, the provider ID and resources in its
// status, Launched=True and Registered=Unknown, and a look again when the node may be there.
func TestLaunchRecordsTheInstance(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	res := e.reconcile("c1")
	nc := e.claim("c1")
	if calls := e.cloud.CreateCalls(); len(calls) != 1 || calls[0].Name != "c1" {
		t.Fatalf("Create calls %d, want one for c1", len(calls))
	}
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		t.Errorf("finalizers %v, want the termination finalizer", nc.Finalizers)
	}
	if offering(nc) != "small/zone-a/on-demand" || nc.Status.ProviderID == "" || nc.Status.Allocatable.Cpu().Value() != 2 {
		t.Errorf("launched as %s, provider ID %q, allocatable %v; want small/zone-a/on-demand with 2 cpu", offering(nc), nc.Status.ProviderID, nc.Status.Allocatable)
	}
	if nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != b.NodeClass("default", true).Hash() {
		t.Errorf("class hash %q not stamped", nc.Annotations[awsv1.AnnotationEC2NodeClassHash])
	}
	if condition(nc, karpv1.ConditionTypeLaunched).Status != metav1.ConditionTrue || condition(nc, karpv1.ConditionTypeRegistered).Status != metav1.ConditionUnknown {
		t.Errorf("conditions %+v, want Launched=True, Registered=Unknown", nc.Status.Conditions)
	}
	if res.RequeueAfter != waitingForNode {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, waitingForNode)
	}
}

// A launch that fails for a reason other than capacity keeps the NodeClaim, says why in
// Launched=False, and is retried at a steady pace; the retry launches.
func TestLaunchRetriesSteadilyAfterAFailure(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	e.cloud.FailNext(fakecloud.Create, errors.New("VcpuLimitExceeded"))
	res := e.reconcile("c1")
	nc := e.claim("c1")
	launched := condition(nc, karpv1.ConditionTypeLaunched)
	if launched.Status != metav1.ConditionFalse || launched.Reason != "LaunchFailed" || !strings.Contains(launched.Message, "VcpuLimitExceeded") {
		t.Errorf("Launched %+v, want False/LaunchFailed naming the error", launched)
	}
	if res.RequeueAfter != launchRetry || e.capacityGone != 0 {
		t.Errorf("requeue after %s, capacity gone %d times; want %s and none", res.RequeueAfter, e.capacityGone, launchRetry)
	}
	e.launch("c1")
	if n := len(e.cloud.CreateCalls()); n != 2 {
		t.Errorf("%d Create calls, want 2", n)
	}
}

// Nothing is launched from a node class that is not ready: Launched=False names the class, and
// the launch is tried again later.
func TestLaunchWaitsForTheNodeClass(t *testing.T) {
	nc := b.NodeClaim("c1", b.CreatedAt(t0))
	nc.Spec.NodeClassRef.Name = "resolving"
	e := newEnv(t, nil, nc, b.NodeClass("resolving", false))
	res := e.reconcile("c1")
	launched := condition(e.claim("c1"), karpv1.ConditionTypeLaunched)
	if n := len(e.cloud.CreateCalls()); n != 0 {
		t.Errorf("%d Create calls from a class that is not ready", n)
	}
	if launched.Reason != "NodeClassNotReady" || !strings.Contains(launched.Message, `"resolving"`) || res.RequeueAfter != 10*time.Second {
		t.Errorf("Launched %+v, requeue after %s; want NodeClassNotReady naming the class, 10s", launched, res.RequeueAfter)
	}
}

// A reconcile that reads the NodeClaim as it was before its launch was written (a lagging
// cache) does not launch it again.
func TestLaunchIsNotRepeatedFromAStaleCopy(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	nc := e.launch("c1")
	stale := nc.DeepCopy()
	stale.Status = karpv1.NodeClaimStatus{}
	if err := e.c.Status().Update(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	if res := e.reconcile("c1"); res.RequeueAfter != time.Second {
		t.Errorf("requeue after %s, want a second", res.RequeueAfter)
	}
	if n := len(e.cloud.CreateCalls()); n != 1 {
		t.Errorf("%d Create calls, want 1", n)
	}
}

// When the cheapest offering has no capacity the launch falls back to the next, and the
// NodeClaim carries the labels of where it really launched.
func TestLaunchFallsBackToAnOfferingWithCapacity(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	e.cloud.NoCapacity("small/zone-a/on-demand")
	nc := e.launch("c1")
	if offering(nc) != "small/zone-b/on-demand" {
		t.Errorf("launched as %s, want small/zone-b/on-demand", offering(nc))
	}
}

// When no launch option has capacity the NodeClaim is deleted, so the provisioner plans again
// without the offerings that failed, and it is asked to at once.
func TestInsufficientCapacityDeletesTheClaim(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0),
		b.Requirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small")))
	e.cloud.NoCapacity("small/zone-a/on-demand", "small/zone-b/on-demand")
	e.reconcile("c1")
	nc := e.claim("c1")
	if nc == nil || nc.DeletionTimestamp == nil {
		t.Fatalf("NodeClaim %+v, want it being deleted", nc)
	}
	if e.capacityGone != 1 || !strings.Contains(e.events(), "InsufficientCapacityError") {
		t.Errorf("capacity gone %d times, want once with an InsufficientCapacityError event", e.capacityGone)
	}
}

// A launched NodeClaim whose node has not registered within the registration TTL is deleted
// (its finalizer terminates the instance), and the provisioner is asked to plan again.
func TestRegistrationTimeoutDeletesTheClaim(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	e.launch("c1")
	e.now = t0.Add(15 * time.Minute)
	e.reconcile("c1")
	if nc := e.claim("c1"); nc == nil || nc.DeletionTimestamp == nil {
		t.Fatalf("NodeClaim %+v, want it being deleted after the registration TTL", nc)
	}
	if e.capacityGone != 1 || !strings.Contains(e.events(), "RegistrationTimeout") {
		t.Errorf("capacity gone %d times, want once with a RegistrationTimeout event", e.capacityGone)
	}
}

// Before the TTL a NodeClaim waiting for its node is kept and looked at again no later than
// the TTL.
func TestRegistrationWaitsUntilTheTTL(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	e.launch("c1")
	e.now = t0.Add(15*time.Minute - time.Second)
	res := e.reconcile("c1")
	if nc := e.claim("c1"); nc.DeletionTimestamp != nil {
		t.Error("deleted before the registration TTL")
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("requeue after %s, want the second left of the TTL", res.RequeueAfter)
	}
}

// Registration adopts the node with the NodeClaim's provider ID: its labels, the registered
// label, the termination finalizer and an owner reference go on the node, the unregistered
// taint goes, and the NodeClaim records the node and Registered=True.
func TestRegistrationAdoptsTheNode(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	nc := e.launch("c1")
	e.create(b.Node("n1", nc.Status.ProviderID, b.Taint(karpv1.TaintKeyUnregistered)))
	e.reconcile("c1")
	node, nc := e.node("n1"), e.claim("c1")
	if node.Labels[karpv1.LabelNodeRegistered] != "true" || node.Labels[karpv1.LabelNodePool] != "default" || hasKey(node.Spec.Taints, karpv1.TaintKeyUnregistered) {
		t.Errorf("node labels %v, taints %v; want registered, the pool label, no unregistered taint", node.Labels, node.Spec.Taints)
	}
	if !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) || len(node.OwnerReferences) != 1 || node.OwnerReferences[0].Name != "c1" {
		t.Errorf("node finalizers %v, owners %v", node.Finalizers, node.OwnerReferences)
	}
	if nc.Status.NodeName != "n1" || condition(nc, karpv1.ConditionTypeRegistered).Status != metav1.ConditionTrue {
		t.Errorf("NodeClaim node %q, conditions %+v; want n1, Registered=True", nc.Status.NodeName, nc.Status.Conditions)
	}
}

// Registration copies the NodeClaim's annotations (the template's among them) and taints onto
// the Node, as Karpenter does; a node labelled do-not-sync-taints keeps its own taints and
// loses only the unregistered one.
func TestAdoptNodeCopiesAnnotationsAndTaints(t *testing.T) {
	nc := &karpv1.NodeClaim{}
	nc.Annotations = map[string]string{"team.example.com/owner": "payments"}
	nc.Spec.Taints = []karpv1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	for _, doNotSync := range []bool{false, true} {
		node := &corev1.Node{}
		node.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}
		if doNotSync {
			node.Labels = map[string]string{karpv1.LabelDoNotSyncTaints: "true"}
		}
		adoptNode(node, nc)
		if node.Annotations["team.example.com/owner"] != "payments" {
			t.Errorf("do-not-sync-taints %t: annotations %v, want the NodeClaim's", doNotSync, node.Annotations)
		}
		if got := hasKey(node.Spec.Taints, "dedicated"); got == doNotSync || hasKey(node.Spec.Taints, karpv1.TaintKeyUnregistered) {
			t.Errorf("do-not-sync-taints %t: taints %v; want the NodeClaim's taint only when syncing, never the unregistered one", doNotSync, node.Spec.Taints)
		}
	}
}

// Registration hands the pods the provisioner planned onto the NodeClaim to the
// kube-scheduler, through the nominations the two share.
func TestRegistrationHandsPlannedPodsToTheScheduler(t *testing.T) {
	waiting := b.Pod("web", b.Unschedulable())
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)), waiting)
	e.noms.Nominate("c1", waiting)
	nc := e.launch("c1")
	e.create(b.Node("n1", nc.Status.ProviderID))
	e.reconcile("c1")
	if got := e.pod("web").Status.NominatedNodeName; got != "n1" {
		t.Errorf("pod nominated to %q, want n1", got)
	}
	if e.noms.HandedOff("c1") {
		t.Error("the hand-off is still recorded after registration")
	}
}

// A node stays closed (unregistered) while another NodeClaim of its decision is on its way,
// with its pods already handed off, and opens openTogether after its hand-off.
func TestRegistrationWaitsForItsCohort(t *testing.T) {
	waiting := b.Pod("web", b.Unschedulable())
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)), b.NodeClaim("c2", b.CreatedAt(t0)), waiting)
	e.noms.Decided([]string{"c1", "c2"})
	e.noms.Nominate("c1", waiting)
	nc := e.launch("c1")
	e.launch("c2")
	e.create(b.Node("n1", nc.Status.ProviderID, b.Taint(karpv1.TaintKeyUnregistered)))
	if res := e.reconcile("c1"); res.RequeueAfter != cohortPoll {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, cohortPoll)
	}
	if !hasKey(e.node("n1").Spec.Taints, karpv1.TaintKeyUnregistered) || e.pod("web").Status.NominatedNodeName != "n1" {
		t.Fatalf("while c2 is on its way: node taints %v, pod nominated to %q; want closed, pod handed off", e.node("n1").Spec.Taints, e.pod("web").Status.NominatedNodeName)
	}
	e.now = e.now.Add(openTogether)
	e.reconcile("c1")
	if hasKey(e.node("n1").Spec.Taints, karpv1.TaintKeyUnregistered) {
		t.Error("still closed openTogether after the hand-off")
	}
}

// A registered node is initialized only once it is Ready without its startup taints; then the
// node is labelled initialized and the NodeClaim is Initialized and Ready.
func TestInitializationWaitsForStartupTaints(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0), b.StartupTaint("cni-not-ready")))
	nc := e.launch("c1")
	e.create(b.Node("n1", nc.Status.ProviderID, b.Ready(), b.Taint("cni-not-ready")))
	e.reconcile("c1")
	initialized := condition(e.claim("c1"), karpv1.ConditionTypeInitialized)
	if initialized.Status != metav1.ConditionUnknown || !strings.Contains(initialized.Message, "cni-not-ready") {
		t.Fatalf("Initialized %+v, want Unknown naming the startup taint", initialized)
	}
	node := e.node("n1")
	node.Spec.Taints = nil
	if err := e.c.Update(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	e.reconcile("c1")
	nc = e.claim("c1")
	if condition(nc, karpv1.ConditionTypeInitialized).Status != metav1.ConditionTrue || condition(nc, karpv1.ConditionTypeReady).Status != metav1.ConditionTrue {
		t.Errorf("conditions %+v, want Initialized and Ready", nc.Status.Conditions)
	}
	if e.node("n1").Labels[karpv1.LabelNodeInitialized] != "true" {
		t.Error("node not labelled initialized")
	}
}

// A node that is not Ready keeps its NodeClaim uninitialized and not Ready.
func TestInitializationWaitsForTheNodeToBeReady(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0)))
	nc := e.launch("c1")
	e.create(b.Node("n1", nc.Status.ProviderID))
	if res := e.reconcile("c1"); res.RequeueAfter != waitingForNode {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, waitingForNode)
	}
	nc = e.claim("c1")
	if c := condition(nc, karpv1.ConditionTypeInitialized); c.Status != metav1.ConditionUnknown || c.Message != "node is not Ready" {
		t.Errorf("Initialized %+v, want Unknown: node is not Ready", c)
	}
	if condition(nc, karpv1.ConditionTypeReady).Status == metav1.ConditionTrue || e.node("n1").Labels[karpv1.LabelNodeInitialized] != "" {
		t.Error("Ready, or the node labelled initialized, before the node is Ready")
	}
}
