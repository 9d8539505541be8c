package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/internal/periodic"
)

// passInterval is how often the controller looks for nodes to remove (Karpenter's disruption
// loop polls every 10 s too).
const passInterval = 10 * time.Second

// Controller runs disruption passes; it is a manager Runnable (leader only).
type Controller struct {
	client   client.Client
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	tracker  *Tracker
	now      func() time.Time
}

// New returns the disruption controller; recorder and m may be nil.
func New(c client.Client, recorder record.EventRecorder, m *metrics.Metrics) *Controller {
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	return &Controller{client: c, recorder: recorder, metrics: m, tracker: NewTracker(), now: time.Now}
}

// Start runs a pass every passInterval until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	return periodic.Run(ctx, "disruption", passInterval, c.pass)
}

// pass takes a snapshot, decides, and acts: unmark, mark, delete.
func (c *Controller) pass(ctx context.Context) error {
	snap, err := state.Take(ctx, c.client)
	if err != nil {
		return err
	}
	plan := c.tracker.Decide(snap, c.now())
	for pool, n := range plan.Allowed {
		if c.metrics != nil {
			c.metrics.AllowedDisruptions.WithLabelValues(pool, string(karpv1.DisruptionReasonEmpty)).Set(float64(n))
		}
	}
	for pool, why := range plan.Blocked {
		for _, np := range snap.NodePools {
			if np.Name == pool {
				c.recorder.Eventf(np, corev1.EventTypeNormal, "DisruptionBlocked", "Empty nodes wait: %s", why)
			}
		}
	}
	var errs []error
	for _, cand := range plan.Unmark {
		errs = append(errs, c.setTaint(ctx, cand.Node, false))
	}
	for _, cand := range plan.Mark {
		errs = append(errs, c.setTaint(ctx, cand.Node, true))
	}
	for _, cand := range plan.Delete {
		errs = append(errs, c.remove(ctx, cand))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// setTaint adds or removes the karpenter.sh/disrupted:NoSchedule taint.
func (c *Controller) setTaint(ctx context.Context, node *corev1.Node, on bool) error {
	patched := node.DeepCopy()
	patched.Spec.Taints = nil
	for _, t := range node.Spec.Taints {
		if !t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			patched.Spec.Taints = append(patched.Spec.Taints, t)
		}
	}
	if on {
		patched.Spec.Taints = append(patched.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	}
	if err := c.client.Patch(ctx, patched, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("node %s: %w", node.Name, err))
	}
	verb := map[bool]string{true: "tainted node", false: "untainted node"}[on]
	log.FromContext(ctx).Info(verb, "Node", klog.KRef("", node.Name), "taint", karpv1.DisruptedNoScheduleTaint.ToString())
	return nil
}

// remove deletes an empty node's NodeClaim; its finalizer drains what is left (daemonset pods
// stay) and terminates the instance.
func (c *Controller) remove(ctx context.Context, cand Candidate) error {
	log.FromContext(ctx).Info("disrupting node(s)", "reason", "empty", "decision", "delete",
		"NodeClaim", klog.KObj(cand.NodeClaim), "Node", klog.KRef("", cand.Node.Name), "NodePool", klog.KObj(cand.Pool),
		"empty-for", cand.EmptyFor.Round(time.Second).String())
	if err := c.client.Delete(ctx, cand.NodeClaim); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeClaim %s: %w", cand.NodeClaim.Name, err)
	}
	msg := fmt.Sprintf("Disrupting NodeClaim: Empty for %s (consolidateAfter %s)",
		cand.EmptyFor.Round(time.Second), *cand.Pool.Spec.Disruption.ConsolidateAfter.Duration)
	c.recorder.Event(cand.NodeClaim, corev1.EventTypeNormal, "DisruptionTerminating", msg)
	c.recorder.Event(cand.Node, corev1.EventTypeNormal, "DisruptionTerminating", msg)
	if c.metrics != nil {
		c.metrics.DisruptionDecisions.WithLabelValues("delete", "empty", "empty").Inc()
	}
	return nil
}
