package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/nodepool"
)

// TestTemplateChangeRollsOut: a label added to the NodePool's template drifts both of its
// nodes; they are replaced one at a time (budget 1), the new nodes carry the label, the pods
// keep running, and the pool's RolledOut condition reports the rollout until it is done.
func TestTemplateChangeRollsOut(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("drift")
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
		t.Fatalf("%d NodeClaims for 6 pods on c5.large, want 2", len(old))
	}

	// Sampled at each poll (every few hundred milliseconds): a deletion lasts seconds.
	mostDeleting, sawRollingOut := 0, false
	h.updatePool(func(np *karpv1.NodePool) { np.Spec.Template.Labels["team"] = "a" })
	h.eventually("both nodes replaced by nodes with the new label", 4*time.Minute, func() error {
		claims := h.nodeClaims()
		deleting, fresh := 0, 0
		for _, nc := range claims {
			if old[nc.Name] && nc.DeletionTimestamp != nil {
				deleting++
			}
			if !old[nc.Name] && nc.Labels["team"] == "a" {
				fresh++
			}
		}
		var np karpv1.NodePool
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, &np); err != nil {
			return err
		}
		rolled := meta.FindStatusCondition(np.Status.Conditions, nodepool.ConditionTypeRolledOut)
		mostDeleting = max(mostDeleting, deleting)
		sawRollingOut = sawRollingOut || rolled != nil && rolled.Status == metav1.ConditionFalse
		for _, nc := range claims {
			if old[nc.Name] {
				return fmt.Errorf("old NodeClaim %s still there (%d deleting)", nc.Name, deleting)
			}
		}
		if fresh != len(claims) || rolled == nil || rolled.Status != metav1.ConditionTrue {
			return fmt.Errorf("%d of %d NodeClaims carry team=a; RolledOut %+v", fresh, len(claims), rolled)
		}
		return nil
	})
	h.runningPods(ns, "inflate", 6, time.Minute)
	if mostDeleting > 1 {
		t.Errorf("%d old NodeClaims were being deleted at once; the budget allows 1", mostDeleting)
	}
	if !sawRollingOut {
		t.Error("the NodePool's RolledOut condition was never False during the rollout")
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
