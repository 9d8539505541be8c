package provisioning

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// settlingLabel marks, inside one consolidation simulation only, the nodes still within their
// NodePool's consolidateAfter; the pods the simulation moves require it absent. Expressing the
// rule as a requirement keeps every placement path of the engine, and its checker, to it
// without a special case. The label is put on copies of the nodes and never reaches the cluster.
const settlingLabel = "karpool.dev/within-consolidate-after"

// settling reports whether a consolidation may not move pods onto the NodeClaim's node at now
// (Karpenter v1.14): its pool consolidates after a positive consolidateAfter, and that time has
// not passed since a pod last came or went. A pool that never consolidates takes moved pods.
func settling(np *karpv1.NodePool, nc *karpv1.NodeClaim, now time.Time) bool {
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	if after == nil || *after <= 0 {
		return false
	}
	since, ok := state.QuietSince(nc)
	return ok && now.Sub(since) < *after
}

// keepMovedPodsOffSettling applies the rule to a consolidation's input: the kept nodes still
// within their consolidateAfter are labelled (on copies), and the moved pods (copies already)
// get a required node affinity against the label.
func keepMovedPodsOffSettling(c *state.Cluster, in *scheduling.Input, moved []*corev1.Pod, now time.Time) {
	pools := map[string]*karpv1.NodePool{}
	for _, np := range c.NodePools {
		pools[np.Name] = np
	}
	names := map[string]bool{}
	for _, nc := range c.NodeClaims {
		if np := pools[nc.Labels[karpv1.LabelNodePool]]; np != nil && nc.Status.NodeName != "" && settling(np, nc, now) {
			names[nc.Status.NodeName] = true
		}
	}
	if len(names) == 0 {
		return
	}
	for i := range in.Nodes {
		if n := in.Nodes[i].Node; names[n.Name] {
			cp := *n
			cp.Labels = maps.Clone(n.Labels)
			cp.Labels[settlingLabel] = "true"
			in.Nodes[i].Node = &cp
		}
	}
	away := corev1.NodeSelectorRequirement{Key: settlingLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	for _, p := range moved {
		p.Spec.Affinity = withRequiredNodeTerm(p.Spec.Affinity, away)
	}
}

// withRequiredNodeTerm returns a copy of the affinity whose required node affinity also asks
// for req: in every term (terms are ORed), or as the only term when there is none.
func withRequiredNodeTerm(a *corev1.Affinity, req corev1.NodeSelectorRequirement) *corev1.Affinity {
	out := &corev1.Affinity{}
	if a != nil {
		out = a.DeepCopy()
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	sel := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if sel == nil || len(sel.NodeSelectorTerms) == 0 {
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}}
		return out
	}
	for i := range sel.NodeSelectorTerms {
		sel.NodeSelectorTerms[i].MatchExpressions = append(sel.NodeSelectorTerms[i].MatchExpressions, req)
	}
	return out
}
