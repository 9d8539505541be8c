// Package disruption removes and replaces nodes karpool no longer needs, within the NodePools'
// disruption budgets, by Karpenter's methods in its order: expiration (forceful), drift,
// emptiness, multi-node and single-node consolidation. Each pass takes one snapshot; the
// decisions are pure functions of it (Tracker.Decide for emptiness, drifted and driftCommand,
// consolidationCandidates, consolidate and revalidate), the Controller does the I/O: the cloud's
// drift checks, taints, replacements through the provisioner, NodeClaim deletions (whose
// finalizer drains the node and terminates the instance), conditions and events that give each
// node's reason.
//
// Emptiness: a node of a pool whose consolidateAfter is not Never, that has run no pods but
// daemonset and static pods for consolidateAfter, is first tainted
// karpenter.sh/disrupted:NoSchedule; a pass at least the validation delay later deletes its
// NodeClaim if the node is still empty, or lifts the taint if a pod arrived before the taint did.
package disruption

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// DefaultValidationDelay is how long a node stays marked before it is deleted, and a
// consolidation decision waits before it is checked again and carried out (Karpenter waits 15 s
// before it acts on a decision, for the same reason: a pod the scheduler bound just before the
// taint shows up in that time). Options.ValidationDelay changes it.
const DefaultValidationDelay = 15 * time.Second

// nominationWindow is how long after its initialization a node is not considered empty: the
// provisioner planned pods onto it, and under load the scheduler may take that long to bind
// them (Karpenter protects a node it nominated pods to for twice the batch maximum, 20 s).
const nominationWindow = 20 * time.Second

// Tracker remembers, by NodeClaim name, since when each node has been seen empty and when it was
// marked. After a restart both start again, which can only delay a removal.
type Tracker struct {
	emptySince map[string]time.Time
	markedAt   map[string]time.Time
	// protected NodeClaims (replacements whose pods are still moving) are not empty until then.
	protected map[string]time.Time
	// held, if set, names NodeClaims another disruption marked; their taint stays.
	held func(claim string) bool
	// validation is how long a node stays marked before it is deleted.
	validation time.Duration
}

// NewTracker returns an empty Tracker that deletes a marked node DefaultValidationDelay later.
func NewTracker() *Tracker {
	return &Tracker{emptySince: map[string]time.Time{}, markedAt: map[string]time.Time{}, protected: map[string]time.Time{},
		validation: DefaultValidationDelay}
}

// protect keeps a NodeClaim from being seen empty until the given time.
func (t *Tracker) protect(claim string, until time.Time) { t.protected[claim] = until }

// Plan is what one pass does.
type Plan struct {
	Mark   []Candidate // taint now, delete at a later pass
	Delete []Candidate // marked at least the validation delay ago and still empty
	Unmark []Candidate // marked, but no longer to be removed
	// Blocked says, per NodePool, why empty nodes past consolidateAfter wait.
	Blocked map[string]string
	// Allowed is, per NodePool, how many nodes its budgets let be disrupted for emptiness.
	Allowed map[string]int
	// Eligible counts the empty nodes past consolidateAfter, budgets aside.
	Eligible int
}

// Candidate is a node with its NodeClaim and NodePool.
type Candidate struct {
	NodeClaim *karpv1.NodeClaim
	Node      *corev1.Node
	Pool      *karpv1.NodePool
	// EmptyFor is how long the node has been seen empty.
	EmptyFor time.Duration
	// Price is the node's price per hour, Pods the pods that would have to move (consolidation).
	Price float64
	Pods  []*corev1.Pod
	// Idle is the part of Price its pods leave unused (consolidation).
	Idle float64
	// Disruption is what moving its pods costs (Balanced scoring): see disruptionOf.
	Disruption float64
}

// poolNodes is one NodePool's initialized nodes as a pass sees them.
type poolNodes struct {
	pool       *karpv1.NodePool
	count      int // initialized nodes, the base of percentage budgets
	disrupting int // deleting, not Ready, or marked
	eligible   []Candidate
	marked     map[string]bool
}

// counted returns each pool's entry (counts only) and calls visit for each initialized node.
func counted(c *state.Cluster, visit func(p *poolNodes, nc *karpv1.NodeClaim, node *corev1.Node, initialized *karpv1.Condition)) map[string]*poolNodes {
	poolByName := map[string]*karpv1.NodePool{}
	for _, np := range c.NodePools {
		poolByName[np.Name] = np
	}
	pools := map[string]*poolNodes{}
	for _, nc := range c.NodeClaims {
		np, node := poolByName[nc.Labels[karpv1.LabelNodePool]], c.NodeFor(nc)
		initialized := state.Condition(nc, karpv1.ConditionTypeInitialized)
		if np == nil || node == nil || initialized == nil || initialized.Status != metav1.ConditionTrue {
			continue
		}
		p := pools[np.Name]
		if p == nil {
			p = &poolNodes{pool: np, marked: map[string]bool{}}
			pools[np.Name] = p
		}
		p.count++
		if nc.DeletionTimestamp != nil || hasDisruptedTaint(node) || !nodeReady(node) {
			p.disrupting++
		}
		if visit != nil {
			visit(p, nc, node, initialized)
		}
	}
	return pools
}

// budgets says, per pool, how many nodes its budgets allow to be disrupting for the reason now,
// and how many more may start: that less what is already being disrupted (none if a budget
// cannot be read).
func (t *Tracker) budgets(c *state.Cluster, reason karpv1.DisruptionReason, now time.Time) (allowed, left map[string]int) {
	allowed, left = map[string]int{}, map[string]int{}
	for name, p := range counted(c, nil) {
		// An unreadable budget allows nothing (AllowedDisruptions is 0 with its error), which
		// Decide reports; here it only leaves no room.
		n, _ := p.pool.AllowedDisruptions(reason, p.count, now)
		allowed[name] = n
		left[name] = max(n-p.disrupting, 0)
	}
	return allowed, left
}

// Decide looks at a snapshot and says which nodes to mark, delete and unmark.
func (t *Tracker) Decide(c *state.Cluster, now time.Time) Plan {
	plan := Plan{Blocked: map[string]string{}, Allowed: map[string]int{}}
	pools := t.survey(c, now, &plan)
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		p := pools[name]
		allowed, err := p.pool.AllowedDisruptions(karpv1.DisruptionReasonEmpty, p.count, now)
		plan.Allowed[name] = allowed
		plan.Eligible += len(p.eligible)
		budget := max(allowed-p.disrupting, 0)
		if err != nil {
			plan.Blocked[name] = err.Error()
			budget = 0
		}
		for _, cand := range p.eligible {
			switch {
			case p.marked[cand.NodeClaim.Name]:
				if now.Sub(t.markedAt[cand.NodeClaim.Name]) >= t.validation {
					plan.Delete = append(plan.Delete, cand)
				}
			case budget > 0:
				budget--
				t.markedAt[cand.NodeClaim.Name] = now
				plan.Mark = append(plan.Mark, cand)
			case plan.Blocked[name] == "":
				plan.Blocked[name] = fmt.Sprintf("disruption budgets allow %d node(s) of %d to be disrupted for emptiness, and %d are being disrupted",
					min(allowed, p.count), p.count, p.disrupting)
			}
		}
	}
	return plan
}

// survey walks the NodeClaims once: it counts each pool's initialized nodes and the ones being
// disrupted, updates the empty-since clocks, and lists the eligible empty nodes (oldest empty
// first) and the marked nodes that are no longer eligible (into plan.Unmark).
func (t *Tracker) survey(c *state.Cluster, now time.Time, plan *Plan) map[string]*poolNodes {
	emptyNow := map[string]bool{}
	pools := counted(c, func(p *poolNodes, nc *karpv1.NodeClaim, node *corev1.Node, initialized *karpv1.Condition) {
		if nc.DeletionTimestamp != nil || !empty(c, node) || now.Sub(initialized.LastTransitionTime.Time) < nominationWindow ||
			now.Before(t.protected[nc.Name]) {
			return
		}
		emptyNow[nc.Name] = true
		since, ok := t.emptySince[nc.Name]
		if !ok {
			since = now
			t.emptySince[nc.Name] = now
		}
		cand := Candidate{NodeClaim: nc, Node: node, Pool: p.pool, EmptyFor: now.Sub(since)}
		marked := hasDisruptedTaint(node)
		if marked {
			p.marked[nc.Name] = true
			if _, ok := t.markedAt[nc.Name]; !ok {
				t.markedAt[nc.Name] = now // marked before a restart: validate from now
			}
		}
		if !eligible(cand) {
			if marked {
				plan.Unmark = append(plan.Unmark, cand)
			}
			return
		}
		p.eligible = append(p.eligible, cand)
	})
	t.forget(c, emptyNow, now, plan)
	for _, p := range pools {
		slices.SortStableFunc(p.eligible, func(a, b Candidate) int {
			if a.EmptyFor != b.EmptyFor {
				return int(b.EmptyFor - a.EmptyFor)
			}
			return strings.Compare(a.NodeClaim.Name, b.NodeClaim.Name)
		})
	}
	return pools
}

// forget drops the clocks of nodes that are no longer empty, and unmarks marked nodes that got
// pods meanwhile (a pod bound just before the taint).
func (t *Tracker) forget(c *state.Cluster, emptyNow map[string]bool, now time.Time, plan *Plan) {
	for name := range t.emptySince {
		if !emptyNow[name] {
			delete(t.emptySince, name)
		}
	}
	for name, until := range t.protected {
		if !now.Before(until) {
			delete(t.protected, name)
		}
	}
	for _, nc := range c.NodeClaims {
		node := c.NodeFor(nc)
		if node == nil || nc.DeletionTimestamp != nil || emptyNow[nc.Name] || !hasDisruptedTaint(node) ||
			t.held != nil && t.held(nc.Name) {
			continue
		}
		plan.Unmark = append(plan.Unmark, Candidate{NodeClaim: nc, Node: node})
	}
	for name := range t.markedAt {
		if !emptyNow[name] {
			delete(t.markedAt, name)
		}
	}
}

// eligible: the pool consolidates (consolidateAfter is not Never), neither the NodeClaim nor
// the node carries karpenter.sh/do-not-disrupt, and the node has been empty for consolidateAfter.
func eligible(c Candidate) bool {
	after := c.Pool.Spec.Disruption.ConsolidateAfter.Duration
	// A static pool (spec.replicas) keeps its empty nodes, as in Karpenter.
	return after != nil && c.EmptyFor >= *after && c.Pool.Spec.Replicas == nil &&
		c.NodeClaim.Annotations[karpv1.AnnotationDoNotDisrupt] != "true" &&
		c.Node.Annotations[karpv1.AnnotationDoNotDisrupt] != "true"
}

// empty: no pod on the node that would have to move (daemonset, static, finished and
// terminating pods do not count), and no pending pod nominated to it: a node that was just
// launched for pods the scheduler has not bound yet is not empty.
func empty(c *state.Cluster, node *corev1.Node) bool {
	for _, p := range c.PodsOn(node.Name) {
		if p.DeletionTimestamp == nil && state.Reschedulable(p) {
			return false
		}
	}
	return true
}

func hasDisruptedTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
