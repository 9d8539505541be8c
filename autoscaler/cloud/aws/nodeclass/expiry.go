package nodeclass

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// demoteEnded relabels the class's reserved NodeClaims, and their nodes, whose instance left
// its reservation (it expired or was cancelled): EC2 runs such an instance as on-demand
// capacity, and, as Karpenter's capacity-type controller does, the capacity-type label says so
// and the reservation labels go. The instances are read once (one DescribeInstances) when the
// class has reserved NodeClaims.
func (r *Reconciler) demoteEnded(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	var claims karpv1.NodeClaimList
	if err := r.client.List(ctx, &claims, client.MatchingLabels{karpv1.LabelCapacityType: karpv1.CapacityTypeReserved}); err != nil {
		return fmt.Errorf("listing reserved NodeClaims: %w", err)
	}
	claims.Items = slices.DeleteFunc(claims.Items, func(c karpv1.NodeClaim) bool {
		return !refersToClass(&c) || c.Spec.NodeClassRef.Name != nc.Name || c.Status.ProviderID == "" || !c.DeletionTimestamp.IsZero()
	})
	if len(claims.Items) == 0 {
		return nil
	}
	views, err := r.provider.List(ctx)
	if err != nil {
		return err
	}
	onDemand := map[string]bool{}
	for _, v := range views {
		onDemand[v.Status.ProviderID] = v.Labels[karpv1.LabelCapacityType] == karpv1.CapacityTypeOnDemand
	}
	for i := range claims.Items {
		if onDemand[claims.Items[i].Status.ProviderID] {
			if err := r.demote(ctx, &claims.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// demote patches a NodeClaim and its node to on-demand without reservation labels.
func (r *Reconciler) demote(ctx context.Context, c *karpv1.NodeClaim) error {
	relabel := func(labels map[string]string) map[string]string {
		out := maps.Clone(labels)
		out[karpv1.LabelCapacityType] = karpv1.CapacityTypeOnDemand
		for _, k := range awsv1.ReservationLabels {
			delete(out, k)
		}
		return out
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Labels = relabel(c.Labels)
	if err := r.client.Patch(ctx, c, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("NodeClaim %s: %w", c.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("NodeClaim's reservation ended: it runs as on-demand capacity now", "NodeClaim", c.Name)
	if c.Status.NodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: c.Status.NodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if node.Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeReserved {
		return nil
	}
	npatch := client.MergeFrom(node.DeepCopy())
	node.Labels = relabel(node.Labels)
	if err := r.client.Patch(ctx, node, npatch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("node %s: %w", node.Name, err)
	}
	return nil
}
