package state

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Nominations is the one record of where the provisioner planned pods while their NodeClaims
// come up, shared by the provisioner (which writes it when it creates NodeClaims and reads it
// when it plans again) and the NodeClaim lifecycle (which reads it when a NodeClaim's node
// registers). It holds three things:
//
//   - each pending pod's planned NodeClaim: while the NodeClaim has no node, the pod is not
//     pending as far as the autoscaler is concerned (its capacity is on its way) and the room
//     it takes on the NodeClaim is not free;
//   - each NodeClaim's cohort, the NodeClaims created by the same decision, whose nodes open
//     together;
//   - when registration handed each NodeClaim's pods to the kube-scheduler (status.
//     nominatedNodeName), which ends its wait for the rest of the cohort;
//   - the node name each launched NodeClaim expects (the cloud's hint), to which its pods are
//     handed while the instance boots: a nomination to it is not stale while the node is not
//     there yet.
//
// It lives in memory only: after a restart the pods are planned again, as in Karpenter. All
// methods are safe for concurrent use.
type Nominations struct {
	mu        sync.Mutex
	planned   map[types.UID]nomination
	cohorts   map[string][]string
	handedOff map[string]time.Time
	expected  map[string]string
	opened    map[string]bool
}

// nomination is one pod's planned NodeClaim.
type nomination struct {
	claim string
	pod   types.NamespacedName
}

// NewNominations returns an empty record.
func NewNominations() *Nominations {
	return &Nominations{planned: map[types.UID]nomination{}, cohorts: map[string][]string{}, handedOff: map[string]time.Time{},
		expected: map[string]string{}, opened: map[string]bool{}}
}

// Nominate records that the pods will run on the NodeClaim (replacing earlier plans for them).
func (n *Nominations) Nominate(claim string, pods ...*corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range pods {
		n.planned[p.UID] = nomination{claim: claim, pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}}
	}
}

// Planned returns every pod's planned NodeClaim as one consistent copy, for a planning round
// that must not see a decision half recorded.
func (n *Nominations) Planned() map[types.UID]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[types.UID]string, len(n.planned))
	for uid, nom := range n.planned {
		out[uid] = nom.claim
	}
	return out
}

// Pods lists the pods planned onto the NodeClaim that are not known to be bound yet.
func (n *Nominations) Pods(claim string) []types.NamespacedName {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []types.NamespacedName
	for _, nom := range n.planned {
		if nom.claim == claim {
			out = append(out, nom.pod)
		}
	}
	return out
}

// Decided records the NodeClaims created by one decision as a cohort, together with the
// NodeClaims of earlier cohorts whose nodes have not registered yet: decisions made while
// instances boot (a batch cut short, its stragglers a second later) then open as one, instead
// of the first nodes to open drawing the pods handed to the others (the kube-scheduler drops a
// nomination it cannot honour). A single NodeClaim with no one to wait for is not recorded.
func (n *Nominations) Decided(claims []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	all := slices.Clone(claims)
	for name := range n.cohorts {
		if _, registered := n.handedOff[name]; !registered && !n.opened[name] && !slices.Contains(all, name) {
			all = append(all, name)
		}
	}
	if len(all) < 2 {
		return
	}
	slices.Sort(all)
	for _, name := range all {
		n.cohorts[name] = all
	}
}

// Cohort lists the NodeClaims created by the same decision as this one (itself included), or
// nil.
func (n *Nominations) Cohort(claim string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cohorts[claim]
}

// HandOff records that the NodeClaim's pods were handed to the kube-scheduler at now, unless
// they were already; it returns when they first were and whether that is now.
func (n *Nominations) HandOff(claim string, now time.Time) (at time.Time, first bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if at, ok := n.handedOff[claim]; ok {
		return at, false
	}
	n.handedOff[claim] = now
	return now, true
}

// HandedOff reports whether the NodeClaim's pods were handed to the kube-scheduler.
func (n *Nominations) HandedOff(claim string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.handedOff[claim]
	return ok
}

// Expect records the node name a launched NodeClaim's instance will register under.
func (n *Nominations) Expect(claim, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.expected[claim] = node
}

// Expected is the node name the NodeClaim expects ("" when unknown or registered).
func (n *Nominations) Expected(claim string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.expected[claim]
}

// ExpectedNodes are the names of the nodes launched NodeClaims still wait for.
func (n *Nominations) ExpectedNodes() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]bool, len(n.expected))
	for _, node := range n.expected {
		out[node] = true
	}
	return out
}

// Registered forgets the NodeClaim's hand-off: its node is open, so no cohort waits for it (a
// registered NodeClaim is not waited for either way) and a later hand-off would be new.
func (n *Nominations) Registered(claim string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.handedOff, claim)
	delete(n.expected, claim)
	n.opened[claim] = true
}

// HandBack returns the node a pending pod without a nomination was planned onto while that node
// is on its way (booting, or registered and kept closed for its cohort): the kube-scheduler
// drops the nomination of a pod it tries before the node opens, and a pod it had not tried
// at the hand-off has none yet. Without one, the pod's first try on the open nodes may take
// another planned pod's room, and that pod then waits for a node of its own. Once the node is
// open, a pod the scheduler fails gets none: it did not fit, and needs the provisioner.
func (n *Nominations) HandBack(pod types.UID) (node string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	nom, planned := n.planned[pod]
	if !planned || n.expected[nom.claim] == "" {
		return "", false
	}
	return n.expected[nom.claim], true
}

// Clear forgets everything about a NodeClaim that is gone.
func (n *Nominations) Clear(claim string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.handedOff, claim)
	delete(n.expected, claim)
	delete(n.opened, claim)
	delete(n.cohorts, claim)
	for uid, nom := range n.planned {
		if nom.claim == claim {
			delete(n.planned, uid)
		}
	}
}

// Forget drops what a snapshot shows is over: the plans of pods that are bound or gone, and
// everything about NodeClaims that are gone or being deleted. The plans for a NodeClaim whose
// node exists stay until its pods are bound: registration hands them to the kube-scheduler
// (the engine then counts the pods against the node itself).
func (n *Nominations) Forget(c *Cluster) {
	pending := map[types.UID]bool{}
	for _, pod := range c.Pods {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			pending[pod.UID] = true
		}
	}
	claims := map[string]bool{}
	for _, nc := range c.NodeClaims {
		if nc.DeletionTimestamp == nil {
			claims[nc.Name] = true
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for uid, nom := range n.planned {
		if !pending[uid] || !claims[nom.claim] {
			delete(n.planned, uid)
		}
	}
	for name := range n.cohorts {
		if !claims[name] {
			delete(n.cohorts, name)
		}
	}
	for name := range n.expected {
		if !claims[name] {
			delete(n.expected, name)
		}
	}
	for name := range n.opened {
		if !claims[name] {
			delete(n.opened, name)
		}
	}
}
