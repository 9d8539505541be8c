package unimplemented

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ConditionType is the NodePool and EC2NodeClass condition that names the fields karpool does
// not act on. It is not one of Ready's dependents: the object works, without those fields, as
// the condition says; `karpool vet` and PoolSync refuse them before they get this far.
const ConditionType = "FieldsHonored"

// Condition is the FieldsHonored condition for an object of kind at generation gen.
func Condition(kind string, obj runtime.Object, gen int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Honored", ObservedGeneration: gen}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, "Unreadable", err.Error()
		return c
	}
	if gaps := In(kind, m); len(gaps) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NotImplemented", Message(gaps)
	}
	return c
}
