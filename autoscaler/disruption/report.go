package disruption

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// report keeps each node's Consolidatable condition in step with the last consolidation pass:
// True for candidates, False with the reason for the others; a candidate that was looked at and
// kept says why in the message. Each change is also an Unconsolidatable event on the NodeClaim
// and its node. Only changes are written; NodeClaims still launching or being deleted are left
// to the lifecycle.
func (c *Controller) report(ctx context.Context, snap *state.Cluster, cands []Candidate, skipped, kept map[string]Verdict, now metav1.Time) error {
	want := map[string]*karpv1.Condition{}
	for name, v := range skipped {
		if v.Reason != "Deleting" && v.Reason != "NotInitialized" {
			want[name] = &karpv1.Condition{Status: metav1.ConditionFalse, Reason: v.Reason, Message: v.Message}
		}
	}
	for _, cand := range cands {
		v := kept[cand.NodeClaim.Name]
		want[cand.NodeClaim.Name] = &karpv1.Condition{Status: metav1.ConditionTrue, Reason: cmp.Or(v.Reason, "Consolidatable"), Message: v.Message}
	}
	c.countSkipped(snap, skipped, kept)
	var errs []error
	for _, nc := range snap.NodeClaims {
		w := want[nc.Name]
		if w == nil {
			continue
		}
		cur := state.Condition(nc, karpv1.ConditionTypeConsolidatable)
		if cur != nil && cur.Status == w.Status && cur.Reason == w.Reason && cur.Message == w.Message {
			continue
		}
		patched := nc.DeepCopy()
		patched.SetCondition(karpv1.ConditionTypeConsolidatable, w.Status, w.Reason, w.Message, now)
		err := c.client.Status().Patch(ctx, patched, client.MergeFromWithOptions(nc, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // the next pass writes it again
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if w.Message != "" {
			c.recorder.Event(nc, corev1.EventTypeNormal, "Unconsolidatable", w.Message)
			if node := snap.NodeFor(nc); node != nil {
				c.recorder.Event(node, corev1.EventTypeNormal, "Unconsolidatable", w.Message)
			}
		}
	}
	return errors.Join(errs...)
}

// warnBadDoNotDisrupt gives a Warning event, once per pod and value, for each pod whose
// karpenter.sh/do-not-disrupt annotation is neither "true" nor a duration: it is ignored, as
// Karpenter ignores it, and its owner should know.
func (c *Controller) warnBadDoNotDisrupt(snap *state.Cluster, now time.Time) {
	seen := map[types.UID]string{}
	for _, p := range snap.Pods {
		v, ok := p.Annotations[karpv1.AnnotationDoNotDisrupt]
		if !ok {
			continue
		}
		if _, _, err := state.DoNotDisrupt(p, now); err != nil {
			seen[p.UID] = v
			if c.badDoNotDisrupt[p.UID] != v {
				c.recorder.Event(p, corev1.EventTypeWarning, "InvalidDoNotDisruptAnnotation", err.Error())
			}
		}
	}
	c.badDoNotDisrupt = seen
}

// countSkipped sets the skipped-nodes gauge from the pass's verdicts: each node that was not a
// candidate, or was looked at and kept, counts under its pool and reason.
func (c *Controller) countSkipped(snap *state.Cluster, skipped, kept map[string]Verdict) {
	if c.metrics == nil {
		return
	}
	type key struct{ pool, reason string }
	counts := map[key]int{}
	for _, nc := range snap.NodeClaims {
		v, ok := skipped[nc.Name]
		if !ok {
			v = kept[nc.Name]
		}
		if v.Reason != "" {
			counts[key{nc.Labels[karpv1.LabelNodePool], v.Reason}]++
		}
	}
	c.metrics.NotConsolidated.Reset()
	for k, n := range counts {
		c.metrics.NotConsolidated.WithLabelValues(k.pool, k.reason).Set(float64(n))
	}
}

// markDrift keeps the NodeClaims' Drifted condition (True with the reason while drifted, False
// once not) and re-stamps NodeClaims made under another hash version with their pool's and
// class's hashes.
func (c *Controller) markDrift(ctx context.Context, snap *state.Cluster, drift map[string]Verdict, now metav1.Time) error {
	var errs []error
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		v, isDrifted := drift[nc.Name]
		cur := state.Condition(nc, karpv1.ConditionTypeDrifted)
		if !isDrifted && (cur == nil || cur.Status != metav1.ConditionTrue) ||
			isDrifted && cur != nil && cur.Status == metav1.ConditionTrue && cur.Reason == v.Reason && cur.Message == v.Message {
			continue
		}
		patched := nc.DeepCopy()
		if isDrifted {
			patched.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, v.Reason, v.Message, now)
		} else {
			patched.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionFalse, "NotDrifted", "", now)
		}
		if err := c.client.Status().Patch(ctx, patched, client.MergeFromWithOptions(nc, client.MergeFromWithOptimisticLock{})); err != nil &&
			!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, re := range restamp(snap) {
		patched := re.nc.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		maps.Copy(patched.Annotations, re.set)
		if err := c.client.Patch(ctx, patched, client.MergeFrom(re.nc)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
