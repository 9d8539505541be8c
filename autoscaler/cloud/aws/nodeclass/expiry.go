package nodeclass

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
)

// drainExpiring deletes the class's NodeClaims in capacity blocks its status reports expiring,
// so their nodes drain before EC2 reclaims the instances (Karpenter's capacity-block
// expiration: 40 minutes before the block's end, 10 before EC2 starts terminating). Deleting a
// NodeClaim runs its termination: cordon, drain within the budgets of PodDisruptionBudgets,
// then the instance goes.
func (r *Reconciler) drainExpiring(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	expiring := map[string]bool{}
	for _, cr := range nc.Status.CapacityReservations {
		if cr.State == capreservation.StateExpiring {
			expiring[cr.ID] = true
		}
	}
	if len(expiring) == 0 {
		return nil
	}
	var claims karpv1.NodeClaimList
	if err := r.client.List(ctx, &claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if !refersToClass(c) || c.Spec.NodeClassRef.Name != nc.Name || !expiring[c.Labels[awsv1.LabelCapacityReservationID]] || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting NodeClaim %s of expiring capacity block %s: %w", c.Name, c.Labels[awsv1.LabelCapacityReservationID], err)
		}
		ctrl.LoggerFrom(ctx).Info("deleting NodeClaim: its capacity block is expiring", "NodeClaim", c.Name,
			"capacity-reservation-id", c.Labels[awsv1.LabelCapacityReservationID], "EC2NodeClass", nc.Name)
	}
	return nil
}
