package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SetCondition sets a status condition, keeping lastTransitionTime when the status did not
// change (the contract of meta.SetStatusCondition for metav1.Condition).
func (nc *NodeClaim) SetCondition(t string, status metav1.ConditionStatus, reason, message string, now metav1.Time) {
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
	nc.Status.Conditions = append(nc.Status.Conditions, Condition{
		Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: nc.Generation, LastTransitionTime: now,
	})
}
