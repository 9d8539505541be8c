package nodeclaim

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// setCondition sets a NodeClaim condition, keeping lastTransitionTime when the status did not
// change (the same contract as meta.SetStatusCondition for metav1.Condition).
func setCondition(nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string, now metav1.Time) {
	for i := range nc.Status.Conditions {
		c := &nc.Status.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, message, nc.Generation
		return
	}
	nc.Status.Conditions = append(nc.Status.Conditions, karpv1.Condition{
		Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: nc.Generation, LastTransitionTime: now,
	})
}

// setReady derives Ready from the lifecycle conditions: True once launched, registered and
// initialized; otherwise False (or Unknown while waiting) naming the first step not done.
func setReady(nc *karpv1.NodeClaim, now metav1.Time) {
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		c := state.Condition(nc, t)
		if c == nil {
			setCondition(nc, karpv1.ConditionTypeReady, metav1.ConditionUnknown, "AwaitingReconciliation", t+" has not been evaluated", now)
			return
		}
		if c.Status != metav1.ConditionTrue {
			setCondition(nc, karpv1.ConditionTypeReady, c.Status, "Not"+t, t+": "+c.Message, now)
			return
		}
	}
	setCondition(nc, karpv1.ConditionTypeReady, metav1.ConditionTrue, "Ready", "", now)
}
