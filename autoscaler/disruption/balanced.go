package disruption

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// Balanced consolidation (Karpenter v1.14's consolidationPolicy: Balanced) scores each move of
// a Balanced pool: the part of the pool's cost it saves against the part of the pool's
// disruption it causes. Both are fractions of the pool's totals, so the rule reads the same for
// a pool of 3 nodes or 3,000; a move that saves 4 % of the cost by evicting 10 % of the pods is
// not worth it, one that saves 5 % for 10 % is.

// balancedThreshold is the least score a move of a Balanced pool needs (Karpenter's 1/k, k = 2).
const balancedThreshold = 0.5

// nodeDisruption is what a node costs to disrupt beyond its pods (cordon, drain, replacement):
// Karpenter's placeholder, which also keeps an empty pool's disruption total above zero.
const nodeDisruption = 1.0

// poolTotals are a Balanced pool's price per hour and disruption cost, summed over all its
// nodes: candidates or not, every node is part of what a move is measured against.
type poolTotals struct {
	cost, disruption float64
}

// evictionCost is what evicting a pod costs, as Karpenter counts it: 1, raised or lowered by its
// controller.kubernetes.io/pod-deletion-cost (÷ 2^27) and priority (÷ 2^25), within [-10, 10].
// An unreadable deletion cost counts as unset, as the ReplicaSet controller treats it.
func evictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			cost += f / (1 << 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / (1 << 25)
	}
	return min(max(cost, -10), 10)
}

// disruptionOf is a node's disruption cost: the node's own plus each pod's eviction cost, pods
// that declare themselves free to move (cost ≤ 0) counting nothing.
func disruptionOf(pods []*corev1.Pod) float64 {
	cost := nodeDisruption
	for _, p := range pods {
		cost += max(0, evictionCost(p))
	}
	return cost
}

// balancedTotals sums, for each Balanced pool, the price and disruption cost of its nodes that
// are not being deleted. A node whose price is unknown adds its disruption but no cost.
func balancedTotals(c *state.Cluster, prices func(*karpv1.NodeClaim) (float64, bool)) map[string]poolTotals {
	balanced := map[string]bool{}
	for _, np := range c.NodePools {
		balanced[np.Name] = np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyBalanced
	}
	totals := map[string]poolTotals{}
	for _, nc := range c.NodeClaims {
		pool := nc.Labels[karpv1.LabelNodePool]
		if !balanced[pool] || nc.DeletionTimestamp != nil {
			continue
		}
		t := totals[pool]
		if price, ok := prices(nc); ok {
			t.cost += price
		}
		var pods []*corev1.Pod
		if node := c.NodeFor(nc); node != nil {
			pods = movingPods(c, node)
		}
		t.disruption += disruptionOf(pods)
		totals[pool] = t
	}
	return totals
}

// score is a move's savings fraction over its disruption fraction (0 without a saving or
// without totals to measure against, +Inf for a saving that disrupts nothing).
func (t poolTotals) score(saving, disruption float64) (score, savingFrac, disruptionFrac float64) {
	if t.cost <= 0 || t.disruption <= 0 || saving <= 0 {
		return 0, 0, 0
	}
	savingFrac, disruptionFrac = saving/t.cost, disruption/t.disruption
	if disruptionFrac == 0 {
		return math.Inf(1), savingFrac, 0
	}
	return savingFrac / disruptionFrac, savingFrac, disruptionFrac
}

// balancedVerdict judges a move of the candidates that saves saving per hour: each Balanced
// pool among them must approve it on its own share of the saving (split by the candidates'
// prices, as Karpenter splits a cross-pool move). Other pools do not score. A zero Verdict
// approves.
func balancedVerdict(totals map[string]poolTotals, cands []Candidate, saving float64) Verdict {
	price, byPool := 0.0, map[string][]Candidate{}
	for _, c := range cands {
		price += c.Price
		if c.Pool.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyBalanced {
			byPool[c.Pool.Name] = append(byPool[c.Pool.Name], c)
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		share, poolPrice, disruption := saving, 0.0, 0.0
		for _, c := range byPool[pool] {
			poolPrice += c.Price
			disruption += c.Disruption
		}
		if price > 0 {
			share = saving * poolPrice / price
		}
		if v := judge(pool, totals[pool], share, disruption); v.Reason != "" {
			return v
		}
	}
	return Verdict{}
}

// judge scores one pool's part of a move; a zero Verdict approves.
func judge(pool string, t poolTotals, saving, disruption float64) Verdict {
	s, sf, df := t.score(saving, disruption)
	if s >= balancedThreshold {
		return Verdict{}
	}
	return Verdict{"Balanced", fmt.Sprintf("NodePool %s is Balanced: the move would save %.1f %% of its cost for %.1f %% of its disruption (score %.2f, below %.2f)",
		pool, 100*sf, 100*df, s, balancedThreshold)}
}

// worthAlone says whether deleting the candidate outright would pass its pool's Balanced
// score: a deletion saves the most any move of it can, so a candidate that fails it is not
// simulated alone (Karpenter's filter too). Other pools, and a pool without a known cost to
// measure against, pass here (the move itself is still judged).
func worthAlone(totals map[string]poolTotals, c Candidate) Verdict {
	t := totals[c.Pool.Name]
	if c.Pool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyBalanced || t.cost <= 0 {
		return Verdict{}
	}
	return judge(c.Pool.Name, t, c.Price, c.Disruption)
}
