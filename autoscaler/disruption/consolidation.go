package disruption

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// maxMultiNode caps the candidates one multi-node decision looks at (Karpenter's cap too: the
// simulation grows with them).
const maxMultiNode = 100

// Command is one consolidation decision: the candidates go, the replacements (if any) are
// launched and initialized first.
type Command struct {
	Candidates   []Candidate
	Replacements []scheduling.NodeClaim
	// Reason is Underutilized or Drifted.
	Reason karpv1.DisruptionReason
	// Method is "multi" (several candidates at once), "single" or "drift".
	Method string
	// Price is what the candidates cost per hour; NewPrice what the replacements cost at most.
	Price, NewPrice float64
}

// reason is the command's reason as metrics and logs spell it (underutilized, drifted).
func (c *Command) reason() string { return strings.ToLower(string(c.Reason)) }

// Decision names the command's action: delete, or replace.
func (c *Command) Decision() string {
	if len(c.Replacements) == 0 {
		return "delete"
	}
	return "replace"
}

// Key identifies the command by its candidates (a later pass validates the same set).
func (c *Command) Key() string {
	names := make([]string, len(c.Candidates))
	for i, cand := range c.Candidates {
		names[i] = cand.NodeClaim.Name
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// Verdict says why a node is not consolidated: a short reason (for the NodeClaim's
// Consolidatable condition) and a message naming what holds it.
type Verdict struct {
	Reason, Message string
}

// consolidationCandidates are the underused nodes of pools that consolidate them: initialized
// and Ready, not empty (emptiness handles those), no pod event for consolidateAfter, nothing
// opting out, every pod evictable now. The verdicts say, per NodeClaim, why one is not a
// candidate.
func consolidationCandidates(c *state.Cluster, prices func(*karpv1.NodeClaim) (float64, bool), now time.Time) ([]Candidate, map[string]Verdict) {
	poolByName := map[string]*karpv1.NodePool{}
	for _, np := range c.NodePools {
		poolByName[np.Name] = np
	}
	var out []Candidate
	skipped := map[string]Verdict{}
	for _, nc := range c.NodeClaims {
		np, node := poolByName[nc.Labels[karpv1.LabelNodePool]], c.NodeFor(nc)
		if np == nil || node == nil {
			continue
		}
		if v := notCandidate(c, nc, node, np, now); v.Reason != "" {
			skipped[nc.Name] = v
			continue
		}
		price, ok := prices(nc)
		if !ok {
			skipped[nc.Name] = Verdict{"UnknownPrice", "its price is unknown: the pool no longer offers its instance type, zone or capacity type"}
			continue
		}
		out = append(out, Candidate{NodeClaim: nc, Node: node, Pool: np, Price: price, Pods: movingPods(c, node)})
	}
	// Cheapest to disrupt first: fewest pods to move, then the most expensive node.
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(len(a.Pods), len(b.Pods)), cmp.Compare(b.Price, a.Price), strings.Compare(a.NodeClaim.Name, b.NodeClaim.Name))
	})
	return out, skipped
}

// notCandidate says why a node cannot be consolidated now (a zero Verdict if it can). The
// messages stay the same from pass to pass while the cause does, so reporting them writes
// only on change.
func notCandidate(c *state.Cluster, nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, now time.Time) Verdict {
	if v := notDisruptable(nc, node); v.Reason != "" {
		return v
	}
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	if after == nil {
		return Verdict{"ConsolidateAfterNever", "its NodePool's consolidateAfter is Never"}
	}
	pods := movingPods(c, node)
	if len(pods) == 0 {
		return Verdict{"Empty", "it is empty: emptiness removes it after consolidateAfter"}
	}
	if np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		return Verdict{"WhenEmpty", "its NodePool's consolidationPolicy is WhenEmpty and pods run on it"}
	}
	initialized := state.Condition(nc, karpv1.ConditionTypeInitialized)
	last := initialized.LastTransitionTime.Time
	if nc.Status.LastPodEventTime.After(last) {
		last = nc.Status.LastPodEventTime.Time
	}
	if now.Sub(last) < *after {
		return Verdict{"ConsolidateAfter", fmt.Sprintf("consolidateAfter (%s) has not passed since the last pod event, at %s",
			*after, last.UTC().Format(time.RFC3339))}
	}
	return podsHold(c, pods)
}

// notDisruptable says why a node cannot be voluntarily disrupted at all now: it is not up, is
// already going, or opts out.
func notDisruptable(nc *karpv1.NodeClaim, node *corev1.Node) Verdict {
	initialized := state.Condition(nc, karpv1.ConditionTypeInitialized)
	switch {
	case nc.DeletionTimestamp != nil:
		return Verdict{"Deleting", "it is being deleted"}
	case initialized == nil || initialized.Status != metav1.ConditionTrue:
		return Verdict{"NotInitialized", "it is not initialized"}
	case !nodeReady(node):
		return Verdict{"NodeNotReady", "its node is not Ready"}
	case hasDisruptedTaint(node):
		return Verdict{"Disrupting", "it is being disrupted"}
	case nc.Annotations[karpv1.AnnotationDoNotDisrupt] == "true" || node.Annotations[karpv1.AnnotationDoNotDisrupt] == "true":
		return Verdict{"DoNotDisrupt", "it has the karpenter.sh/do-not-disrupt annotation"}
	}
	return Verdict{}
}

// podsHold names a pod that may not be evicted now: do-not-disrupt, or a PodDisruptionBudget
// that allows no disruption.
func podsHold(c *state.Cluster, pods []*corev1.Pod) Verdict {
	for _, p := range pods {
		if p.Annotations[karpv1.AnnotationDoNotDisrupt] == "true" {
			return Verdict{"PodDoNotDisrupt", fmt.Sprintf("pod %s/%s has the karpenter.sh/do-not-disrupt annotation", p.Namespace, p.Name)}
		}
		if pdb := blockingPDB(c.PDBs, p); pdb != nil {
			return Verdict{"PodDisruptionBudget", fmt.Sprintf("PodDisruptionBudget %s/%s allows no disruption of pod %s/%s", pdb.Namespace, pdb.Name, p.Namespace, p.Name)}
		}
	}
	return Verdict{}
}

// movingPods are the pods that would have to move if the node went.
func movingPods(c *state.Cluster, node *corev1.Node) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range c.PodsOn(node.Name) {
		if p.Spec.NodeName == node.Name && p.DeletionTimestamp == nil && state.Reschedulable(p) {
			out = append(out, p)
		}
	}
	return out
}

// blockingPDB returns a PodDisruptionBudget that selects the pod and allows no disruption now.
func blockingPDB(pdbs []*policyv1.PodDisruptionBudget, p *corev1.Pod) *policyv1.PodDisruptionBudget {
	for _, pdb := range pdbs {
		if pdb.Namespace != p.Namespace || pdb.Status.DisruptionsAllowed > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		return pdb
	}
	return nil
}

// consolidate finds one command: first the largest group of candidates (in disruption order)
// that can go with at most one cheaper replacement, then single nodes, each of which may also
// be replaced by several nodes when together they cost less (Karpenter never splits a node; a
// scale-down would otherwise stay on the large nodes of the scale-out). budget gives how many
// more nodes of each pool may be disrupted; a command must save at least the minimum of each
// candidate's pool (def unless the pool's annotation says otherwise). simulate plans the
// cluster without some nodes. The verdicts say why candidates looked at alone were not
// consolidated.
func consolidate(cands []Candidate, budget map[string]int, def MinSavings, simulate func(nodes map[string]bool) *scheduling.Result) (*Command, map[string]Verdict) {
	verdicts := map[string]Verdict{}
	var within []Candidate
	left := maps.Clone(budget)
	for _, cand := range cands {
		_, err := minSavingsFor(cand.Pool, def)
		switch {
		case err != nil:
			verdicts[cand.NodeClaim.Name] = Verdict{"MinSavings", err.Error()}
		case left[cand.Pool.Name] <= 0:
			verdicts[cand.NodeClaim.Name] = Verdict{"Budget", fmt.Sprintf("NodePool %s's disruption budgets allow no more nodes to be disrupted for Underutilized now", cand.Pool.Name)}
		case len(within) == maxMultiNode:
			verdicts[cand.NodeClaim.Name] = Verdict{"Later", fmt.Sprintf("only %d candidates are looked at per pass", maxMultiNode)}
		default:
			left[cand.Pool.Name]--
			within = append(within, cand)
		}
	}
	if cmd := multiNode(within, def, simulate); cmd != nil {
		return cmd, verdicts
	}
	for _, cand := range within {
		cmd, v := evaluate([]Candidate{cand}, def, simulate, true)
		if cmd != nil {
			cmd.Method = "single"
			return cmd, verdicts
		}
		verdicts[cand.NodeClaim.Name] = v
	}
	return nil, verdicts
}

// multiNode binary-searches the longest prefix of cands (at least two) that can be consolidated.
func multiNode(cands []Candidate, def MinSavings, simulate func(map[string]bool) *scheduling.Result) *Command {
	var best *Command
	lo, hi := 2, len(cands)
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd, _ := evaluate(cands[:mid], def, simulate, false); cmd != nil {
			best, lo = cmd, mid+1
		} else {
			hi = mid - 1
		}
	}
	if best != nil {
		best.Method = "multi"
	}
	return best
}

// evaluate simulates the candidates away. Their pods must all find room (on the other nodes and
// at most one new NodeClaim, or several if split) and the new NodeClaims must cost strictly
// less than the candidates; each keeps only instance types that keep it so. A spot candidate is
// only deleted, never replaced (Karpenter allows spot-to-spot replacement only behind a feature
// gate). The saving must reach the strictest minimum of the candidates' pools. Without a
// command, the verdict says why.
func evaluate(cands []Candidate, def MinSavings, simulate func(map[string]bool) *scheduling.Result, split bool) (*Command, Verdict) {
	nodes := map[string]bool{}
	price, spot := 0.0, false
	var least MinSavings
	for _, c := range cands {
		nodes[c.Node.Name] = true
		price += c.Price
		spot = spot || c.NodeClaim.Labels[karpv1.LabelCapacityType] == karpv1.CapacityTypeSpot
		m, _ := minSavingsFor(c.Pool, def) // consolidate left out candidates whose annotation is invalid
		least = MinSavings{Fraction: max(least.Fraction, m.Fraction), PerHour: max(least.PerHour, m.PerHour)}
	}
	res := simulate(nodes)
	if len(res.Unschedulable) > 0 {
		u := res.Unschedulable[0]
		return nil, Verdict{"PodsDoNotFit", fmt.Sprintf("pod %s/%s would fit nowhere else: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)}
	}
	cmd := &Command{Candidates: cands, Price: price, Reason: karpv1.DisruptionReasonUnderutilized}
	newPrice := res.TotalPricePerHour()
	if !least.enough(price, newPrice) && newPrice < price {
		return nil, Verdict{"MinSavings", fmt.Sprintf("consolidating would save $%.4f/h of $%.4f/h, less than the minimum savings (%s)", price-newPrice, price, least)}
	}
	if len(res.NodeClaims) == 0 {
		return cmd, Verdict{}
	}
	switch {
	case spot:
		return nil, Verdict{"SpotToSpot", "its pods need a new node, and a spot node is only deleted, never replaced"}
	case len(res.NodeClaims) > 1 && !split:
		return nil, Verdict{"NoCheaperFit", "its pods would need several new nodes"}
	case newPrice >= price:
		return nil, Verdict{"NoCheaperFit", fmt.Sprintf("no cheaper placement: its pods elsewhere would cost $%.4f/h, it costs $%.4f/h", newPrice, price)}
	}
	// Share the saving: each replacement may launch as any type up to its cheapest price plus an
	// equal part of it, so whatever the fleet picks, the total stays below the candidates'.
	slack := (price - newPrice) / float64(len(res.NodeClaims))
	for i := range res.NodeClaims {
		rc := &res.NodeClaims[i]
		limit := rc.PricePerHour() + slack
		rc.InstanceTypes = slices.DeleteFunc(slices.Clone(rc.InstanceTypes), func(o scheduling.InstanceTypeOption) bool {
			return o.PricePerHour >= limit
		})
		cmd.NewPrice += rc.InstanceTypes[len(rc.InstanceTypes)-1].PricePerHour
	}
	cmd.Replacements = res.NodeClaims
	return cmd, Verdict{}
}

// nodePrice looks up a NodeClaim's price among its pool's instance types.
func nodePrice(pools []scheduling.Pool) func(*karpv1.NodeClaim) (float64, bool) {
	byPool := map[string][]catalog.InstanceType{}
	for _, p := range pools {
		byPool[p.NodePool.Name] = p.InstanceTypes
	}
	return func(nc *karpv1.NodeClaim) (float64, bool) {
		return catalog.PriceOf(byPool[nc.Labels[karpv1.LabelNodePool]], nc.Labels)
	}
}
