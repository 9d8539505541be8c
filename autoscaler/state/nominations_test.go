package state

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

func pendingPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
}

// Nominations outlive the NodeClaim's node showing up (registration hands them to the
// kube-scheduler then), and go with the pod's binding or the NodeClaim.
func TestNominationsKeptUntilBoundOrClaimGone(t *testing.T) {
	launched := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "with-node"}, Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-1"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	waiting, boundPod, orphan := pendingPod("waiting"), pendingPod("bound"), pendingPod("orphan")
	boundPod.Spec.NodeName = "ip-1"
	n := NewNominations()
	n.Nominate("with-node", waiting, boundPod)
	n.Nominate("deleted-claim", orphan)
	n.Forget(New([]*corev1.Pod{waiting, boundPod, orphan}, []*corev1.Node{node}, []*karpv1.NodeClaim{launched}))
	got := n.Pods("with-node")
	if len(got) != 1 || got[0] != (types.NamespacedName{Namespace: "default", Name: "waiting"}) {
		t.Errorf("nominated to with-node: %v, want only default/waiting", got)
	}
	if got := n.Pods("deleted-claim"); len(got) != 0 {
		t.Errorf("nominations of a deleted NodeClaim kept: %v", got)
	}
}

// A NodeClaim's pods are handed off once: a later registration attempt (the node still closed
// for its cohort) gets the first time back, and after registration a hand-off is new again.
func TestNominationsHandOffOnce(t *testing.T) {
	n := NewNominations()
	t0 := time.Unix(1000, 0)
	if at, first := n.HandOff("c1", t0); !first || !at.Equal(t0) {
		t.Fatalf("first hand-off: %s %v, want %s true", at, first, t0)
	}
	if at, first := n.HandOff("c1", t0.Add(time.Second)); first || !at.Equal(t0) || !n.HandedOff("c1") {
		t.Errorf("second hand-off: %s %v, want %s false", at, first, t0)
	}
	n.Registered("c1")
	if n.HandedOff("c1") {
		t.Error("hand-off kept after registration")
	}
}

// A decision of one NodeClaim makes no cohort; a NodeClaim that is cleared leaves nothing
// behind, and the plans of other NodeClaims stay.
func TestNominationsCohortsAndClear(t *testing.T) {
	n := NewNominations()
	n.Decided([]string{"alone"})
	n.Decided([]string{"c1", "c2"})
	if got := n.Cohort("alone"); got != nil {
		t.Errorf("cohort of a NodeClaim created alone: %v", got)
	}
	if got := n.Cohort("c2"); len(got) != 2 {
		t.Errorf("cohort of c2: %v, want c1 and c2", got)
	}
	web, db := pendingPod("web"), pendingPod("db")
	n.Nominate("c1", web)
	n.Nominate("c2", db)
	n.HandOff("c1", time.Unix(0, 0))
	n.Clear("c1")
	if got := n.Planned(); len(got) != 1 || got[db.UID] != "c2" || got[web.UID] != "" {
		t.Errorf("planned %v, want only db on c2", got)
	}
	if n.HandedOff("c1") || n.Cohort("c1") != nil {
		t.Errorf("c1 not forgotten: handed off %v, cohort %v", n.HandedOff("c1"), n.Cohort("c1"))
	}
}

// A decision made while NodeClaims of earlier decisions wait for their nodes joins their
// cohort, so all of them open together; NodeClaims whose nodes registered or opened are not
// waited for again.
func TestLaterDecisionJoinsBootingCohort(t *testing.T) {
	n := NewNominations()
	n.Decided([]string{"a1", "a2"})
	n.Decided([]string{"b1"})
	for _, claim := range []string{"a1", "b1"} {
		if got := n.Cohort(claim); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
			t.Errorf("cohort of %s: %v, want a1, a2 and b1", claim, got)
		}
	}
	n.HandOff("a1", time.Unix(0, 0)) // its node registered
	n.Registered("a2")               // its node opened
	n.Decided([]string{"c1"})
	if got := n.Cohort("c1"); !slices.Equal(got, []string{"b1", "c1"}) {
		t.Errorf("cohort of c1: %v, want b1 and c1 (a1 registered, a2 open)", got)
	}
}

// A pod without its nomination gets it back from the pod watcher while its node is expected
// (booting, or registered and still closed), to the name expected; not before the launch, not
// once the node is open, and never when it was not planned.
func TestHandBack(t *testing.T) {
	n := NewNominations()
	p, other := pendingPod("p"), pendingPod("other")
	n.Nominate("c1", p)
	if node, ok := n.HandBack(p.UID); ok {
		t.Fatalf("handed back to %q before the NodeClaim launched", node)
	}
	n.Expect("c1", "ip-1")
	for i := range 3 {
		if node, ok := n.HandBack(p.UID); !ok || node != "ip-1" {
			t.Fatalf("booting node, hand-back %d: %q %v, want ip-1", i, node, ok)
		}
	}
	n.Expect("c1", "ip-1-registered")
	if node, ok := n.HandBack(p.UID); !ok || node != "ip-1-registered" {
		t.Errorf("registered, still closed: %q %v, want the name it registered as", node, ok)
	}
	if _, ok := n.HandBack(other.UID); ok {
		t.Error("a pod that was never planned was handed back")
	}
	n.Registered("c1")
	if node, ok := n.HandBack(p.UID); ok {
		t.Errorf("handed back to %q after the node opened", node)
	}
}
