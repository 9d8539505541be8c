package nodeoverlay

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	"github.com/karpool/karpool/autoscaler/overlay"
	"github.com/karpool/karpool/internal/unimplemented"
)

// TestConditionsFollowTheVerdict: what each verdict writes into an overlay's
// status, as Karpenter's ValidationSucceeded/Ready, plus FieldsHonored for resources the
// engine does not model.
func TestConditionsFollowTheVerdict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		verdict   overlay.Verdict
		validated metav1.ConditionStatus
		reason    string
		honored   metav1.ConditionStatus
	}{
		{"applied", overlay.Verdict{Name: "o"}, metav1.ConditionTrue, "ValidationSucceeded", metav1.ConditionTrue},
		{"conflict", overlay.Verdict{Name: "o", Reason: overlay.ReasonConflict, Message: "NodeOverlay \"p\" of the same weight"}, metav1.ConditionFalse, "Conflict", metav1.ConditionTrue},
		{"invalid", overlay.Verdict{Name: "o", Reason: overlay.ReasonInvalid, Message: "spec.price"}, metav1.ConditionFalse, "RuntimeValidation", metav1.ConditionTrue},
		{"unmodelled", overlay.Verdict{Name: "o", Unmodelled: []string{"smarter-devices/fuse"}}, metav1.ConditionTrue, "ValidationSucceeded", metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "o", Generation: 3}}
			conditions(o, tc.verdict)
			v := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionValidationSucceeded)
			r := meta.FindStatusCondition(o.Status.Conditions, karpv1.ConditionTypeReady)
			if v == nil || r == nil || v.Status != tc.validated || v.Reason != tc.reason || r.Status != tc.validated || v.ObservedGeneration != 3 {
				t.Fatalf("ValidationSucceeded %+v, Ready %+v; want %s/%s", v, r, tc.validated, tc.reason)
			}
			if tc.verdict.Message != "" && v.Message != tc.verdict.Message {
				t.Errorf("message %q, want the verdict's", v.Message)
			}
			h := meta.FindStatusCondition(o.Status.Conditions, unimplemented.ConditionType)
			switch {
			case h == nil || h.Status != tc.honored:
				t.Errorf("FieldsHonored %+v, want %s", h, tc.honored)
			case tc.honored == metav1.ConditionFalse && !strings.Contains(h.Message, "smarter-devices/fuse"):
				t.Errorf("FieldsHonored message %q does not name the resource", h.Message)
			}
		})
	}
}
