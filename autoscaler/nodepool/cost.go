package nodepool

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/state"
)

// ConditionTypeCostWithinLimit is karpool's NodePool condition for its cost limit
// (karpool.dev/limit-per-hour): what the pool's NodeClaims cost against the limit. Absent on a
// pool without one.
const ConditionTypeCostWithinLimit = "CostWithinLimit"

// claimsCost is what the pool's NodeClaims count against its cost limit, as the engine counts
// them: spend, the launched ones at their offering's price (until they are gone, draining ones
// included: they are billed); launching, the others at the dearest offering of the types they
// may become.
func claimsCost(its []catalog.InstanceType, claims []karpv1.NodeClaim) (spend, launching float64) {
	for i := range claims {
		nc := &claims[i]
		if price, ok := catalog.PriceOf(its, nc.Labels); ok && state.Launched(nc) {
			spend += price
			continue
		}
		launching += dearestOption(its, nc)
	}
	return spend, launching
}

// dearestOption is the dearest offering among the instance types a NodeClaim may become.
func dearestOption(its []catalog.InstanceType, nc *karpv1.NodeClaim) float64 {
	worst := 0.0
	for _, r := range nc.Spec.Requirements {
		if r.Key != corev1.LabelInstanceTypeStable || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for i := range its {
			if !slices.Contains(r.Values, its[i].Name) {
				continue
			}
			for _, o := range its[i].Offerings {
				worst = max(worst, o.PricePerHour)
			}
		}
	}
	return worst
}

// limitPerHour reads the pool's cost limit; false without one.
func limitPerHour(np *karpv1.NodePool) (float64, bool, error) {
	v, ok := np.Annotations[karpoolv1alpha1.AnnotationLimitPerHour]
	if !ok {
		return 0, false, nil
	}
	limit, err := karpoolv1alpha1.ParseLimitPerHour(v)
	return limit, true, err
}

// setCostCondition sets CostWithinLimit from the pool's limit and its NodeClaims (its nil: the
// prices are not known, the condition is Unknown), or removes it from a pool without a limit.
func setCostCondition(np *karpv1.NodePool, its []catalog.InstanceType, claims []karpv1.NodeClaim, gen int64) {
	limit, ok, err := limitPerHour(np)
	switch {
	case !ok:
		meta.RemoveStatusCondition(&np.Status.Conditions, ConditionTypeCostWithinLimit)
		return
	case err != nil:
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: ConditionTypeCostWithinLimit, Status: metav1.ConditionFalse,
			Reason: "InvalidLimit", Message: err.Error() + "; the pool launches nothing until it is fixed", ObservedGeneration: gen})
		return
	case its == nil:
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: ConditionTypeCostWithinLimit, Status: metav1.ConditionUnknown,
			Reason: "PricesUnknown", Message: "the instance types of the pool's EC2NodeClass are not known yet", ObservedGeneration: gen})
		return
	}
	spend, launching := claimsCost(its, claims)
	c := metav1.Condition{Type: ConditionTypeCostWithinLimit, Status: metav1.ConditionTrue, Reason: "WithinLimit", ObservedGeneration: gen,
		Message: fmt.Sprintf("$%.4f/h of the $%.4f/h limit (%s): $%.4f/h launched, up to $%.4f/h launching",
			spend+launching, limit, karpoolv1alpha1.AnnotationLimitPerHour, spend, launching)}
	if spend+launching > limit+1e-6 {
		// A limit lowered below what runs: nothing new launches; consolidation may still replace
		// nodes by cheaper ones.
		c.Status, c.Reason = metav1.ConditionFalse, "LimitExceeded"
	}
	meta.SetStatusCondition(&np.Status.Conditions, c)
}

// instanceTypes are the pool's instance types priced as a provisioning round prices them (the
// NodeOverlays applied), nil when they cannot be known.
func (s *Status) instanceTypes(ctx context.Context, np *karpv1.NodePool, class *awsv1.EC2NodeClass) []catalog.InstanceType {
	if class == nil || s.provider == nil {
		return nil
	}
	its, err := s.provider.InstanceTypes(ctx, class)
	if err != nil {
		return nil
	}
	if s.Overlay != nil {
		its = s.Overlay(ctx, np, its)
	}
	return its
}
