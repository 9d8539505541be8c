package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// TestEmptyNodeRemoved is the workshop's scale-in: inflate 5 → 0 leaves its node empty; once
// the pool's consolidateAfter (1m) has passed, karpool deletes the NodeClaim, which drains
// nothing and terminates the instance in the simulator. Not before consolidateAfter.
func TestEmptyNodeRemoved(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("emptiness")
	h.workshopScaleOut(ns, 5)
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
	if waited := deletingAt.Sub(emptyAt); waited < 55*time.Second {
		t.Errorf("the node was removed %s after it became empty, before consolidateAfter (1m)", waited.Round(time.Second))
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
