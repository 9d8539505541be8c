package nodeclaim

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	b "github.com/karpool/karpool/testbed/builders"
	"github.com/karpool/karpool/testbed/fakecloud"
)

const providerID = "fake:///zone-a/i-1"

// drainedNode is node n1 as registration leaves it.
func drainedNode() *corev1.Node {
	n := b.Node("n1", providerID, b.Ready())
	n.Finalizers = []string{karpv1.TerminationFinalizer}
	return n
}

// newTermination stores NodeClaim c1, launched as providerID, registered as node n1 and
// deleted at t0, with its node, its instance and the objects.
func newTermination(t *testing.T, funcs *interceptor.Funcs, opts []b.ClaimOption, objs ...client.Object) *env {
	nc := b.NodeClaim("c1", append([]b.ClaimOption{b.CreatedAt(t0), b.Launched(providerID, t0), b.Registered("n1", t0), b.DeletingSince(t0)}, opts...)...)
	e := newEnv(t, funcs, append(objs, nc, drainedNode())...)
	e.cloud.AddInstance(nc)
	return e
}

// A deleted NodeClaim's node is cordoned and its pods evicted before the instance is
// terminated: the cloud is not asked while pods remain.
func TestTerminationDrainsBeforeTerminating(t *testing.T) {
	e := newTermination(t, nil, nil, b.Pod("web", b.OnNode("n1")))
	if res := e.reconcile("c1"); res.RequeueAfter != drainPoll {
		t.Errorf("requeue after %s, want %s while draining", res.RequeueAfter, drainPoll)
	}
	node := e.node("n1")
	if !node.Spec.Unschedulable || !hasKey(node.Spec.Taints, karpv1.TaintKeyDisrupted) {
		t.Errorf("node unschedulable %v, taints %v; want cordoned and tainted disrupted", node.Spec.Unschedulable, node.Spec.Taints)
	}
	if e.pod("web") != nil {
		t.Error("pod web not evicted")
	}
	if n := len(e.cloud.DeleteCalls()); n != 0 {
		t.Errorf("instance terminated (%d calls) while a pod was still on the node", n)
	}
}

// Once the node is drained the instance is terminated, the node's and the NodeClaim's
// finalizers go, the node is deleted and the provisioner is told capacity went.
func TestTerminationReleasesFinalizersOnceTheInstanceIsGone(t *testing.T) {
	e := newTermination(t, nil, nil)
	e.reconcile("c1")
	if calls := e.cloud.DeleteCalls(); len(calls) != 1 || calls[0].Status.ProviderID != providerID {
		t.Errorf("Delete calls %d, want one for %s", len(calls), providerID)
	}
	if e.claim("c1") != nil || e.node("n1") != nil {
		t.Error("the NodeClaim or its node is still there")
	}
	if e.capacityGone != 1 {
		t.Errorf("capacity gone %d times, want once", e.capacityGone)
	}
}

// DaemonSet, static and finished pods are not evicted and do not hold the termination up.
func TestTerminationLeavesPodsThatDoNotMove(t *testing.T) {
	mirror := b.Pod("static", b.OnNode("n1"), b.PodAnnotation(corev1.MirrorPodAnnotationKey, "x"))
	e := newTermination(t, nil, nil, b.Pod("agent", b.OnNode("n1"), b.OwnedByDaemonSet()), mirror,
		b.Pod("job", b.OnNode("n1"), b.Phase(corev1.PodSucceeded)))
	e.reconcile("c1")
	if len(e.cloud.DeleteCalls()) != 1 || e.claim("c1") != nil {
		t.Error("termination waited for pods that do not move")
	}
}

// Termination is asynchronous: the NodeClaim keeps its finalizer until the cloud no longer
// finds the instance, so its capacity is never counted twice.
func TestTerminationWaitsForTheInstanceToGo(t *testing.T) {
	e := newTermination(t, nil, nil)
	e.cloud.AsyncTermination()
	if res := e.reconcile("c1"); res.RequeueAfter != drainPoll {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, drainPoll)
	}
	if nc := e.claim("c1"); nc == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		t.Fatal("finalizer released while the instance is still terminating")
	}
	e.cloud.FinishTerminations()
	e.reconcile("c1")
	if e.claim("c1") != nil {
		t.Error("NodeClaim kept after its instance terminated")
	}
}

// An instance that is already gone (terminated by hand, or by an earlier attempt) does not
// keep the finalizer.
func TestTerminationOfAnInstanceAlreadyGone(t *testing.T) {
	e := newTermination(t, nil, nil)
	e.cloud.RemoveInstance(providerID)
	e.reconcile("c1")
	if e.claim("c1") != nil {
		t.Error("NodeClaim kept although its instance is gone")
	}
}

// A failed termination keeps the finalizers (the instance may still run) and is retried.
func TestTerminationFailureKeepsTheFinalizer(t *testing.T) {
	e := newTermination(t, nil, nil)
	e.cloud.FailNext(fakecloud.Delete, errors.New("RequestLimitExceeded"))
	_, err := e.l.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "c1"}})
	if err == nil {
		t.Error("no error from a failed termination")
	}
	if e.claim("c1") == nil || !controllerutil.ContainsFinalizer(e.node("n1"), karpv1.TerminationFinalizer) {
		t.Fatal("finalizers released although the instance was not terminated")
	}
	e.reconcile("c1")
	if e.claim("c1") != nil {
		t.Error("the retry did not finish the termination")
	}
}

// A NodeClaim deleted before its launch (no capacity, say) has no instance: the cloud is not
// asked and the finalizer goes at once.
func TestTerminationOfAnUnlaunchedClaimSkipsTheCloud(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0), b.DeletingSince(t0)))
	e.reconcile("c1")
	if n := len(e.cloud.DeleteCalls()) + len(e.cloud.GetCalls()); n != 0 {
		t.Errorf("%d cloud calls for a NodeClaim without an instance", n)
	}
	if e.claim("c1") != nil {
		t.Error("finalizer of an unlaunched NodeClaim kept")
	}
}

// Pods that may not be evicted (a PodDisruptionBudget answers 429) stay until the NodeClaim's
// terminationGracePeriod has passed since its deletion; then they are deleted.
func TestTerminationGracePeriodForcesTheDrain(t *testing.T) {
	refuse := &interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
		if sub == "eviction" {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
	}}
	e := newTermination(t, refuse, []b.ClaimOption{b.TerminationGracePeriod(time.Minute)}, b.Pod("db", b.OnNode("n1")))
	e.now = t0.Add(59 * time.Second)
	e.reconcile("c1")
	if e.pod("db") == nil {
		t.Fatal("pod deleted before the termination grace period passed")
	}
	e.now = t0.Add(61 * time.Second)
	e.reconcile("c1")
	if e.pod("db") != nil {
		t.Error("pod kept after the termination grace period")
	}
}

// As in Karpenter, a do-not-disrupt pod is not evicted: the drain waits for it until the
// terminationGracePeriod, which deletes it. A pod that tolerates the disrupted taint is neither
// evicted nor waited for.
func TestTerminationWaitsForDoNotDisruptPods(t *testing.T) {
	tolerant := b.Pod("tolerant", b.OnNode("n1"))
	tolerant.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	e := newTermination(t, nil, []b.ClaimOption{b.TerminationGracePeriod(time.Minute)},
		b.Pod("cache", b.OnNode("n1"), b.PodAnnotation(karpv1.AnnotationDoNotDisrupt, "true")), tolerant)
	e.now = t0.Add(30 * time.Second)
	e.reconcile("c1")
	if e.pod("cache") == nil {
		t.Fatal("the do-not-disrupt pod was evicted")
	}
	if n := len(e.cloud.DeleteCalls()); n != 0 {
		t.Fatalf("instance terminated (%d calls) while the do-not-disrupt pod runs", n)
	}
	e.now = t0.Add(61 * time.Second)
	e.reconcile("c1")
	if e.pod("cache") != nil {
		t.Error("the do-not-disrupt pod kept after the termination grace period")
	}
	e.reconcile("c1")
	if e.pod("tolerant") == nil || len(e.cloud.DeleteCalls()) != 1 {
		t.Errorf("tolerant pod there: %v, Delete calls %d; want it left and the instance terminated", e.pod("tolerant") != nil, len(e.cloud.DeleteCalls()))
	}
}

// A Node deleted directly (kubectl delete node) deletes its NodeClaim, whose finalizer does
// the rest; a Node without a NodeClaim is released at once.
func TestNodeDeletionDeletesItsClaim(t *testing.T) {
	claimed := drainedNode()
	orphan := b.Node("n2", "fake:///zone-a/i-2")
	orphan.Finalizers = []string{karpv1.TerminationFinalizer}
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0), b.Launched(providerID, t0), b.WithFinalizer()), claimed, orphan)
	nt := NewNodeTermination(e.c)
	for _, name := range []string{"n1", "n2"} {
		if err := e.c.Delete(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
		if _, err := nt.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if nc := e.claim("c1"); nc == nil || nc.DeletionTimestamp == nil {
		t.Errorf("NodeClaim %+v, want it being deleted with its node", nc)
	}
	if e.node("n2") != nil {
		t.Error("a node without a NodeClaim kept its finalizer")
	}
}
