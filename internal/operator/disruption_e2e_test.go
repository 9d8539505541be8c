package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// TestEmptyNodeRemoved is the workshop's scale-in: inflate 5 → 0 leaves its node empty; once
// the pool's consolidateAfter has passed (20s here; the workshop's 1m would only make the test
// longer), karpool deletes the NodeClaim, which drains nothing and terminates the instance in
// the simulator. Not before consolidateAfter.
func TestEmptyNodeRemoved(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("emptiness")
	h.workshopScaleOut(ns, 5)
	h.consolidateAfter(20 * time.Second)
	claims := h.nodeClaims()
	if len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(claims))
	}
	claim := claims[0]

	h.scale(ns, "inflate", 0)
	h.eventually("inflate's pods gone", time.Minute, func() error {
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	emptyAt := time.Now()
	var deletingAt time.Time
	h.eventually("the empty node's NodeClaim and instance gone", 3*time.Minute, func() error {
		var nc karpv1.NodeClaim
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(&claim), &nc)
		if deletingAt.IsZero() && (apierrors.IsNotFound(err) || (err == nil && nc.DeletionTimestamp != nil)) {
			deletingAt = time.Now()
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeClaim %s still there (%v)", claim.Name, err)
		}
		if n := h.liveInstances(); n != 0 {
			return fmt.Errorf("%d live instances", n)
		}
		return nil
	})
	// The deletion is seen within a poll of happening; emptiness is seen within a poll too.
	if waited := deletingAt.Sub(emptyAt); waited < 18*time.Second {
		t.Errorf("the node was removed %s after it became empty, before consolidateAfter (20s)", waited.Round(time.Second))
	}
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.MatchingFields{"involvedObject.name": claim.Name}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || e.Reason == "DisruptionTerminating"
	}
	if !found {
		t.Errorf("no DisruptionTerminating event on NodeClaim %s", claim.Name)
	}
}

// Seed 003 scaled to 10 and back to 3 (consolidateAfter 20s): the node the 10 pods needed is
// underused, and a cheaper one takes the 3 pods. The replacement is launched and initialized before the old node is
// drained, so the pods are never without a node to go to.
func TestUnderusedNodeReplaced(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("consolidation")
	h.workshopScaleOut(ns, 10)
	h.consolidateAfter(20 * time.Second)
	claims := h.nodeClaims()
	old := map[string]bool{}
	for _, nc := range claims {
		old[nc.Name] = true
	}
	h.scale(ns, "inflate", 3)
	var replacement karpv1.NodeClaim
	h.eventually("the scale-out's nodes replaced by one c5.large", 5*time.Minute, func() error {
		claims := h.nodeClaims()
		if len(claims) != 1 || old[claims[0].Name] {
			return fmt.Errorf("%d NodeClaims (%d at the start)", len(claims), len(old))
		}
		replacement = claims[0]
		if it := replacement.Labels[corev1.LabelInstanceTypeStable]; it != "c5.large" {
			return fmt.Errorf("NodeClaim %s is a %s", replacement.Name, it)
		}
		if n := h.liveInstances(); n != 1 {
			return fmt.Errorf("%d live instances", n)
		}
		return nil
	})
	for _, p := range h.runningPods(ns, "inflate", 3, time.Minute) {
		if p.Spec.NodeName != replacement.Status.NodeName {
			t.Errorf("pod %s runs on %s, not on the replacement's node %s", p.Name, p.Spec.NodeName, replacement.Status.NodeName)
		}
	}
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.MatchingFields{"reason": "DisruptionTerminating"}); err != nil {
		t.Fatal(err)
	}
	replaced := 0
	for _, e := range events.Items {
		if old[e.InvolvedObject.Name] && e.InvolvedObject.Kind == "NodeClaim" && strings.Contains(e.Message, "Underutilized/") {
			replaced++
		}
	}
	if replaced != len(old) {
		t.Errorf("%d of the %d old NodeClaims have an Underutilized DisruptionTerminating event", replaced, len(old))
	}
}

// consolidateAfter sets the default pool's consolidateAfter (part of spec.disruption, not of
// the template: no drift).
func (h *harness) consolidateAfter(d time.Duration) {
	h.t.Helper()
	h.updatePool(func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidateAfter.Duration = &d })
}
