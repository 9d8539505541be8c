// Package nodepool keeps NodePool status current: the resources and node count of the pool's
// NodeClaims, and the conditions that say whether the pool can launch (NodeClassReady,
// ValidationSucceeded, Ready). It also exports the pool's usage, limits and cost as metrics.
package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/internal/unimplemented"
)

// Status reconciles NodePool status.
type Status struct {
	client   client.Client
	provider cloud.CloudProvider
	metrics  *metrics.Metrics
	// StaticCapacity says whether the StaticCapacity feature gate is on: without it, a static
	// pool's FieldsHonored condition says its replicas are not kept.
	StaticCapacity bool
	// Overlay prices a pool's instance types as provisioning does (the NodeOverlays applied);
	// nil leaves the cloud provider's prices.
	Overlay func(context.Context, *karpv1.NodePool, []catalog.InstanceType) []catalog.InstanceType
}

// NewStatus returns the NodePool status reconciler. provider prices the pool's instances for
// the cost metric; metrics may be nil.
func NewStatus(c client.Client, provider cloud.CloudProvider, m *metrics.Metrics) *Status {
	return &Status{client: c, provider: provider, metrics: m}
}

// Reconcile recomputes one NodePool's status.
func (s *Status) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := s.client.Get(ctx, req.NamespacedName, np); err != nil {
		if client.IgnoreNotFound(err) == nil {
			s.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var claims karpv1.NodeClaimList
	if err := s.client.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: np.Name}); err != nil {
		return reconcile.Result{}, err
	}
	var classes awsv1.EC2NodeClassList
	if err := s.client.List(ctx, &classes); err != nil {
		return reconcile.Result{}, err
	}
	snapshot := &state.Cluster{NodeClasses: map[string]*awsv1.EC2NodeClass{}}
	for i := range classes.Items {
		snapshot.NodeClasses[classes.Items[i].Name] = &classes.Items[i]
	}
	class, notReady := snapshot.NodeClassReady(np)
	if err := s.stamp(ctx, np); err != nil {
		return reconcile.Result{}, err
	}

	before := np.DeepCopy()
	np.Status.Resources, np.Status.Nodes = usage(claims.Items)
	gen := np.Generation
	if notReady == "" {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeClassReady,
			Status: metav1.ConditionTrue, Reason: "NodeClassReady", ObservedGeneration: gen})
	} else {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeClassReady,
			Status: metav1.ConditionFalse, Reason: "NodeClassNotReady", Message: notReady, ObservedGeneration: gen})
	}
	invalid := validation(np, gen)
	meta.SetStatusCondition(&np.Status.Conditions, rollout(claims.Items, gen))
	meta.SetStatusCondition(&np.Status.Conditions, honored(np, gen, s.StaticCapacity))
	its := s.instanceTypes(ctx, np, class)
	setCostCondition(np, its, claims.Items, gen)
	ready := metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: gen}
	if notReady != "" {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "NodeClassNotReady", notReady
	} else if invalid != "" {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "ValidationFailed", invalid
	}
	meta.SetStatusCondition(&np.Status.Conditions, ready)
	if !equality.Semantic.DeepEqual(before.Status, np.Status) {
		if err := s.client.Status().Patch(ctx, np, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, err
		}
	}
	s.export(np, its, claims.Items)
	return reconcile.Result{}, nil
}

// validation sets ValidationSucceeded and returns why the pool is invalid ("" if it is not).
// The API server enforced the CRD's schema and CEL rules on admission; karpool's own cost
// limit annotation is checked here, since a limit it cannot read launches nothing.
func validation(np *karpv1.NodePool, gen int64) string {
	c := metav1.Condition{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: "ValidationSucceeded", ObservedGeneration: gen}
	if _, _, err := limitPerHour(np); err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "InvalidCostLimit", err.Error()
	}
	meta.SetStatusCondition(&np.Status.Conditions, c)
	return c.Message
}

// honored is the FieldsHonored condition: the fields karpool does not implement, and a static
// pool's replicas while the StaticCapacity gate is off (Karpenter's default, where such a pool
// gets no nodes either).
func honored(np *karpv1.NodePool, gen int64, staticCapacity bool) metav1.Condition {
	c := unimplemented.Condition("NodePool", np, gen)
	if np.Spec.Replicas == nil || staticCapacity {
		return c
	}
	msg := "spec.replicas is kept only with the StaticCapacity feature gate, which is off (Karpenter's default): the pool gets no nodes"
	if c.Status == metav1.ConditionFalse {
		c.Message += "; " + msg
	} else {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "FeatureGateOff", msg
	}
	return c
}

// stamp puts the template's hash on the NodePool, as Karpenter does (NodeClaims get it at
// creation; drift compares the two).
func (s *Status) stamp(ctx context.Context, np *karpv1.NodePool) error {
	hash := np.TemplateHash()
	if np.Annotations[karpv1.AnnotationNodePoolHash] == hash && np.Annotations[karpv1.AnnotationNodePoolHashVersion] == karpv1.NodePoolHashVersion {
		return nil
	}
	patch := client.MergeFrom(np.DeepCopy())
	if np.Annotations == nil {
		np.Annotations = map[string]string{}
	}
	np.Annotations[karpv1.AnnotationNodePoolHash], np.Annotations[karpv1.AnnotationNodePoolHashVersion] = hash, karpv1.NodePoolHashVersion
	return s.client.Patch(ctx, np, patch)
}

// ConditionTypeRolledOut is karpool's NodePool condition for a rollout after a template change:
// False while NodeClaims of the pool are drifted (the disruption controller marks them) or
// being replaced for it, True once none is; the message counts the nodes drifted, being
// replaced and up to date. A GitOps health check can wait on it. The counts are in the
// condition rather than in new status fields so that the NodePool keeps Karpenter's schema.
const ConditionTypeRolledOut = "RolledOut"

func rollout(claims []karpv1.NodeClaim, gen int64) metav1.Condition {
	drifted, replacing, live := 0, 0, 0
	for i := range claims {
		isDrifted := state.IsTrue(&claims[i], karpv1.ConditionTypeDrifted)
		switch {
		case claims[i].DeletionTimestamp != nil:
			if isDrifted {
				replacing++
			}
		case isDrifted:
			live++
			drifted++
		default:
			live++
		}
	}
	if drifted+replacing == 0 {
		return metav1.Condition{Type: ConditionTypeRolledOut, Status: metav1.ConditionTrue, Reason: "RolledOut",
			Message: fmt.Sprintf("all %d nodes are up to date", live), ObservedGeneration: gen}
	}
	return metav1.Condition{Type: ConditionTypeRolledOut, Status: metav1.ConditionFalse, Reason: "Drifted",
		Message:            fmt.Sprintf("rollout: %d nodes drifted, %d being replaced, %d up to date", drifted, replacing, live-drifted),
		ObservedGeneration: gen}
}

// usage sums the capacity of the pool's NodeClaims that are not being deleted: launched ones by
// their instance's capacity; the node count includes those still launching.
func usage(claims []karpv1.NodeClaim) (corev1.ResourceList, int64) {
	total := corev1.ResourceList{}
	var nodes int64
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		nodes++
		for name, q := range nc.Status.Capacity {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	total[corev1.ResourceName("nodes")] = *resource.NewQuantity(nodes, resource.DecimalSI)
	return total, nodes
}

// export publishes usage, limits and cost of the pool.
func (s *Status) export(np *karpv1.NodePool, its []catalog.InstanceType, claims []karpv1.NodeClaim) {
	if s.metrics == nil {
		return
	}
	for name, q := range np.Status.Resources {
		s.metrics.PoolUsage.WithLabelValues(metrics.ResourceType(name), np.Name).Set(metrics.Amount(name, q))
	}
	for name, q := range np.Spec.Limits {
		s.metrics.PoolLimit.WithLabelValues(metrics.ResourceType(name), np.Name).Set(metrics.Amount(name, q))
	}
	limit, limited, err := limitPerHour(np)
	if limited && err == nil && its != nil {
		spend, launching := claimsCost(its, claims)
		s.metrics.PoolCostLimit.WithLabelValues(np.Name).Set(limit)
		s.metrics.PoolCostCounted.WithLabelValues(np.Name).Set(spend + launching)
	} else {
		s.metrics.PoolCostLimit.DeleteLabelValues(np.Name)
		s.metrics.PoolCostCounted.DeleteLabelValues(np.Name)
	}
	if its == nil {
		return
	}
	cost := 0.0
	for i := range claims {
		nc := &claims[i]
		if !state.Launched(nc) || nc.DeletionTimestamp != nil {
			continue
		}
		p, _ := catalog.PriceOf(its, nc.Labels)
		cost += p
	}
	s.metrics.PoolCost.WithLabelValues(np.Name).Set(cost)
}

func (s *Status) forget(pool string) {
	if s.metrics == nil {
		return
	}
	s.metrics.PoolUsage.DeletePartialMatch(map[string]string{"nodepool": pool})
	s.metrics.PoolLimit.DeletePartialMatch(map[string]string{"nodepool": pool})
	s.metrics.PoolCost.DeleteLabelValues(pool)
	s.metrics.PoolCostCounted.DeleteLabelValues(pool)
	s.metrics.PoolCostLimit.DeleteLabelValues(pool)
}

// SetupWithManager watches NodePools, their NodeClaims and the EC2NodeClasses they reference.
func (s *Status) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodepool.status").WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if pool := o.GetLabels()[karpv1.LabelNodePool]; pool != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pool}}}
			}
			return nil
		})).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(s.poolsOfClass)).
		Complete(s)
}

func (s *Status) poolsOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var pools karpv1.NodePoolList
	if err := s.client.List(ctx, &pools); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range pools.Items {
		if ref := pools.Items[i].Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: pools.Items[i].Name}})
		}
	}
	return out
}
