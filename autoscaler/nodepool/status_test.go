package nodepool

import (
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
