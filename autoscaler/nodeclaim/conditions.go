package nodeclaim

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// setReady derives Ready from the lifecycle conditions: True once launched, registered and
// initialized; otherwise False (or Unknown while waiting) naming the first step not done.
func setReady(nc *karpv1.NodeClaim, now metav1.Time) {
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		c := state.Condition(nc, t)
		if c == nil {
			nc.SetCondition(karpv1.ConditionTypeReady, metav1.ConditionUnknown, "AwaitingReconciliation", t+" has not been evaluated", now)
			return
		}
		if c.Status != metav1.ConditionTrue {
			nc.SetCondition(karpv1.ConditionTypeReady, c.Status, "Not"+t, t+": "+c.Message, now)
			return
		}
	}
	nc.SetCondition(karpv1.ConditionTypeReady, metav1.ConditionTrue, "Ready", "", now)
}
