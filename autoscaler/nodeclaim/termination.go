package nodeclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// drainPoll is how often a draining node or a terminating instance is looked at again
// (Karpenter's termination controller looks again every second too).
const drainPoll = time.Second

// evictParallelism bounds the eviction requests of one drain: one at a time, a node with a
// hundred pods took seconds to empty and held up the next step of a scale-down.
const evictParallelism = 10

// finalize runs when a NodeClaim is deleted: cordon and drain its Node (evictions, so
// PodDisruptionBudgets are honoured), terminate the instance, wait until it is gone, then release
// the Node's and the NodeClaim's finalizers. Past spec.terminationGracePeriod, or the
// termination timestamp annotation, the pods that are still there are deleted instead of evicted.
func (l *Lifecycle) finalize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx)
	node, err := l.nodeOf(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node != nil {
		remaining, err := l.drain(ctx, nc, node)
		if err != nil {
			return reconcile.Result{}, err
		}
		if remaining > 0 {
			return reconcile.Result{RequeueAfter: drainPoll}, nil
		}
	}
	if state.Launched(nc) {
		err := l.opts.Provider.Delete(ctx, nc)
		if err != nil && !errors.Is(err, cloud.ErrNotFound) {
			return reconcile.Result{}, fmt.Errorf("terminating instance %s: %w", nc.Status.ProviderID, err)
		}
		if err == nil {
			// Termination is asynchronous: wait until the instance is really gone, so that
			// the capacity is never counted twice (old instance + replacement).
			if _, err := l.opts.Provider.Get(ctx, nc.Status.ProviderID); err == nil {
				return reconcile.Result{RequeueAfter: drainPoll}, nil
			} else if !errors.Is(err, cloud.ErrNotFound) {
				return reconcile.Result{}, err
			}
		}
	}
	if node != nil {
		patch := client.MergeFrom(node.DeepCopy())
		if controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer) {
			err := l.client.Patch(ctx, node, patch)
			if client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
			if err == nil && l.opts.Metrics != nil { // NotFound: a stale copy, counted already
				l.opts.Metrics.NodesTerminated.WithLabelValues(node.Labels[karpv1.LabelNodePool], node.Labels[corev1.LabelTopologyZone]).Inc()
			}
		}
		if node.DeletionTimestamp == nil {
			if err := l.client.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	if err := l.client.Patch(ctx, nc, patch); err != nil {
		// NotFound: a reconcile of a stale copy; the one that removed the finalizer has logged
		// and counted the termination.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	l.launched.Delete(nc.UID)
	l.early.Delete(nc.UID)
	l.opts.Nominations.Clear(nc.Name)
	nodeName := ""
	if node != nil {
		nodeName = node.Name
	}
	logger.Info("deleted nodeclaim", "Node", klog.KRef("", nodeName), "provider-id", nc.Status.ProviderID)
	if l.opts.Metrics != nil {
		l.opts.Metrics.NodeClaimsTerminated.WithLabelValues(nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType], nc.Labels[corev1.LabelTopologyZone]).Inc()
	}
	l.opts.CapacityGone()
	return reconcile.Result{}, nil
}

// drain cordons the node (unschedulable and the karpenter.sh/disrupted taint) and evicts the
// pods that would not come back by themselves. It returns how many such pods are still on it.
func (l *Lifecycle) drain(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (int, error) {
	if !node.Spec.Unschedulable || !hasTaint(node.Spec.Taints, karpv1.TaintKeyDisrupted, corev1.TaintEffectNoSchedule) {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = true
		if !hasTaint(node.Spec.Taints, karpv1.TaintKeyDisrupted, corev1.TaintEffectNoSchedule) {
			node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		}
		if err := l.client.Patch(ctx, node, patch); err != nil {
			return 0, fmt.Errorf("cordoning node %s: %w", node.Name, err)
		}
		log.FromContext(ctx).Info("tainted node", "Node", klog.KRef("", node.Name), "taint", karpv1.DisruptedNoScheduleTaint.ToString())
	}
	var pods corev1.PodList
	if err := l.client.List(ctx, &pods, client.MatchingFields{podNodeNameField: node.Name}); err != nil {
		return 0, err
	}
	now := l.opts.Now()
	force := drainDeadlinePassed(nc, now)
	var toEvict []*corev1.Pod
	remaining := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !state.Reschedulable(p) || toleratesDisrupted(p) {
			continue
		}
		remaining++
		// As in Karpenter, a pod that asks not to be disrupted is not evicted: the drain waits
		// for it to finish or for the drain's deadline, which deletes it.
		if held, _, _ := state.DoNotDisrupt(p, now); p.DeletionTimestamp == nil && (!held || force) {
			toEvict = append(toEvict, p)
		}
	}
	errs := make([]error, len(toEvict))
	workqueue.ParallelizeUntil(ctx, evictParallelism, len(toEvict), func(i int) {
		errs[i] = l.evict(ctx, toEvict[i], force)
	})
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return remaining, nil
}

// evict asks the Eviction API to move the pod (or deletes it when forced). A
// PodDisruptionBudget that does not allow it now, or a namespace going away, is not an error:
// the next look tries again, or finds the pod gone.
func (l *Lifecycle) evict(ctx context.Context, p *corev1.Pod, force bool) error {
	var err error
	if force {
		err = l.client.Delete(ctx, p)
	} else {
		err = l.client.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		})
	}
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsTooManyRequests(err),
		apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	}
	return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
}

// NodeTermination handles a Node deleted directly (kubectl delete node): the Node carries the
// termination finalizer, so deleting it only sets its deletionTimestamp; this reconciler deletes
// the NodeClaim, whose finalizer drains the node and terminates the instance. A Node without a
// NodeClaim is released at once.
type NodeTermination struct {
	client client.Client
}

// NewNodeTermination returns the Node termination reconciler.
func NewNodeTermination(c client.Client) *NodeTermination { return &NodeTermination{client: c} }

// Reconcile deletes the NodeClaim of a Node being deleted.
func (n *NodeTermination) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := n.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	var claims karpv1.NodeClaimList
	if err := n.client.List(ctx, &claims, client.MatchingFields{claimProviderIDField: node.Spec.ProviderID}); err != nil {
		return reconcile.Result{}, err
	}
	if len(claims.Items) == 0 || node.Spec.ProviderID == "" {
		patch := client.MergeFrom(node.DeepCopy())
		controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer)
		return reconcile.Result{}, client.IgnoreNotFound(n.client.Patch(ctx, node, patch))
	}
	for i := range claims.Items {
		if claims.Items[i].DeletionTimestamp == nil {
			if err := n.client.Delete(ctx, &claims.Items[i]); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
		}
	}
	return reconcile.Result{}, nil
}

// toleratesDisrupted: a pod that tolerates the karpenter.sh/disrupted:NoSchedule taint would be
// scheduled right back; the drain neither evicts it nor waits for it (Karpenter's rule).
func toleratesDisrupted(p *corev1.Pod) bool {
	return scheduling.Tolerates(p.Spec.Tolerations, karpv1.DisruptedNoScheduleTaint)
}

// drainDeadlinePassed: the drain of nc stops waiting for evictions once its
// terminationGracePeriod has passed since the deletion, or the time in its termination
// timestamp annotation (node repair sets it to the moment of the repair).
func drainDeadlinePassed(nc *karpv1.NodeClaim, now time.Time) bool {
	if tgp := nc.Spec.TerminationGracePeriod; tgp != nil && nc.DeletionTimestamp != nil && now.After(nc.DeletionTimestamp.Add(tgp.Duration)) {
		return true
	}
	at, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.AnnotationTerminationTimestamp])
	return err == nil && !now.Before(at)
}
