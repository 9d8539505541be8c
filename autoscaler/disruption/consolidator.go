package disruption

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// settleTime is how long a pod that waits for a node counts as in motion (see growing).
const settleTime = time.Minute

// replacementTimeout is how long replacements may take to initialize before the command is
// rolled back (the candidates keep running).
const replacementTimeout = 10 * time.Minute

// Simulator is what consolidation needs from the provisioner: the pools with their instance
// types, the one scheduling engine run without some nodes, and NodeClaims created for a plan.
type Simulator interface {
	Pools(ctx context.Context, c *state.Cluster) ([]scheduling.Pool, map[string]string)
	SimulateWithout(c *state.Cluster, pools []scheduling.Pool, nodes map[string]bool) *scheduling.Result
	SimulateConsolidation(c *state.Cluster, pools []scheduling.Pool, nodes map[string]bool, now time.Time) *scheduling.Result
	Replace(ctx context.Context, planned []scheduling.NodeClaim, pools []scheduling.Pool, reason string) ([]string, error)
}

// consolidation carries a decision from proposal through validation to its end.
type consolidation struct {
	// pending was decided at pendingAt; a pass the validation delay later acts on it if it still holds.
	pending   *Command
	pendingAt time.Time
	// ahead are the other candidates that could go with the pending command (cleared.go).
	ahead []Candidate
	// cleared were validated with the last command; their shares go without a new delay
	// until clearedUntil.
	cleared      map[string]bool
	clearedUntil time.Time
	// running is being carried out: candidates marked, replacements launching.
	running      *Command
	replacements []string
	startedAt    time.Time
}

// consolidate runs one consolidation step of a pass: advance the running command, or decide.
// Nothing is decided while capacity is being added (pods pending, NodeClaims not initialized)
// or emptiness acts in the same pass: the simulation would race them.
func (c *Controller) consolidate(ctx context.Context, snap *state.Cluster, now time.Time, busy bool) error {
	if c.opts.Simulator == nil {
		return nil
	}
	if c.cons.running != nil {
		return c.advance(ctx, snap, now)
	}
	drift := drifted(snap)
	c.addTypeDrift(snap, drift)
	c.addCloudDrift(ctx, snap, drift)
	if c.metrics != nil {
		c.metrics.EligibleNodes.WithLabelValues(eligibleReason(karpv1.DisruptionReasonDrifted)).Set(float64(len(drift)))
	}
	if err := c.markDrift(ctx, snap, drift, metav1.NewTime(now)); err != nil {
		return err
	}
	if busy || growing(snap, now) {
		c.cons.pending = nil
		return nil
	}
	pools, _ := c.opts.Simulator.Pools(ctx, snap)
	c.judgeTypes(snap, pools, now)
	// Drift moves pods anywhere; consolidation not onto nodes within their consolidateAfter.
	simulateDrift := func(nodes map[string]bool) *scheduling.Result {
		return c.opts.Simulator.SimulateWithout(snap, pools, nodes)
	}
	simulate := func(nodes map[string]bool) *scheduling.Result {
		return c.opts.Simulator.SimulateConsolidation(snap, pools, nodes, now)
	}
	prices := nodePrice(pools)
	// Drift first, as in Karpenter: a rollout is not held up by savings.
	_, driftBudget := c.tracker.budgets(snap, karpv1.DisruptionReasonDrifted, now)
	if cmd, _ := driftCommand(snap, drift, driftBudget, prices, simulateDrift, now); cmd != nil {
		c.cons.pending = nil
		return c.execute(ctx, cmd, pools, now)
	}
	cands, skipped := consolidationCandidates(snap, prices, now)
	c.warnBadDoNotDisrupt(snap, now)
	allowed, budget := c.tracker.budgets(snap, karpv1.DisruptionReasonUnderutilized, now)
	if c.metrics != nil {
		for pool, n := range allowed {
			c.metrics.AllowedDisruptions.WithLabelValues(pool, string(karpv1.DisruptionReasonUnderutilized)).Set(float64(n))
		}
		c.metrics.EligibleNodes.WithLabelValues(eligibleReason(karpv1.DisruptionReasonUnderutilized)).Set(float64(len(cands)))
	}
	r := rules{minSavings: c.opts.MinSavings, spotToSpot: c.opts.SpotToSpot, balanced: balancedTotals(snap, prices)}
	if pending := c.cons.pending; pending != nil {
		if now.Sub(c.cons.pendingAt) < c.opts.ValidationDelay {
			return nil
		}
		c.cons.pending = nil
		cmd, why := revalidate(pending, cands, budget, r, simulate)
		if cmd != nil {
			c.clear(clearAhead(cmd, c.cons.ahead, cands, r, simulate), now)
			return c.execute(ctx, cmd, pools, now)
		}
		log.FromContext(ctx).Info("consolidation no longer valid; deciding again", "candidates", pending.Key(), "reason", why)
	}
	if done, err := c.continueCleared(ctx, cands, budget, r, simulate, pools, now); done {
		return err
	}
	cmd, kept := consolidate(cands, budget, r, simulate)
	if err := c.report(ctx, snap, cands, skipped, kept, metav1.NewTime(now)); err != nil {
		return err
	}
	if cmd != nil {
		c.cons.pending, c.cons.pendingAt = cmd, now
		c.cons.ahead = aheadOf(cmd, cands, r, simulate)
		log.FromContext(ctx).Info("consolidation decided; validating", "candidates", cmd.Key(), "decision", cmd.Decision(),
			"consolidation-type", cmd.Method, "price", fmt.Sprintf("%.4f", cmd.Price), "new-price", fmt.Sprintf("≤ %.4f", cmd.NewPrice),
			"after", c.opts.ValidationDelay.String(), "could-follow", len(c.cons.ahead))
	}
	return nil
}

// clear keeps the names a validated command cleared (none in a dry run: nothing moves there).
func (c *Controller) clear(names map[string]bool, now time.Time) {
	if c.opts.DryRun || len(names) == 0 {
		c.cons.cleared = nil
		return
	}
	c.cons.cleared, c.cons.clearedUntil = names, now.Add(clearedFor)
}

// continueCleared deletes the next budget's share of the cleared set, simulated again but not
// delayed again. done: it acted (or failed to); otherwise the pass decides as usual.
func (c *Controller) continueCleared(ctx context.Context, cands []Candidate, budget map[string]int, r rules,
	simulate func(map[string]bool) *scheduling.Result, pools []scheduling.Pool, now time.Time) (done bool, err error) {
	if len(c.cons.cleared) == 0 || now.After(c.cons.clearedUntil) {
		c.cons.cleared = nil
		return false, nil
	}
	cmd, ok := nextShare(c.cons.cleared, cands, budget, r, simulate)
	if !ok {
		log.FromContext(ctx).Info("validated scale-down ended: its next share no longer fits", "left", len(c.cons.cleared))
		c.cons.cleared = nil
		return false, nil
	}
	if cmd == nil {
		return false, nil
	}
	for _, cand := range cmd.Candidates {
		delete(c.cons.cleared, cand.NodeClaim.Name)
	}
	c.cons.clearedUntil = now.Add(clearedFor)
	log.FromContext(ctx).Info("consolidation continues a validated scale-down", "candidates", cmd.Key(), "decision", cmd.Decision(),
		"consolidation-type", cmd.Method, "price", fmt.Sprintf("%.4f", cmd.Price), "left", len(c.cons.cleared))
	return true, c.execute(ctx, cmd, pools, now)
}

// revalidate checks a decision the validation delay after it was taken, as Karpenter's validation
// does: its candidates are all still candidates within the budget, and simulated again they
// still go, by the same method, for no more than was decided. It returns the command on the
// fresh state, or nil and why not.
func revalidate(pending *Command, cands []Candidate, budget map[string]int, r rules, simulate func(map[string]bool) *scheduling.Result) (*Command, string) {
	byName := map[string]Candidate{}
	for _, cand := range cands {
		byName[cand.NodeClaim.Name] = cand
	}
	left := maps.Clone(budget)
	fresh := make([]Candidate, 0, len(pending.Candidates))
	for _, old := range pending.Candidates {
		cand, ok := byName[old.NodeClaim.Name]
		if !ok {
			return nil, fmt.Sprintf("NodeClaim %s is no longer a candidate", old.NodeClaim.Name)
		}
		if left[cand.Pool.Name]--; left[cand.Pool.Name] < 0 {
			return nil, fmt.Sprintf("NodePool %s's budget no longer allows it", cand.Pool.Name)
		}
		fresh = append(fresh, cand)
	}
	maxNew := -1
	if pending.Method == "multi" {
		maxNew = len(fresh) - 1
	}
	cmd, v := evaluate(fresh, r, simulate, maxNew)
	switch {
	case cmd == nil:
		return nil, v.Message
	case len(cmd.Replacements) > len(pending.Replacements) || cmd.NewPrice > pending.NewPrice:
		return nil, fmt.Sprintf("it now needs %d new node(s) at up to $%.4f/h", len(cmd.Replacements), cmd.NewPrice)
	}
	cmd.Method = pending.Method
	return cmd, ""
}

// growing: NodeClaims are on their way, or pods are in motion: not bound yet and created, or
// judged unschedulable, within settleTime (new pods the scheduler has not placed yet belong
// nowhere in a snapshot, and a decision taken then would not hold), or terminating (a scale-down
// in progress: a decision taken halfway sees half of the room it frees, and its validation
// delay is spent again on the next). Pods that have waited or terminated longer are left alone:
// they do not hold consolidation up forever.
func growing(snap *state.Cluster, now time.Time) bool {
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp == nil && !state.IsTrue(nc, karpv1.ConditionTypeInitialized) {
			return true
		}
	}
	for _, p := range snap.Pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || state.OwnedByDaemonSet(p) {
			continue
		}
		if p.DeletionTimestamp != nil {
			if now.Before(p.DeletionTimestamp.Add(settleTime)) {
				return true
			}
			continue
		}
		if p.Spec.NodeName != "" {
			continue
		}
		since := p.CreationTimestamp.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.LastTransitionTime.After(since) {
				since = c.LastTransitionTime.Time
			}
		}
		if now.Sub(since) < settleTime {
			return true
		}
	}
	return false
}

// execute marks the candidates, then deletes them, or launches their replacements first.
func (c *Controller) execute(ctx context.Context, cmd *Command, pools []scheduling.Pool, now time.Time) error {
	if c.opts.DryRun {
		for _, cand := range cmd.Candidates {
			c.dryRun(ctx, cand.NodeClaim, fmt.Sprintf("%s: would %s (%s, $%.4f/h → at most $%.4f/h)", cmd.Reason, cmd.Decision(), cmd.Method, cmd.Price, cmd.NewPrice))
		}
		return nil
	}
	for _, cand := range cmd.Candidates {
		if err := c.setTaint(ctx, cand.Node, true); err != nil {
			return errors.Join(err, c.unmarkAll(ctx, cmd))
		}
	}
	if len(cmd.Replacements) == 0 {
		return c.finish(ctx, cmd, nil)
	}
	names, err := c.opts.Simulator.Replace(ctx, cmd.Replacements, pools, cmd.reason())
	c.cons.running, c.cons.replacements, c.cons.startedAt = cmd, names, now
	if err != nil {
		return errors.Join(err, c.rollback(ctx, fmt.Sprintf("creating the replacements failed: %v", err)))
	}
	log.FromContext(ctx).Info("launching replacement(s) before disrupting", "NodeClaims", strings.Join(names, ", "),
		"candidates", cmd.Key(), "price", fmt.Sprintf("%.4f", cmd.Price), "new-price", fmt.Sprintf("≤ %.4f", cmd.NewPrice))
	return nil
}

// advance checks the running command's replacements: all initialized ⇒ the candidates go; one
// gone, failed to launch, or late ⇒ roll back.
func (c *Controller) advance(ctx context.Context, snap *state.Cluster, now time.Time) error {
	claims := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		claims[nc.Name] = nc
	}
	ready := 0
	for _, name := range c.cons.replacements {
		nc := claims[name]
		switch {
		case nc == nil || nc.DeletionTimestamp != nil:
			return c.rollback(ctx, fmt.Sprintf("replacement %s went away before it was initialized", name))
		case state.IsTrue(nc, karpv1.ConditionTypeInitialized):
			ready++
		case state.IsFalse(nc, karpv1.ConditionTypeLaunched):
			return c.rollback(ctx, fmt.Sprintf("replacement %s failed to launch: %s", name, state.Condition(nc, karpv1.ConditionTypeLaunched).Message))
		}
	}
	if ready < len(c.cons.replacements) {
		if now.Sub(c.cons.startedAt) > replacementTimeout {
			return c.rollback(ctx, fmt.Sprintf("the replacements were not initialized within %s", replacementTimeout))
		}
		return nil
	}
	cmd := c.cons.running
	c.cons.running = nil
	return c.finish(ctx, cmd, c.cons.replacements)
}

// finish deletes the candidates' NodeClaims (their finalizer drains the nodes through the
// Eviction API and terminates the instances) and protects the replacements while the pods move.
func (c *Controller) finish(ctx context.Context, cmd *Command, replacements []string) error {
	for _, name := range replacements {
		c.tracker.protect(name, time.Now().Add(2*nominationWindow))
	}
	what := "delete"
	if len(replacements) > 0 {
		what = fmt.Sprintf("replace with %s", strings.Join(replacements, ", "))
	}
	msg := fmt.Sprintf("Disrupting NodeClaim: %s/%s (%s, $%.4f/h → $%.4f/h)", cmd.Reason, cmd.Decision(), cmd.Method, cmd.Price, cmd.NewPrice)
	var errs []error
	for _, cand := range cmd.Candidates {
		log.FromContext(ctx).Info("disrupting node(s)", "reason", cmd.reason(), "decision", what, "consolidation-type", cmd.Method,
			"NodeClaim", klog.KObj(cand.NodeClaim), "Node", klog.KRef("", cand.Node.Name), "NodePool", klog.KObj(cand.Pool), "pods", len(cand.Pods))
		if err := c.deleteClaim(ctx, cand.NodeClaim); err != nil {
			errs = append(errs, err)
			continue
		}
		c.recorder.Event(cand.NodeClaim, corev1.EventTypeNormal, "DisruptionTerminating", msg)
		c.recorder.Event(cand.Node, corev1.EventTypeNormal, "DisruptionTerminating", msg)
		c.disrupted(cand.NodeClaim, cmd.reason())
	}
	if c.metrics != nil {
		c.metrics.DisruptionDecisions.WithLabelValues(cmd.Decision(), cmd.reason(), cmd.Method).Inc()
	}
	return errors.Join(errs...)
}

// rollback lifts the taint from the candidates and deletes the replacements created so far.
func (c *Controller) rollback(ctx context.Context, why string) error {
	cmd := c.cons.running
	c.cons.running = nil
	log.FromContext(ctx).Info("consolidation abandoned; the nodes stay", "candidates", cmd.Key(), "reason", why)
	for _, cand := range cmd.Candidates {
		c.recorder.Event(cand.NodeClaim, corev1.EventTypeWarning, "DisruptionBlocked", "Consolidation abandoned: "+why)
	}
	errs := []error{c.unmarkAll(ctx, cmd)}
	for _, name := range c.cons.replacements {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
		errs = append(errs, c.deleteClaim(ctx, nc))
	}
	return errors.Join(errs...)
}

func (c *Controller) unmarkAll(ctx context.Context, cmd *Command) error {
	var errs []error
	for _, cand := range cmd.Candidates {
		errs = append(errs, c.setTaint(ctx, cand.Node, false))
	}
	return errors.Join(errs...)
}

// held reports whether the NodeClaim is a candidate of the running command (its taint stays).
func (s *consolidation) held(claim string) bool {
	if s.running == nil {
		return false
	}
	for _, cand := range s.running.Candidates {
		if cand.NodeClaim.Name == claim {
			return true
		}
	}
	return false
}

// eligibleReason is a disruption reason as karpenter_voluntary_disruption_eligible_nodes spells
// it (lower case).
func eligibleReason(r karpv1.DisruptionReason) string { return strings.ToLower(string(r)) }
