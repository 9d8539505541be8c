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
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// maxMultiNode caps the candidates one multi-node decision looks at (Karpenter's cap too: the
// simulation grows with them).
const maxMultiNode = 100

// minSplitSavings is the least part of its price a single node must save to be split into
// several (karpool's addition): a split moves every pod of the node onto new nodes, and in the
// side-by-side benchmark one was split into five to save 1.5 %, then one of the five went again.
const minSplitSavings = 0.05

// minSpotToSpotTypes is how many cheaper instance types a single spot node's spot replacement
// needs, and how many it may launch as (Karpenter's number): with fewer, the launch would often
// land on a type that is itself replaced at the next pass, one step down at a time.
const minSpotToSpotTypes = 15

// rules are the settings a consolidation decision follows.
type rules struct {
	// minSavings applies unless a candidate's pool annotation says otherwise.
	minSavings MinSavings
	// spotToSpot allows spot nodes to be replaced by spot nodes (feature gate).
	spotToSpot bool
	// balanced holds the totals of the Balanced pools, whose moves are scored against them.
	balanced map[string]poolTotals
}

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
		pods := movingPods(c, node)
		out = append(out, Candidate{NodeClaim: nc, Node: node, Pool: np, Price: price, Pods: pods,
			Idle: idleCost(node, pods, price), Disruption: disruptionOf(pods)})
	}
	// Cheapest to disrupt first: fewest pods to move, then the most expensive node.
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(len(a.Pods), len(b.Pods)), cmp.Compare(b.Price, a.Price), strings.Compare(a.NodeClaim.Name, b.NodeClaim.Name))
	})
	return out, skipped
}

// idleCost is what a node costs beyond its pods' share: its price times the part of its
// allocatable cpu or memory, whichever its pods use more of, that stands idle.
func idleCost(node *corev1.Node, pods []*corev1.Pod, price float64) float64 {
	var used catalog.Resources
	for _, p := range pods {
		r, _ := scheduling.PodRequests(p)
		used[catalog.CPU] += r[catalog.CPU]
		used[catalog.Memory] += r[catalog.Memory]
	}
	alloc := node.Status.Allocatable
	cpu, mem := alloc.Cpu().MilliValue(), alloc.Memory().Value()
	if cpu <= 0 || mem <= 0 {
		return 0
	}
	share := max(float64(used[catalog.CPU])/float64(cpu), float64(used[catalog.Memory])/float64(mem))
	return price * max(0, 1-share)
}

// notCandidate says why a node cannot be consolidated now (a zero Verdict if it can). The
// messages stay the same from pass to pass while the cause does, so reporting them writes
// only on change.
func notCandidate(c *state.Cluster, nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, now time.Time) Verdict {
	if v := notDisruptable(nc, node); v.Reason != "" {
		return v
	}
	if np.Spec.Replicas != nil {
		// As in Karpenter: a static pool's node count is its replicas, not its pods' needs.
		return Verdict{"StaticNodePool", "its NodePool is static (spec.replicas): consolidation leaves its nodes alone"}
	}
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	if after == nil {
		return Verdict{"ConsolidateAfterNever", "its NodePool's consolidateAfter is Never"}
	}
	pods := movingPods(c, node)
	if len(pods) == 0 {
		return Verdict{"Empty", "it is empty: emptiness removes it after consolidateAfter"}
	}
	if np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty {
		return Verdict{"WhenEmpty", "its NodePool's consolidationPolicy is WhenEmpty and pods run on it"}
	}
	last, _ := state.QuietSince(nc) // notDisruptable checked it is initialized
	if now.Sub(last) < *after {
		return Verdict{"ConsolidateAfter", fmt.Sprintf("consolidateAfter (%s) has not passed since the last pod event, at %s",
			*after, last.UTC().Format(time.RFC3339))}
	}
	return podsHold(c, pods, now)
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

// podsHold names a pod that may not be evicted now: do-not-disrupt (for good or until its
// grace period ends), or a PodDisruptionBudget that allows no disruption.
func podsHold(c *state.Cluster, pods []*corev1.Pod, now time.Time) Verdict {
	for _, p := range pods {
		if held, until, _ := state.DoNotDisrupt(p, now); held {
			msg := fmt.Sprintf("pod %s/%s has the karpenter.sh/do-not-disrupt annotation", p.Namespace, p.Name)
			if !until.IsZero() {
				msg += " until " + until.UTC().Format(time.RFC3339)
			}
			return Verdict{"PodDoNotDisrupt", msg}
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

// consolidate finds one command: first the largest group of candidates (in disruption order,
// and idlest first) that can go with fewer, cheaper replacements, then single nodes, idlest
// first, each of which may also be replaced by several nodes when together they cost less, and
// which others may join (grow). Karpenter replaces a group by one node at most and never splits
// a node: a scale-down would stay on the large nodes of the scale-out, and a fleet of many small
// nodes would shrink by a budget's worth of deletions per step only. budget gives how many
// more nodes of each pool may be disrupted; a command must save at least the minimum of each
// candidate's pool (the rules' unless the pool's annotation says otherwise). simulate plans the
// cluster without some nodes. The verdicts say why candidates looked at alone were not
// consolidated.
func consolidate(cands []Candidate, budget map[string]int, r rules, simulate func(nodes map[string]bool) *scheduling.Result) (*Command, map[string]Verdict) {
	verdicts := map[string]Verdict{}
	var within []Candidate
	left := maps.Clone(budget)
	for _, cand := range cands {
		_, err := minSavingsFor(cand.Pool, r.minSavings)
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
	// Two orders: Karpenter's (cheapest to disrupt first) and the most idle cost first, which
	// finds the big half-empty nodes a scale-down leaves; the budget is the scarce resource, so
	// the larger saving wins.
	idlest := slices.Clone(within)
	slices.SortStableFunc(idlest, func(a, b Candidate) int { return cmp.Compare(b.Idle, a.Idle) })
	if cmd := larger(multiNode(within, r, simulate), multiNode(idlest, r, simulate)); cmd != nil {
		return cmd, verdicts
	}
	for _, cand := range idlest {
		if v := worthAlone(r.balanced, cand); v.Reason != "" {
			verdicts[cand.NodeClaim.Name] = v
			continue
		}
		cmd, v := evaluate([]Candidate{cand}, r, simulate, -1)
		if cmd != nil {
			cmd.Method = "single"
			return grow(cmd, idlest, r, simulate), verdicts
		}
		verdicts[cand.NodeClaim.Name] = v
	}
	return nil, verdicts
}

// maxGrow caps the candidates grow tries to add (one simulation each).
const maxGrow = 20

// grow adds to a single-node command the other candidates, idlest first, that can go with it
// for a larger saving (fewer new nodes than candidates, strictly cheaper): the prefixes the
// multi-node search tries miss groups such as two half-empty nodes whose pods fit on a third,
// and a budget-sized step that moves one node makes a scale-down take many steps.
func grow(cmd *Command, cands []Candidate, r rules, simulate func(map[string]bool) *scheduling.Result) *Command {
	group := cmd.Candidates
	for i, cand := range cands {
		if i == maxGrow {
			break
		}
		if slices.ContainsFunc(group, func(g Candidate) bool { return g.NodeClaim.Name == cand.NodeClaim.Name }) {
			continue
		}
		next := append(slices.Clip(group), cand)
		if more, _ := evaluate(next, r, simulate, len(next)-1); more != nil && more.Price-more.NewPrice > cmd.Price-cmd.NewPrice {
			more.Method = "multi"
			cmd, group = more, next
		}
	}
	return cmd
}

// multiNode finds the longest prefix of cands (at least two) that can be consolidated: all of
// them, or else by binary search. All are tried first because a group may be replaced by fewer
// nodes than it has, which a longer prefix allows more of: success is not monotone in length.
func multiNode(cands []Candidate, r rules, simulate func(map[string]bool) *scheduling.Result) *Command {
	if len(cands) < 2 {
		return nil
	}
	best, _ := evaluate(cands, r, simulate, len(cands)-1)
	lo, hi := 2, len(cands)-1
	if best != nil {
		lo = hi + 1
	}
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd, _ := evaluate(cands[:mid], r, simulate, mid-1); cmd != nil {
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

// strandedPod finds a pod of the candidates the simulation could not place. Pods that were
// pending already and still fit nowhere do not count against the candidates (Karpenter's rule:
// all non-pending pods must schedule).
func strandedPod(res *scheduling.Result, cands []Candidate) (scheduling.Unschedulable, bool) {
	moving := map[types.UID]bool{}
	for _, c := range cands {
		for _, p := range c.Pods {
			moving[p.UID] = true
		}
	}
	for _, u := range res.Unschedulable {
		if moving[u.Pod.UID] {
			return u, true
		}
	}
	return scheduling.Unschedulable{}, false
}

// larger returns the command that saves more per hour (a when equal).
func larger(a, b *Command) *Command {
	if a == nil || b != nil && b.Price-b.NewPrice > a.Price-a.NewPrice {
		return b
	}
	return a
}

// evaluate simulates the candidates away. Their pods must all find room, on the other nodes and
// at most maxNew new NodeClaims (any number if negative), and the new NodeClaims must cost
// strictly less than the candidates wherever they launch: each keeps only the instance types
// that keep it so, and one that may be spot launches as spot (its price was planned so; an
// on-demand fallback could cost more than the candidates, Karpenter's rule too). Spot nodes are
// replaced by spot only with the rules' spotToSpot, a single node then with at least
// minSpotToSpotTypes cheaper types. The saving must reach the strictest minimum of the
// candidates' pools. Without a command, the verdict says why.
func evaluate(cands []Candidate, r rules, simulate func(map[string]bool) *scheduling.Result, maxNew int) (*Command, Verdict) {
	nodes := map[string]bool{}
	price, allSpot := 0.0, true
	var least MinSavings
	for _, c := range cands {
		nodes[c.Node.Name] = true
		price += c.Price
		allSpot = allSpot && c.NodeClaim.Labels[karpv1.LabelCapacityType] == karpv1.CapacityTypeSpot
		m, _ := minSavingsFor(c.Pool, r.minSavings) // consolidate left out candidates whose annotation is invalid
		least = MinSavings{Fraction: max(least.Fraction, m.Fraction), PerHour: max(least.PerHour, m.PerHour)}
	}
	res := simulate(nodes)
	if u, ok := strandedPod(res, cands); ok {
		return nil, Verdict{"PodsDoNotFit", fmt.Sprintf("pod %s/%s would fit nowhere else: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)}
	}
	cmd := &Command{Candidates: cands, Price: price, Reason: karpv1.DisruptionReasonUnderutilized}
	newPrice := res.TotalPricePerHour()
	if !least.enough(price, newPrice) && newPrice < price {
		return nil, Verdict{"MinSavings", fmt.Sprintf("consolidating would save $%.4f/h of $%.4f/h, less than the minimum savings (%s)", price-newPrice, price, least)}
	}
	switch {
	case len(res.NodeClaims) == 0:
	case maxNew >= 0 && len(res.NodeClaims) > maxNew:
		return nil, Verdict{"NoCheaperFit", fmt.Sprintf("its pods would need %d new nodes", len(res.NodeClaims))}
	case newPrice >= price:
		return nil, Verdict{"NoCheaperFit", fmt.Sprintf("no cheaper placement: its pods elsewhere would cost $%.4f/h, it costs $%.4f/h", newPrice, price)}
	}
	// Balanced pools score the planned saving, as Karpenter does (the cheapest offering of each
	// replacement), before the replacements are narrowed.
	if v := balancedVerdict(r.balanced, cands, price-newPrice); v.Reason != "" {
		return nil, v
	}
	if len(res.NodeClaims) == 0 {
		return cmd, Verdict{}
	}
	// Share the saving: each replacement may launch as any type up to its cheapest price plus an
	// equal part of it, so whatever the fleet picks, the total stays below the candidates'.
	slack := (price - newPrice) / float64(len(res.NodeClaims))
	for i := range res.NodeClaims {
		rc := &res.NodeClaims[i]
		var spot []string
		most := 0
		if slices.Contains(rc.CapacityTypes, karpv1.CapacityTypeSpot) {
			spot = []string{karpv1.CapacityTypeSpot}
			switch {
			case allSpot && !r.spotToSpot:
				return nil, Verdict{"SpotToSpot", "its pods need a new node, and SpotToSpotConsolidation is disabled: a spot node is deleted, not replaced by spot"}
			case allSpot && len(cands) == 1:
				most = minSpotToSpotTypes
			}
		}
		if !rc.Narrow(spot, rc.PricePerHour()+slack, most) {
			return nil, Verdict{"NoCheaperFit", "no instance type keeps a replacement cheaper wherever it launches"}
		}
		if most > 0 && len(rc.InstanceTypes) < most {
			return nil, Verdict{"SpotToSpot", fmt.Sprintf("spot-to-spot consolidation needs %d cheaper instance types, %d are", most, len(rc.InstanceTypes))}
		}
		cmd.NewPrice += rc.WorstPricePerHour()
	}
	// The split is judged at the price it may launch at, not the cheapest.
	if len(cands) == 1 && len(res.NodeClaims) > 1 && price-cmd.NewPrice < minSplitSavings*price {
		return nil, Verdict{"NoCheaperFit", fmt.Sprintf("splitting it into %d nodes would save %.1f %%, less than the %.0f %% a split must save",
			len(res.NodeClaims), 100*(price-cmd.NewPrice)/price, 100*minSplitSavings)}
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
