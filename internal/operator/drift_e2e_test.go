package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/nodepool"
	"github.com/karpool/karpool/autoscaler/state"
)

// TestTemplateChangeRollsOut: a label added to the NodePool's template drifts both of its
// nodes; they are replaced one at a time (budget 1), the new nodes carry the label, the pods
// keep running, and the pool's RolledOut condition reports the rollout until it is done.
func TestTemplateChangeRollsOut(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("drift")
	old := h.twoNodesBudgetOne(ns)
	h.updatePool(func(np *karpv1.NodePool) { np.Spec.Template.Labels["team"] = "a" })
	r := h.rollout(old, func(nc *karpv1.NodeClaim) bool { return nc.Labels["team"] == "a" })
	h.runningPods(ns, "inflate", 6, time.Minute)
	r.check(t, "NodePoolDrifted")
}

// TestAMIChangeRollsOut: the EC2NodeClass pinned to an older AMI release (the selector terms
// are not part of the class's hash) drifts both nodes through the cloud check (AMIDrift); they
// are replaced one at a time by instances of the older AMI.
func TestAMIChangeRollsOut(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("amidrift")
	old := h.twoNodesBudgetOne(ns)
	images := map[string]bool{}
	for _, nc := range h.nodeClaims() {
		images[nc.Status.ImageID] = true
	}
	h.eventually("EC2NodeClass default pinned to al2023@v20261001", time.Minute, func() error {
		var class awsv1.EC2NodeClass
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, &class); err != nil {
			return err
		}
		class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20261001"}}
		return h.c.Update(h.ctx, &class)
	})
	r := h.rollout(old, func(nc *karpv1.NodeClaim) bool { return nc.Status.ImageID != "" && !images[nc.Status.ImageID] })
	h.runningPods(ns, "inflate", 6, time.Minute)
	r.check(t, "AMIDrift")
}

// TestBudgetWindowHoldsRollout: a budget of zero nodes whose cron window is active holds a
// drifted pool's rollout: while the window lasts both nodes are seen drifted, and none is tainted
// or deleted; once it ends they are replaced one at a time (the other budget: 1).
func TestBudgetWindowHoldsRollout(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("window")
	old := h.twoNodesBudgetOne(ns)
	opened := time.Now().UTC().Truncate(time.Minute)
	closes := opened.Add(2 * time.Minute)
	h.updatePool(func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}, {Nodes: "0",
			Schedule: ptr.To(fmt.Sprintf("%d %d * * *", opened.Minute(), opened.Hour())),
			Duration: &metav1.Duration{Duration: 2 * time.Minute}}}
		np.Spec.Template.Labels["team"] = "b"
	})
	drifted := h.heldUntil(old, closes.Add(-5*time.Second))
	if drifted < len(old) {
		t.Fatalf("only %d of the %d old NodeClaims were seen drifted while the window held them", drifted, len(old))
	}
	r := h.rollout(old, func(nc *karpv1.NodeClaim) bool { return nc.Labels["team"] == "b" })
	h.runningPods(ns, "inflate", 6, time.Minute)
	r.check(t, "NodePoolDrifted")
}

// heldUntil watches, until the given time, that none of the old NodeClaims is deleted and no
// node carries the disrupted taint, and returns how many of them were seen Drifted at once.
func (h *harness) heldUntil(old map[string]bool, until time.Time) int {
	h.t.Helper()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	most := 0
	for time.Now().Before(until) {
		drifted := 0
		for _, nc := range h.nodeClaims() {
			if !old[nc.Name] {
				h.t.Fatalf("NodeClaim %s created while the budget window allows no disruption", nc.Name)
			}
			if nc.DeletionTimestamp != nil {
				h.t.Fatalf("NodeClaim %s deleted while the budget window allows no disruption", nc.Name)
			}
			if state.IsTrue(&nc, karpv1.ConditionTypeDrifted) {
				drifted++
			}
		}
		for _, n := range h.karpenterNodes() {
			for _, taint := range n.Spec.Taints {
				if taint.Key == karpv1.TaintKeyDisrupted {
					h.t.Fatalf("node %s tainted %s while the budget window allows no disruption", n.Name, taint.Key)
				}
			}
		}
		most = max(most, drifted)
		select {
		case <-h.ctx.Done():
			h.t.Fatal(h.ctx.Err())
		case <-tick.C:
		}
	}
	return most
}

// twoNodesBudgetOne runs six inflate pods in ns on two c5.large nodes of the workshop pool,
// whose disruption budget is one node, and returns the two NodeClaims' names.
func (h *harness) twoNodesBudgetOne(ns string) map[string]bool {
	h.t.Helper()
	h.workshopPools()
	h.updatePool(func(np *karpv1.NodePool) {
		setValues(np, corev1.LabelInstanceTypeStable, "c5.large") // three inflate pods per node
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	})
	h.inflate(ns, 6)
	h.runningPods(ns, "inflate", 6, 3*time.Minute)
	old := map[string]bool{}
	for _, nc := range h.nodeClaims() {
		old[nc.Name] = true
	}
	if len(old) != 2 {
		h.t.Fatalf("%d NodeClaims for 6 pods on c5.large, want 2", len(old))
	}
	return old
}

// rolledOut is what a rollout looked like, sampled at each poll (every few hundred
// milliseconds; a deletion lasts seconds).
type rolledOut struct {
	mostDeleting  int
	sawRollingOut bool
	reasons       map[string]bool // of the old NodeClaims' Drifted conditions
}

// rollout waits until every old NodeClaim is gone, every NodeClaim is fresh and the pool's
// RolledOut condition is True.
func (h *harness) rollout(old map[string]bool, fresh func(*karpv1.NodeClaim) bool) rolledOut {
	h.t.Helper()
	r := rolledOut{reasons: map[string]bool{}}
	h.eventually("every node replaced by a fresh one", 4*time.Minute, func() error {
		claims := h.nodeClaims()
		deleting, current := 0, 0
		for i := range claims {
			nc := &claims[i]
			if old[nc.Name] && nc.DeletionTimestamp != nil {
				deleting++
			}
			if cond := state.Condition(nc, karpv1.ConditionTypeDrifted); old[nc.Name] && cond != nil && cond.Status == metav1.ConditionTrue {
				r.reasons[cond.Reason] = true
			}
			if !old[nc.Name] && fresh(nc) {
				current++
			}
		}
		var np karpv1.NodePool
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, &np); err != nil {
			return err
		}
		rolled := meta.FindStatusCondition(np.Status.Conditions, nodepool.ConditionTypeRolledOut)
		r.mostDeleting = max(r.mostDeleting, deleting)
		r.sawRollingOut = r.sawRollingOut || rolled != nil && rolled.Status == metav1.ConditionFalse
		for _, nc := range claims {
			if old[nc.Name] {
				return fmt.Errorf("old NodeClaim %s still there (%d deleting)", nc.Name, deleting)
			}
		}
		if current != len(claims) || rolled == nil || rolled.Status != metav1.ConditionTrue {
			return fmt.Errorf("%d of %d NodeClaims are fresh; RolledOut %+v", current, len(claims), rolled)
		}
		return nil
	})
	return r
}

// check: never more than the budget (1) deleting at once, the pool said it was rolling out,
// and the old nodes drifted for the reason given.
func (r rolledOut) check(t *testing.T, reason string) {
	t.Helper()
	if r.mostDeleting > 1 {
		t.Errorf("%d old NodeClaims were being deleted at once; the budget allows 1", r.mostDeleting)
	}
	if !r.sawRollingOut {
		t.Error("the NodePool's RolledOut condition was never False during the rollout")
	}
	if !r.reasons[reason] || len(r.reasons) != 1 {
		t.Errorf("the old NodeClaims drifted for %v, want %s only", r.reasons, reason)
	}
}

// updatePool changes the workshop NodePool, retrying when the controller wrote it meanwhile.
func (h *harness) updatePool(change func(*karpv1.NodePool)) {
	h.t.Helper()
	h.eventually("NodePool default updated", time.Minute, func() error {
		var np karpv1.NodePool
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, &np); err != nil {
			return err
		}
		change(&np)
		return h.c.Update(h.ctx, &np)
	})
}

// setValues sets the values of the template's requirement on key.
func setValues(np *karpv1.NodePool, key string, values ...string) {
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key {
			np.Spec.Template.Spec.Requirements[i].Values = values
		}
	}
}
