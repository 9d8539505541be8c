package nodeclaim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// Cache indexes the NodeClaim controllers rely on.
const (
	nodeProviderIDField  = "spec.providerID"
	claimProviderIDField = "status.providerID"
	podNodeNameField     = "spec.nodeName"
)

// IndexFields registers the cache indexes (Node by providerID, NodeClaim by providerID, Pod
// by node name). Call it once per manager, before the manager starts.
func IndexFields(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Node{}, nodeProviderIDField, func(o client.Object) []string {
		return nonEmpty(o.(*corev1.Node).Spec.ProviderID)
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &karpv1.NodeClaim{}, claimProviderIDField, func(o client.Object) []string {
		return nonEmpty(o.(*karpv1.NodeClaim).Status.ProviderID)
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &corev1.Pod{}, podNodeNameField, func(o client.Object) []string {
		return nonEmpty(o.(*corev1.Pod).Spec.NodeName)
	})
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// nodeByProviderID returns the Node with that providerID, nil if there is none.
func nodeByProviderID(ctx context.Context, c client.Reader, providerID string) (*corev1.Node, error) {
	if providerID == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingFields{nodeProviderIDField: providerID}); err != nil {
		return nil, err
	}
	switch len(nodes.Items) {
	case 0:
		return nil, nil
	case 1:
		return &nodes.Items[0], nil
	default:
		return nil, fmt.Errorf("%d nodes have providerID %s", len(nodes.Items), providerID)
	}
}

// SetupWithManager registers the lifecycle controller: NodeClaims, woken by changes of the Node
// with their providerID.
func (l *Lifecycle) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.lifecycle").
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(l.claimsOfNode)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: skipNameValidation}).
		Complete(l)
}

func (l *Lifecycle) claimsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	node := o.(*corev1.Node)
	if node.Spec.ProviderID == "" {
		return nil
	}
	var claims karpv1.NodeClaimList
	if err := l.client.List(ctx, &claims, client.MatchingFields{claimProviderIDField: node.Spec.ProviderID}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: claims.Items[i].Name}})
	}
	return out
}

// SetupWithManager registers the Node termination controller (Nodes being deleted that carry
// the termination finalizer).
func (n *NodeTermination) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("node.termination").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetDeletionTimestamp() != nil
		}))).
		WithOptions(controller.Options{SkipNameValidation: skipNameValidation}).
		Complete(n)
}

// skipNameValidation lets a process run the controllers more than once (tests start a
// controller per test; a manager restarted after losing its lease registers them again).
var skipNameValidation = ptr.To(true)
