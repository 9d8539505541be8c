package nodeclaim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	b "github.com/karpool/karpool/testbed/builders"
)

// The cases follow Karpenter's node health suite (pkg/controllers/node/health), with the
// fake cloud's one policy: Ready False for 30 minutes.

// poolNode is node i of a pool, with its NodeClaim; unhealthyFor > 0 gives it Ready=False
// since that long before t0.
func poolNode(pool string, i int, unhealthyFor time.Duration) (*corev1.Node, *karpv1.NodeClaim) {
	name, id := fmt.Sprintf("%s-%d", pool, i), fmt.Sprintf("fake:///%s-%d", pool, i)
	n := b.Node(name, id)
	n.Labels[karpv1.LabelNodePool] = pool
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	if unhealthyFor > 0 {
		cond = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-unhealthyFor))}
	}
	n.Status.Conditions = []corev1.NodeCondition{cond}
	nc := b.NodeClaim("claim-"+name, b.Launched(id, t0.Add(-time.Hour)), b.Registered(name, t0.Add(-time.Hour)), b.WithFinalizer())
	nc.Labels[karpv1.LabelNodePool] = pool
	return n, nc
}

// repairEnv stores the nodes and claims and returns the repair reconciler at t0.
func repairEnv(t *testing.T, objs ...client.Object) (*env, *Repair) {
	e := newEnv(t, nil, objs...)
	r := NewRepair(e.c, e.cloud.RepairPolicies(), e.rec, nil)
	r.now = func() time.Time { return e.now }
	return e, r
}

func repairOnce(t *testing.T, r *Repair, node string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRepairReplacesANodeUnhealthyPastItsToleration(t *testing.T) {
	n, nc := poolNode("default", 0, 31*time.Minute)
	h1, c1 := poolNode("default", 1, 0)
	h2, c2 := poolNode("default", 2, 0)
	e, r := repairEnv(t, n, nc, h1, c1, h2, c2)
	repairOnce(t, r, n.Name)
	got := e.claim(nc.Name)
	if got == nil || got.DeletionTimestamp == nil {
		t.Fatalf("the unhealthy node's NodeClaim is not being deleted: %+v", got)
	}
	at, err := time.Parse(time.RFC3339, got.Annotations[karpv1.AnnotationTerminationTimestamp])
	if err != nil || !at.Equal(t0) {
		t.Errorf("termination timestamp %q, want now (%s): the drain must not wait for evictions", got.Annotations[karpv1.AnnotationTerminationTimestamp], t0)
	}
	if !drainDeadlinePassed(got, e.now) {
		t.Error("the drain of a repaired node still waits for evictions")
	}
	if ev := e.events(); !strings.Contains(ev, "NodeRepair") {
		t.Errorf("events %q: want a NodeRepair event", ev)
	}
}

func TestRepairWaitsOutTheToleration(t *testing.T) {
	n, nc := poolNode("default", 0, 20*time.Minute)
	e, r := repairEnv(t, n, nc)
	if res := repairOnce(t, r, n.Name); res.RequeueAfter != 10*time.Minute {
		t.Errorf("requeue after %v, want the 10 minutes left of the 30-minute toleration", res.RequeueAfter)
	}
	if got := e.claim(nc.Name); got.DeletionTimestamp != nil {
		t.Error("a node unhealthy for 20 minutes was replaced before its 30-minute toleration")
	}
}

func TestRepairLeavesHealthyAndUnmatchedNodes(t *testing.T) {
	healthy, c1 := poolNode("default", 0, 0)
	unknown, c2 := poolNode("default", 1, 0)
	unknown.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Hour))}
	e, r := repairEnv(t, healthy, c1, unknown, c2)
	for _, n := range []string{healthy.Name, unknown.Name} {
		if res := repairOnce(t, r, n); res.RequeueAfter != 0 {
			t.Errorf("%s: requeue after %v, want none", n, res.RequeueAfter)
		}
	}
	for _, c := range []string{c1.Name, c2.Name} {
		if e.claim(c).DeletionTimestamp != nil {
			t.Errorf("%s deleted: no policy of this cloud matches its node", c)
		}
	}
}

func TestRepairHoldsAtTwentyPercentOfThePool(t *testing.T) {
	// Five nodes may have one unhealthy (20 %); with two, neither is replaced. Nodes of
	// another pool do not count.
	var objs []client.Object
	for i := range 5 {
		sick := 0 * time.Minute
		if i < 2 {
			sick = time.Hour
		}
		n, nc := poolNode("default", i, sick)
		objs = append(objs, n, nc)
	}
	for i := range 10 {
		n, nc := poolNode("other", i, 0)
		objs = append(objs, n, nc)
	}
	e, r := repairEnv(t, objs...)
	if res := repairOnce(t, r, "default-0"); res.RequeueAfter != repairBlockedRecheck {
		t.Errorf("requeue after %v, want %v", res.RequeueAfter, repairBlockedRecheck)
	}
	if e.claim("claim-default-0").DeletionTimestamp != nil {
		t.Fatal("a node was replaced with 2 of 5 nodes of its pool unhealthy")
	}
	if ev := e.events(); !strings.Contains(ev, "NodeRepairBlocked") || !strings.Contains(ev, `2 of the 5 nodes of NodePool "default" are unhealthy`) {
		t.Errorf("events %q: want NodeRepairBlocked naming the count", ev)
	}

	// One of them recovers: the other is replaced.
	n := e.node("default-1")
	n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	if err := e.c.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	repairOnce(t, r, "default-0")
	if e.claim("claim-default-0").DeletionTimestamp == nil {
		t.Error("with 1 of 5 nodes unhealthy the node was not replaced")
	}
}

func TestAllowedUnhealthyRoundsUp(t *testing.T) {
	for total, want := range map[int]int{0: 0, 1: 1, 3: 1, 5: 1, 6: 2, 10: 2, 11: 3, 100: 20} {
		if got := AllowedUnhealthy(total); got != want {
			t.Errorf("AllowedUnhealthy(%d) = %d, want %d", total, got, want)
		}
	}
}

func TestUnhealthyTakesTheEarliestDeadline(t *testing.T) {
	policies := []cloud.RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
	}
	n := b.Node("n", "fake:///n")
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
		{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(5 * time.Minute))},
	}
	c, at := Unhealthy(n, policies)
	if c == nil || c.Type != "AcceleratedHardwareReady" || !at.Equal(t0.Add(15*time.Minute)) {
		t.Errorf("Unhealthy = %+v at %s, want AcceleratedHardwareReady at t0+15m", c, at)
	}
}
