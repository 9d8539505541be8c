package disruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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

// While disruption this controller started is in motion (replacements launching, nodes
// draining, their pods moving) it looks every motionInterval, for motionWindow after its last
// write: a scale-down goes in budget-sized steps, and waiting a whole passInterval at each
// stage of each step would multiply its length (Karpenter requeues at once after acting and
// watches its orchestration queue).
const (
	motionInterval = time.Second
	motionWindow   = 30 * time.Second
)

// Controller runs disruption passes; it is a manager Runnable (leader only).
type Controller struct {
	client   client.Client
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	opts     Options
	tracker  *Tracker
	cons     consolidation
	// said remembers the dry-run message last given per NodeClaim, so each is given once.
	said map[string]string
	// wrote is when this controller last tainted, untainted or deleted something.
	wrote time.Time
	// clouds keeps the last cloud drift answer per NodeClaim.
	clouds map[string]cloudCheck
	// typesGone holds the NodeClaims whose instance type went (typedrift.go), as last judged.
	typesGone map[string]Verdict
	// badDoNotDisrupt remembers the pods warned about an unreadable do-not-disrupt value (and
	// the value), so each is warned about once.
	badDoNotDisrupt map[types.UID]string
}

// Options configure the disruption controller.
type Options struct {
	Recorder record.EventRecorder // may be nil
	Metrics  *metrics.Metrics     // may be nil
	// Simulator runs the scheduling engine for consolidation; without it only empty and
	// expired nodes are removed.
	Simulator Simulator
	// DryRun decides as usual but only reports: events (DisruptionDryRun) and log lines say
	// what would be disrupted and why; nothing is tainted or deleted.
	DryRun bool
	// MinSavings is the least a consolidation must save unless a NodePool's
	// karpool.dev/consolidation-min-savings annotation says otherwise.
	MinSavings MinSavings
	// Drift checks instances against their node class's resolution (AMI, subnet, security
	// groups); without it only NodePool, requirements and EC2NodeClass hash drift are seen.
	Drift Drifter
	// SpotToSpot lets consolidation replace spot nodes by cheaper spot nodes (Karpenter's
	// SpotToSpotConsolidation feature gate).
	SpotToSpot bool
	// ValidationDelay is how long a disruption decision waits before it is checked again and
	// carried out; 0 means DefaultValidationDelay. Tests shorten it.
	ValidationDelay time.Duration
}

// New returns the disruption controller.
func New(c client.Client, opts Options) *Controller {
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.ValidationDelay <= 0 {
		opts.ValidationDelay = DefaultValidationDelay
	}
	ctl := &Controller{client: c, recorder: opts.Recorder, metrics: opts.Metrics, opts: opts, tracker: NewTracker(),
		said: map[string]string{}, clouds: map[string]cloudCheck{}}
	ctl.tracker.validation = opts.ValidationDelay
	ctl.tracker.held = ctl.cons.held
	return ctl
}

// Start runs passes until ctx ends: every passInterval, or every motionInterval while
// disruption is in motion.
func (c *Controller) Start(ctx context.Context) error {
	return periodic.Paced(ctx, "disruption", passInterval, func(ctx context.Context) (time.Duration, error) {
		err := c.pass(ctx)
		if c.cons.running != nil || time.Since(c.wrote) < motionWindow {
			return motionInterval, err
		}
		return passInterval, err
	})
}

// pass takes a snapshot, decides, and acts: emptiness (unmark, mark, delete), then one step of
// consolidation.
func (c *Controller) pass(ctx context.Context) error {
	snap, err := state.Take(ctx, c.client)
	if err != nil {
		return err
	}
	now := time.Now()
	c.forgetSaid(snap)
	var errs []error
	gone := expired(snap, now)
	for _, nc := range gone {
		errs = append(errs, c.expire(ctx, nc))
	}
	plan := c.tracker.Decide(snap, now)
	if c.metrics != nil {
		for pool, n := range plan.Allowed {
			c.metrics.AllowedDisruptions.WithLabelValues(pool, string(karpv1.DisruptionReasonEmpty)).Set(float64(n))
		}
		c.metrics.EligibleNodes.WithLabelValues(eligibleReason(karpv1.DisruptionReasonEmpty)).Set(float64(plan.Eligible))
	}
	for pool, why := range plan.Blocked {
		for _, np := range snap.NodePools {
			if np.Name == pool {
				c.recorder.Eventf(np, corev1.EventTypeNormal, "DisruptionBlocked", "Empty nodes wait: %s", why)
			}
		}
	}
	if c.opts.DryRun {
		for _, cand := range plan.Mark {
			c.dryRun(ctx, cand.NodeClaim, fmt.Sprintf("Empty for %s: would delete", cand.EmptyFor.Round(time.Second)))
		}
		plan.Mark, plan.Unmark = nil, nil
	}
	for _, cand := range plan.Unmark {
		errs = append(errs, c.setTaint(ctx, cand.Node, false))
	}
	for _, cand := range plan.Mark {
		errs = append(errs, c.setTaint(ctx, cand.Node, true))
	}
	for _, cand := range plan.Delete {
		errs = append(errs, c.remove(ctx, cand))
	}
	busy := len(gone)+len(plan.Mark)+len(plan.Delete)+len(plan.Unmark) > 0
	errs = append(errs, c.consolidate(ctx, snap, now, busy))
	errs = append(errs, c.validate(ctx, now))
	return errors.Join(errs...)
}

// validate waits the validation delay after a consolidation was proposed in this pass, then checks
// the decision on a fresh snapshot and acts if it still holds (as Karpenter's validation does,
// rather than waiting for passes: a scale-down is consolidated in steps of the budget, each
// step one validation long).
func (c *Controller) validate(ctx context.Context, proposed time.Time) error {
	if c.cons.pending == nil || !c.cons.pendingAt.Equal(proposed) {
		return nil
	}
	t := time.NewTimer(c.opts.ValidationDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
	snap, err := state.Take(ctx, c.client)
	if err != nil {
		return err
	}
	return c.consolidate(ctx, snap, time.Now(), false)
}

// setTaint adds or removes the karpenter.sh/disrupted:NoSchedule taint on the node as it is
// now (the snapshot's copy may predate an earlier change).
func (c *Controller) setTaint(ctx context.Context, snapNode *corev1.Node, on bool) error {
	node := &corev1.Node{}
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(snapNode), node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if hasDisruptedTaint(node) == on {
		return nil
	}
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
	c.wrote = time.Now()
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
	if err := c.deleteClaim(ctx, cand.NodeClaim); err != nil {
		return err
	}
	msg := fmt.Sprintf("Disrupting NodeClaim: Empty for %s (consolidateAfter %s)",
		cand.EmptyFor.Round(time.Second), *cand.Pool.Spec.Disruption.ConsolidateAfter.Duration)
	c.recorder.Event(cand.NodeClaim, corev1.EventTypeNormal, "DisruptionTerminating", msg)
	c.recorder.Event(cand.Node, corev1.EventTypeNormal, "DisruptionTerminating", msg)
	if c.metrics != nil {
		c.metrics.DisruptionDecisions.WithLabelValues("delete", "empty", "empty").Inc()
	}
	c.disrupted(cand.NodeClaim, "empty")
	return nil
}

// expire deletes a NodeClaim past its expireAfter.
func (c *Controller) expire(ctx context.Context, nc *karpv1.NodeClaim) error {
	life := *nc.Spec.ExpireAfter.Duration
	if c.opts.DryRun {
		c.dryRun(ctx, nc, fmt.Sprintf("Expired (expireAfter %s): would delete", life))
		return nil
	}
	log.FromContext(ctx).Info("disrupting node(s)", "reason", "expired", "decision", "delete",
		"NodeClaim", klog.KObj(nc), "NodePool", klog.KRef("", nc.Labels[karpv1.LabelNodePool]), "expireAfter", life.String())
	if err := c.deleteClaim(ctx, nc); err != nil {
		return err
	}
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "DisruptionTerminating", "Disrupting NodeClaim: Expired (expireAfter %s)", life)
	c.disrupted(nc, "expired")
	return nil
}

// disrupted counts a NodeClaim that disruption deleted.
func (c *Controller) disrupted(nc *karpv1.NodeClaim, reason string) {
	if c.metrics != nil {
		c.metrics.NodeClaimsDisrupted.WithLabelValues(reason, nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType]).Inc()
	}
}

func (c *Controller) deleteClaim(ctx context.Context, nc *karpv1.NodeClaim) error {
	if err := c.client.Delete(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err)
	}
	c.wrote = time.Now()
	return nil
}

// dryRun reports, once per NodeClaim and message, what disruption would do to it.
func (c *Controller) dryRun(ctx context.Context, nc *karpv1.NodeClaim, msg string) {
	if c.said[nc.Name] == msg {
		return
	}
	c.said[nc.Name] = msg
	log.FromContext(ctx).Info("would disrupt node (dry run)", "NodeClaim", klog.KObj(nc), "NodePool", klog.KRef("", nc.Labels[karpv1.LabelNodePool]), "decision", msg)
	c.recorder.Event(nc, corev1.EventTypeNormal, "DisruptionDryRun", "Dry run: "+msg)
}

// forgetSaid drops the dry-run messages of NodeClaims that are gone.
func (c *Controller) forgetSaid(snap *state.Cluster) {
	live := map[string]bool{}
	for _, nc := range snap.NodeClaims {
		live[nc.Name] = true
	}
	for name := range c.said {
		if !live[name] {
			delete(c.said, name)
		}
	}
}
