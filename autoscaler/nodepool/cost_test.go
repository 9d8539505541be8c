package nodepool

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// The CostWithinLimit condition counts launched NodeClaims at their offering and the others at
// their dearest option, turns False past the limit, says why an unreadable limit blocks the
// pool, and goes away with the annotation.
func TestCostCondition(t *testing.T) {
	its := []catalog.InstanceType{
		{Name: "m5.large", Offerings: []catalog.Offering{{Zone: "a", CapacityType: "spot", PricePerHour: 0.04}, {Zone: "a", CapacityType: "on-demand", PricePerHour: 0.10}}},
		{Name: "m5.xlarge", Offerings: []catalog.Offering{{Zone: "a", CapacityType: "on-demand", PricePerHour: 0.20}}},
	}
	launched := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		catalog.LabelInstanceType: "m5.large", catalog.LabelZone: "a", catalog.LabelCapacityType: "spot"}}}
	launched.Status.ProviderID = "aws:///a/i-1"
	launching := karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}}}}}
	claims := []karpv1.NodeClaim{launched, launching}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{karpoolv1alpha1.AnnotationLimitPerHour: "0.30"}}}

	cases := []struct {
		limit  string
		its    []catalog.InstanceType
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"0.30", its, metav1.ConditionTrue, "WithinLimit", "$0.2400/h of the $0.3000/h limit (karpool.dev/limit-per-hour): $0.0400/h launched, up to $0.2000/h launching"},
		{"$0.20/h", its, metav1.ConditionFalse, "LimitExceeded", "$0.2400/h of the $0.2000/h limit"},
		{"0.30", nil, metav1.ConditionUnknown, "PricesUnknown", "not known yet"},
		{"thirty", its, metav1.ConditionFalse, "InvalidLimit", "launches nothing"},
	}
	for _, tc := range cases {
		np.Annotations[karpoolv1alpha1.AnnotationLimitPerHour] = tc.limit
		setCostCondition(np, tc.its, claims, 4)
		c := meta.FindStatusCondition(np.Status.Conditions, ConditionTypeCostWithinLimit)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) || c.ObservedGeneration != 4 {
			t.Errorf("limit %q: %+v, want %s %s %q", tc.limit, c, tc.status, tc.reason, tc.msg)
		}
	}
	if reason := validation(np, 4); !strings.Contains(reason, karpoolv1alpha1.AnnotationLimitPerHour) {
		t.Errorf("an unreadable limit passes validation: %q", reason)
	}
	delete(np.Annotations, karpoolv1alpha1.AnnotationLimitPerHour)
	setCostCondition(np, its, claims, 5)
	if c := meta.FindStatusCondition(np.Status.Conditions, ConditionTypeCostWithinLimit); c != nil {
		t.Errorf("condition kept without a limit: %+v", c)
	}
	if reason := validation(np, 5); reason != "" {
		t.Errorf("a pool without a limit is invalid: %q", reason)
	}
}
