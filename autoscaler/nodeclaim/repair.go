package nodeclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/metrics"
)

// UnhealthyPercent is how many of a NodePool's nodes (rounded up) may be unhealthy at once for
// node repair to go on replacing them; beyond it the problem is likely not the nodes (a bad
// AMI, a network outage) and replacing them would only add churn. Karpenter's limit.
const UnhealthyPercent = 20

// repairBlockedRecheck is how soon a repair held back by the limit is looked at again.
const repairBlockedRecheck = 5 * time.Minute

// Repair replaces the nodes whose conditions have been unhealthy for longer than the cloud
// provider tolerates (its RepairPolicies), as Karpenter's node repair does behind its
// NodeRepair gate: the NodeClaim is deleted with a termination timestamp of now, so the drain
// deletes what does not leave at once, and the provisioner replaces the capacity.
type Repair struct {
	client   client.Client
	policies []cloud.RepairPolicy
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	now      func() time.Time
}

// NewRepair returns the node repair reconciler; metrics and recorder may be nil.
func NewRepair(c client.Client, policies []cloud.RepairPolicy, recorder record.EventRecorder, m *metrics.Metrics) *Repair {
	return &Repair{client: c, policies: policies, recorder: recorder, metrics: m, now: time.Now}
}

// Reconcile replaces one node if it has been unhealthy long enough and its pool is within the
// limit.
func (r *Repair) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cond, deadline := Unhealthy(node, r.policies)
	if cond == nil {
		return reconcile.Result{}, nil
	}
	if now := r.now(); now.Before(deadline) {
		return reconcile.Result{RequeueAfter: deadline.Sub(now)}, nil
	}
	nc, err := r.claimOf(ctx, node)
	if nc == nil || err != nil || nc.DeletionTimestamp != nil {
		return reconcile.Result{}, err
	}
	if why, err := r.blocked(ctx, nc); err != nil || why != "" {
		if why != "" {
			r.event(node, nc, corev1.EventTypeWarning, "NodeRepairBlocked", "Cannot repair the node: "+why)
		}
		return reconcile.Result{RequeueAfter: repairBlockedRecheck}, err
	}
	return reconcile.Result{}, r.replace(ctx, node, nc, cond)
}

// Unhealthy returns the node's condition that a repair policy matches and when the node is to
// be replaced for it: the earliest such moment when several match; nil when none does.
func Unhealthy(node *corev1.Node, policies []cloud.RepairPolicy) (*corev1.NodeCondition, time.Time) {
	var found *corev1.NodeCondition
	var at time.Time
	for _, p := range policies {
		for i := range node.Status.Conditions {
			c := &node.Status.Conditions[i]
			if c.Type != p.ConditionType || c.Status != p.ConditionStatus {
				continue
			}
			if t := c.LastTransitionTime.Add(p.TolerationDuration); found == nil || t.Before(at) {
				found, at = c, t
			}
		}
	}
	return found, at
}

// AllowedUnhealthy is how many of total nodes may be unhealthy: UnhealthyPercent, rounded up
// (one of three nodes may be, as a PodDisruptionBudget's percentages round).
func AllowedUnhealthy(total int) int {
	return (total*UnhealthyPercent + 99) / 100
}

// blocked says why the NodeClaim's node may not be replaced now: more of its pool's nodes (all
// nodes, for a NodeClaim of no pool) are unhealthy than AllowedUnhealthy.
func (r *Repair) blocked(ctx context.Context, nc *karpv1.NodeClaim) (string, error) {
	var opts []client.ListOption
	scope := "the cluster"
	if pool := nc.Labels[karpv1.LabelNodePool]; pool != "" {
		opts, scope = append(opts, client.MatchingLabels{karpv1.LabelNodePool: pool}), fmt.Sprintf("NodePool %q", pool)
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, opts...); err != nil {
		return "", err
	}
	unhealthy := 0
	for i := range nodes.Items {
		if c, _ := Unhealthy(&nodes.Items[i], r.policies); c != nil {
			unhealthy++
		}
	}
	if allowed := AllowedUnhealthy(len(nodes.Items)); unhealthy > allowed {
		return fmt.Sprintf("%d of the %d nodes of %s are unhealthy, more than %d%% (%d)", unhealthy, len(nodes.Items), scope, UnhealthyPercent, allowed), nil
	}
	return "", nil
}

// replace sets the NodeClaim's termination timestamp to now and deletes it.
func (r *Repair) replace(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, cond *corev1.NodeCondition) error {
	before := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.AnnotationTerminationTimestamp] = r.now().UTC().Format(time.RFC3339)
	if err := r.client.Patch(ctx, nc, client.MergeFrom(before)); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := r.client.Delete(ctx, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	msg := fmt.Sprintf("node %s is unhealthy: %s has been %s since %s", node.Name, cond.Type, cond.Status, cond.LastTransitionTime.UTC().Format(time.RFC3339))
	log.FromContext(ctx).Info("deleting unhealthy node", "Node", klog.KObj(node), "NodeClaim", klog.KObj(nc), "condition", cond.Type, "status", cond.Status)
	r.event(node, nc, corev1.EventTypeNormal, "NodeRepair", "Replacing the node: "+msg)
	if r.metrics != nil {
		r.metrics.NodeClaimsDisrupted.WithLabelValues("unhealthy", nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType]).Inc()
	}
	return nil
}

func (r *Repair) claimOf(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	var claims karpv1.NodeClaimList
	if err := r.client.List(ctx, &claims, client.MatchingFields{claimProviderIDField: node.Spec.ProviderID}); err != nil || len(claims.Items) != 1 {
		return nil, err
	}
	return &claims.Items[0], nil
}

func (r *Repair) event(node *corev1.Node, nc *karpv1.NodeClaim, kind, reason, msg string) {
	if r.recorder == nil {
		return
	}
	r.recorder.Event(node, kind, reason, msg)
	r.recorder.Event(nc, kind, reason, msg)
}

// SetupWithManager registers the reconciler; only changes of node conditions wake it. A change
// on one node also wakes the unhealthy nodes of its pool: one recovering may bring the pool
// back within the limit, and they should not wait for their recheck.
func (r *Repair) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("node.health").WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.withUnhealthySiblings),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: conditionsChanged})).
		Complete(r)
}

// withUnhealthySiblings is the node and the unhealthy nodes of its pool.
func (r *Repair) withUnhealthySiblings(ctx context.Context, o client.Object) []reconcile.Request {
	out := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	pool := o.GetLabels()[karpv1.LabelNodePool]
	if pool == "" {
		return out
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, client.MatchingLabels{karpv1.LabelNodePool: pool}); err != nil {
		return out
	}
	for i := range nodes.Items {
		if c, _ := Unhealthy(&nodes.Items[i], r.policies); c != nil && nodes.Items[i].Name != o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
		}
	}
	return out
}

// conditionsChanged: a condition came, went, or changed status or transition time.
func conditionsChanged(e event.UpdateEvent) bool {
	before, after := e.ObjectOld.(*corev1.Node).Status.Conditions, e.ObjectNew.(*corev1.Node).Status.Conditions
	if len(before) != len(after) {
		return true
	}
	for _, b := range before {
		found := false
		for _, a := range after {
			if a.Type == b.Type {
				found = a.Status == b.Status && a.LastTransitionTime.Equal(&b.LastTransitionTime)
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}
