package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// settlingCluster: node "source" (going, one 1-cpu pod) and node "dest" (room for it), whose
// NodeClaim was initialized at t0 in a pool that consolidates after a minute; a pending pod too.
func settlingCluster(t0 time.Time, after *time.Duration, affinity *corev1.Affinity) *state.Cluster {
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "default"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + name},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	claim := func(name string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + name, Labels: map[string]string{karpv1.LabelNodePool: "default"}},
			Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + name, NodeName: name,
				Conditions: []karpv1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}}}
	}
	moving := pendingPod("moving", "1")
	moving.Spec.NodeName = "source"
	moving.Spec.Affinity = affinity
	c := state.New([]*corev1.Pod{moving, pendingPod("pending", "1")}, []*corev1.Node{node("source"), node("dest")},
		[]*karpv1.NodeClaim{claim("source"), claim("dest")})
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.ConsolidateAfter.Duration = after
	c.NodePools = []*karpv1.NodePool{np}
	return c
}

// Karpenter v1.14: a consolidation does not move pods onto a node within its pool's
// consolidateAfter; pending pods may go there, drift's moves may too, and once consolidateAfter
// has passed (or the pool never consolidates) the node takes moved pods again.
func TestConsolidationKeepsMovedPodsOffSettlingNodes(t *testing.T) {
	t0 := time.Unix(100000, 0)
	minute := ptr.To(time.Minute)
	p := New(nil, Options{})
	without := map[string]bool{"source": true}
	where := func(c *state.Cluster, now time.Time, consolidation bool) map[string]string {
		res := p.SimulateWithout(c, nil, without)
		if consolidation {
			res = p.SimulateConsolidation(c, nil, without, now)
		}
		out := map[string]string{}
		for _, b := range res.Bindings {
			out[b.Pod.Name] = b.Node
		}
		for _, u := range res.Unschedulable {
			out[u.Pod.Name] = "nowhere"
		}
		return out
	}
	if got := where(settlingCluster(t0, minute, nil), t0.Add(30*time.Second), true); got["moving"] != "nowhere" || got["pending"] != "dest" {
		t.Errorf("within consolidateAfter: %v, want the moved pod kept off dest, the pending pod on it", got)
	}
	if got := where(settlingCluster(t0, minute, nil), t0.Add(30*time.Second), false); got["moving"] != "dest" {
		t.Errorf("drift's simulation: %v, want the moved pod on dest", got)
	}
	if got := where(settlingCluster(t0, minute, nil), t0.Add(2*time.Minute), true); got["moving"] != "dest" {
		t.Errorf("after consolidateAfter: %v, want the moved pod on dest", got)
	}
	if got := where(settlingCluster(t0, nil, nil), t0.Add(30*time.Second), true); got["moving"] != "dest" {
		t.Errorf("consolidateAfter Never: %v, want the moved pod on dest", got)
	}
	// A pod with its own required node affinity keeps it, and gains the rule in every term.
	own := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}}}}}}
	c := settlingCluster(t0, minute, own)
	if got := where(c, t0.Add(30*time.Second), true); got["moving"] != "nowhere" {
		t.Errorf("with its own affinity: %v, want it kept off dest", got)
	}
	if n := len(c.Pods[0].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions); n != 1 {
		t.Errorf("the snapshot's pod was changed: %d expressions", n)
	}
	if _, ok := c.Nodes[1].Labels[settlingLabel]; ok {
		t.Error("the snapshot's node was labelled")
	}
	// With a pool to launch from, the moved pod gets a new NodeClaim: the rule's requirement
	// does not keep it off new nodes.
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	c = settlingCluster(t0, minute, nil)
	res := p.SimulateConsolidation(c, []scheduling.Pool{{NodePool: c.NodePools[0], InstanceTypes: cat.InstanceTypes(catalog.NodeClassOptions{})}},
		without, t0.Add(30*time.Second))
	if len(res.NodeClaims) != 1 || len(res.NodeClaims[0].Pods) != 1 || res.NodeClaims[0].Pods[0].Name != "moving" {
		t.Fatalf("with a pool: %d NodeClaims (%+v unschedulable), want one for the moved pod", len(res.NodeClaims), res.Unschedulable)
	}
	for _, r := range res.NodeClaims[0].Requirements {
		if r.Key == settlingLabel {
			t.Errorf("the replacement's requirements carry the simulation's label: %+v", r)
		}
	}
}
