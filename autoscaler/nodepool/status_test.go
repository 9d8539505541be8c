package nodepool

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// The RolledOut condition counts the nodes drifted, being replaced and up to date, and is True
// only when no drifted node is left, running or draining.
func TestRolloutCountsNodes(t *testing.T) {
	claim := func(drifted, deleting bool) karpv1.NodeClaim {
		var nc karpv1.NodeClaim
		if drifted {
			nc.Status.Conditions = []karpv1.Condition{{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue}}
		}
		if deleting {
			nc.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
		}
		return nc
	}
	for _, tc := range []struct {
		claims []karpv1.NodeClaim
		status metav1.ConditionStatus
		msg    string
	}{
		{[]karpv1.NodeClaim{claim(true, false), claim(true, true), claim(false, false)}, metav1.ConditionFalse,
			"rollout: 1 nodes drifted, 1 being replaced, 1 up to date"},
		{[]karpv1.NodeClaim{claim(true, true), claim(false, false)}, metav1.ConditionFalse,
			"rollout: 0 nodes drifted, 1 being replaced, 1 up to date"},
		{[]karpv1.NodeClaim{claim(false, true), claim(false, false), claim(false, false)}, metav1.ConditionTrue,
			"all 2 nodes are up to date"},
	} {
		got := rollout(tc.claims, 3)
		if got.Status != tc.status || got.Message != tc.msg || got.ObservedGeneration != 3 {
			t.Errorf("%s %q (generation %d), want %s %q", got.Status, got.Message, got.ObservedGeneration, tc.status, tc.msg)
		}
	}
}

// A static pool's FieldsHonored condition says its replicas are not kept while the
// StaticCapacity gate is off, and is True with the gate on; a dynamic pool is True either way.
func TestHonoredStaticPool(t *testing.T) {
	np := &karpv1.NodePool{}
	for _, on := range []bool{false, true} {
		if c := honored(np, 1, on); c.Status != metav1.ConditionTrue {
			t.Errorf("dynamic pool, gate %t: %+v", on, c)
		}
	}
	three := int64(3)
	np.Spec.Replicas = &three
	if c := honored(np, 2, false); c.Status != metav1.ConditionFalse || c.Reason != "FeatureGateOff" || c.ObservedGeneration != 2 {
		t.Errorf("static pool, gate off: %+v, want False FeatureGateOff", c)
	}
	if c := honored(np, 2, true); c.Status != metav1.ConditionTrue {
		t.Errorf("static pool, gate on: %+v, want True", c)
	}
	np.Spec.Disruption.ConsolidationPolicy = "Balanced"
	if c := honored(np, 2, false); c.Status != metav1.ConditionFalse || strings.Contains(c.Message, "Balanced") || !strings.Contains(c.Message, "StaticCapacity") {
		t.Errorf("static Balanced pool, gate off: %+v, want only the gate said (Balanced is implemented)", c)
	}
}
