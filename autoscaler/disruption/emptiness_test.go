package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// cluster builds a snapshot: one NodePool "default" (consolidateAfter 1m unless changed, the
// given budgets), and per name a launched, initialized NodeClaim with a Ready node of the same
// name, plus the pods.
type cluster struct {
	pool   *karpv1.NodePool
	claims []*karpv1.NodeClaim
	nodes  []*corev1.Node
	pods   []*corev1.Pod
}

func newCluster(budgets []karpv1.Budget, names ...string) *cluster {
	c := &cluster{pool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	c.pool.Spec.Disruption.ConsolidateAfter.Duration = ptr.To(time.Minute)
	c.pool.Spec.Disruption.Budgets = budgets
	for _, name := range names {
		c.claims = append(c.claims, &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "default"}},
			Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + name,
				Conditions: []karpv1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue}}},
		})
		c.nodes = append(c.nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + name},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	return c
}

// run adds a pod bound to the node.
func (c *cluster) run(node, name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	c.pods = append(c.pods, p)
	return p
}

func (c *cluster) node(name string) *corev1.Node {
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	panic(name)
}

// apply does to the objects what the controller would do with the plan.
func (c *cluster) apply(p Plan) {
	for _, cand := range p.Unmark {
		n := c.node(cand.Node.Name)
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
	}
	for _, cand := range p.Mark {
		n := c.node(cand.Node.Name)
		n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	}
	for _, cand := range p.Delete {
		cand.NodeClaim.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
	}
}

func (c *cluster) snapshot() *state.Cluster {
	s := state.New(c.pods, c.nodes, c.claims)
	s.NodePools = []*karpv1.NodePool{c.pool}
	return s
}

func claimNames(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.NodeClaim.Name)
	}
	return out
}

// The workshop's path: an empty node is marked once consolidateAfter has passed, deleted after
// the validation delay; busy nodes are left alone.
func TestEmptyNodeMarkedThenDeleted(t *testing.T) {
	c := newCluster(nil, "empty", "busy")
	c.run("busy", "web")
	ds := c.run("empty", "logging-agent")
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true), APIVersion: appsv1.SchemeGroupVersion.String()}}
	done := c.run("empty", "job")
	done.Status.Phase = corev1.PodSucceeded
	tr, t0 := NewTracker(), time.Unix(1000, 0)

	steps := []struct {
		at                   time.Duration
		mark, delete, unmark []string
	}{
		{at: 0},
		{at: 59 * time.Second},
		{at: time.Minute, mark: []string{"empty"}},
		{at: time.Minute + 10*time.Second},
		{at: time.Minute + DefaultValidationDelay, delete: []string{"empty"}},
	}
	for _, s := range steps {
		p := tr.Decide(c.snapshot(), t0.Add(s.at))
		if got := claimNames(p.Mark); !slices.Equal(got, s.mark) {
			t.Errorf("at %s: marked %v, want %v", s.at, got, s.mark)
		}
		if got := claimNames(p.Delete); !slices.Equal(got, s.delete) {
			t.Errorf("at %s: deleted %v, want %v", s.at, got, s.delete)
		}
		if len(p.Unmark) > 0 {
			t.Errorf("at %s: unmarked %v", s.at, claimNames(p.Unmark))
		}
		c.apply(p)
	}
}

// A pod bound just before the taint landed: the node is unmarked and its clock starts over.
func TestMarkedNodeThatGotAPodIsUnmarked(t *testing.T) {
	c := newCluster(nil, "a")
	tr, t0 := NewTracker(), time.Unix(1000, 0)
	tr.Decide(c.snapshot(), t0)
	p := tr.Decide(c.snapshot(), t0.Add(time.Minute))
	c.apply(p)
	c.run("a", "late")
	p = tr.Decide(c.snapshot(), t0.Add(time.Minute+DefaultValidationDelay))
	if got := claimNames(p.Unmark); !slices.Equal(got, []string{"a"}) || len(p.Delete) > 0 {
		t.Fatalf("unmarked %v, deleted %v; want a unmarked and nothing deleted", got, claimNames(p.Delete))
	}
	c.apply(p)
	c.pods = nil
	if p := tr.Decide(c.snapshot(), t0.Add(2*time.Minute)); len(p.Mark) > 0 {
		t.Errorf("marked %v right after its pod left: the empty clock did not start over", claimNames(p.Mark))
	}
}

// Budgets: at most the allowed nodes are disrupting at once, deleting and not-Ready nodes
// count against it, and the pool says why the rest wait.
func TestEmptinessHonoursBudgets(t *testing.T) {
	c := newCluster([]karpv1.Budget{{Nodes: "3"}}, "n1", "n2", "n3", "n4", "n5", "n6")
	c.claims[5].DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
	c.nodes[4].Status.Conditions[0].Status = corev1.ConditionFalse
	tr, t0 := NewTracker(), time.Unix(1000, 0)
	tr.Decide(c.snapshot(), t0)
	p := tr.Decide(c.snapshot(), t0.Add(time.Minute))
	if len(p.Mark) != 1 {
		t.Fatalf("marked %v, want one (budget 3, one deleting, one not Ready)", claimNames(p.Mark))
	}
	if !strings.Contains(p.Blocked["default"], "budgets allow 3 node(s) of 6") || p.Allowed["default"] != 3 {
		t.Errorf("blocked %q, allowed %d", p.Blocked["default"], p.Allowed["default"])
	}
	c.apply(p)
	if p := tr.Decide(c.snapshot(), t0.Add(time.Minute+time.Second)); len(p.Mark) > 0 {
		t.Errorf("marked %v while the budget is used up", claimNames(p.Mark))
	}
}

// Nothing is removed from a pool with consolidateAfter Never, nor a node or NodeClaim with
// karpenter.sh/do-not-disrupt; a marked node that gets the annotation is unmarked.
func TestEmptinessRespectsOptOuts(t *testing.T) {
	c := newCluster(nil, "node-opt-out", "claim-opt-out", "free")
	c.node("node-opt-out").Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	c.claims[1].Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	c.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	tr, t0 := NewTracker(), time.Unix(1000, 0)
	tr.Decide(c.snapshot(), t0)
	p := tr.Decide(c.snapshot(), t0.Add(time.Minute))
	if got := claimNames(p.Mark); !slices.Equal(got, []string{"free"}) {
		t.Fatalf("marked %v, want only free", got)
	}
	c.apply(p)
	c.node("free").Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	if got := claimNames(tr.Decide(c.snapshot(), t0.Add(time.Minute+time.Second)).Unmark); !slices.Equal(got, []string{"free"}) {
		t.Errorf("unmarked %v after do-not-disrupt, want free", got)
	}

	never := newCluster(nil, "idle")
	never.pool.Spec.Disruption.ConsolidateAfter.Duration = nil
	tr = NewTracker()
	tr.Decide(never.snapshot(), t0)
	if p := tr.Decide(never.snapshot(), t0.Add(time.Hour)); len(p.Mark) > 0 {
		t.Errorf("consolidateAfter Never: marked %v", claimNames(p.Mark))
	}

	// A static pool keeps its empty nodes: its replicas, not its pods, size it (Karpenter).
	static := newCluster(nil, "idle")
	static.pool.Spec.Replicas = ptr.To[int64](1)
	tr = NewTracker()
	tr.Decide(static.snapshot(), t0)
	if p := tr.Decide(static.snapshot(), t0.Add(time.Hour)); len(p.Mark) > 0 {
		t.Errorf("static pool: marked %v", claimNames(p.Mark))
	}
}

// A node just launched for pods the scheduler has not bound yet is not empty: neither while a
// pending pod is nominated to it, nor within the nomination window after its initialization,
// even with consolidateAfter 0s.
func TestNewNodeWaitingForItsPodsIsKept(t *testing.T) {
	c := newCluster(nil, "fresh", "nominated")
	c.pool.Spec.Disruption.ConsolidateAfter.Duration = ptr.To(time.Duration(0))
	c.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	t0 := time.Unix(1000, 0)
	c.claims[0].Status.Conditions[0].LastTransitionTime = metav1.Time{Time: t0}
	pending := c.run("", "on-its-way")
	pending.Status.NominatedNodeName = "nominated"
	tr := NewTracker()
	if p := tr.Decide(c.snapshot(), t0.Add(nominationWindow-time.Second)); len(p.Mark) > 0 {
		t.Fatalf("marked %v: a node initialized %s ago, or with a pod nominated to it", claimNames(p.Mark), nominationWindow-time.Second)
	}
	p := tr.Decide(c.snapshot(), t0.Add(nominationWindow))
	if got := claimNames(p.Mark); !slices.Equal(got, []string{"fresh"}) {
		t.Errorf("after the window: marked %v, want fresh only (a pod is still nominated to the other)", got)
	}
}
