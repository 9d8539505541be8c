package disruption

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// The worked examples of Karpenter's Balanced design and its ScoreMove tests: a pool of ten
// nodes (eight at $4.84/day, two at $9.68/day), 80 pods of default cost (disruption 10 + 80).
func TestBalancedScoreKarpentersExamples(t *testing.T) {
	mixed := poolTotals{cost: 58.08, disruption: 90}
	uniform := poolTotals{cost: 48.40, disruption: 90}
	for _, tc := range []struct {
		name                 string
		totals               poolTotals
		saving, disruption   float64
		approved             bool
		wantScore, tolerance float64
	}{
		{"oversized node replaced by a small one", mixed, 7.26, 4, true, 2.81, 0.01},
		{"spare capacity delete", mixed, 4.84, 5, true, 1.50, 0.01},
		{"marginal replace", mixed, 2.42, 9, false, 0.417, 0.001},
		{"well-packed node, nothing saved", mixed, 0, 11, false, 0, 0},
		{"uniform pool replace at the threshold", uniform, 2.42, 9, true, 0.5, 1e-9},
		{"light node of a pool with costly pods", poolTotals{58.08, 117}, 4.84, 5, true, 1.95, 0.01},
		{"heavy node of a pool with costly pods", poolTotals{58.08, 117}, 4.84, 32, false, 0.305, 0.001},
		{"the same move in a pool ten times larger", poolTotals{580.8, 900}, 7.26, 4, true, 2.81, 0.01},
		{"a saving that disrupts nothing", mixed, 4.84, 0, true, math.Inf(1), 0},
		{"nothing saved, nothing disrupted", mixed, 0, 0, false, 0, 0},
		{"a pool whose cost is unknown", poolTotals{0, 90}, 4.84, 5, false, 0, 0},
		{"a saving lost", mixed, -1, 5, false, 0, 0},
	} {
		s, _, _ := tc.totals.score(tc.saving, tc.disruption)
		if math.IsInf(tc.wantScore, 1) != math.IsInf(s, 1) || !math.IsInf(s, 1) && math.Abs(s-tc.wantScore) > tc.tolerance {
			t.Errorf("%s: score %.4f, want %.4f", tc.name, s, tc.wantScore)
		}
		if v := judge("p", tc.totals, tc.saving, tc.disruption); (v.Reason == "") != tc.approved {
			t.Errorf("%s: verdict %+v, want approved=%v", tc.name, v, tc.approved)
		}
	}
	// Cross-pool moves are proportional: a spot pool a third as dear scores the same move the same.
	od, _, _ := uniform.score(4.84, 4)
	spot, _, _ := poolTotals{14.52, 90}.score(1.452, 4)
	if math.Abs(od-spot) > 1e-9 {
		t.Errorf("proportional moves scored %.4f and %.4f", od, spot)
	}
}

// A pod's eviction cost follows its deletion cost and priority within [-10, 10]; a node's
// disruption counts itself and only its pods' positive costs.
func TestEvictionCost(t *testing.T) {
	pod := func(deletionCost string, priority *int32) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Priority: priority}}
		if deletionCost != "" {
			p.Annotations = map[string]string{corev1.PodDeletionCost: deletionCost}
		}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want float64
	}{
		{pod("", nil), 1},
		{pod(fmt.Sprint(1<<27), nil), 2},
		{pod("", ptr.To[int32](1<<25)), 2},
		{pod("2147483647", ptr.To[int32](1000000000)), 10},
		{pod("-2147483648", nil), -10},
		{pod("not a number", nil), 1},
		{pod("NaN", nil), 1},
	} {
		if got := evictionCost(tc.pod); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("eviction cost of %v (priority %v): %.4f, want %.4f", tc.pod.Annotations, tc.pod.Spec.Priority, got, tc.want)
		}
	}
	free := pod("-2147483648", nil)
	if got := disruptionOf([]*corev1.Pod{pod("", nil), free, pod(fmt.Sprint(1<<27), nil)}); got != 4 {
		t.Errorf("disruption of a node with pods of cost 1, -10 and 2: %v, want 1 + 1 + 0 + 2", got)
	}
}

// balancedCands are candidates of Balanced pools: per name a pool, a price and a pod count.
type balancedCand struct {
	name, pool string
	price      float64
	pods       int
}

func balancedCands(policy karpv1.ConsolidationPolicy, cs ...balancedCand) []Candidate {
	pools := map[string]*karpv1.NodePool{}
	var out []Candidate
	for _, c := range cs {
		if pools[c.pool] == nil {
			pools[c.pool] = &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: c.pool}}
			pools[c.pool].Spec.Disruption.ConsolidationPolicy = policy
		}
		cand := Candidate{
			NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: c.name, Labels: map[string]string{karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand}}},
			Node:      &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.name}}, Pool: pools[c.pool], Price: c.price,
		}
		for i := range c.pods {
			uid := fmt.Sprintf("%s-%d", c.name, i)
			cand.Pods = append(cand.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: uid, UID: types.UID(uid)}})
		}
		cand.Disruption = disruptionOf(cand.Pods)
		out = append(out, cand)
	}
	return out
}

// A Balanced pool of four $1/h nodes: "light" runs 1 pod, the others 10. Deleting light (its pod
// fits elsewhere) saves a quarter of the cost for 2/35 of the disruption; replacing "full" by a
// node 10 % cheaper saves 2.5 % for 11/35. Under WhenEmptyOrUnderutilized both go; under
// Balanced only light does, and full says why.
func TestBalancedConsolidatesTheUnderusedNodeOnly(t *testing.T) {
	totals := map[string]poolTotals{"p": {cost: 4, disruption: 2 + 3*11}}
	simulate := func(nodes map[string]bool) *scheduling.Result {
		if nodes["full"] {
			return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.9)}}
		}
		return &scheduling.Result{}
	}
	for _, policy := range []karpv1.ConsolidationPolicy{karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, karpv1.ConsolidationPolicyBalanced} {
		cands := balancedCands(policy, balancedCand{"light", "p", 1, 1}, balancedCand{"full", "p", 1, 10})
		r := rules{balanced: totals}
		light, _ := evaluate(cands[:1], r, simulate, -1)
		full, why := evaluate(cands[1:], r, simulate, -1)
		if light == nil || light.Decision() != "delete" {
			t.Errorf("%s: light not deleted", policy)
		}
		wantFull := policy != karpv1.ConsolidationPolicyBalanced
		if (full != nil) != wantFull {
			t.Errorf("%s: full replaced = %v, want %v (verdict %+v)", policy, full != nil, wantFull, why)
		}
		if !wantFull && (why.Reason != "Balanced" || !strings.Contains(why.Message, "save 2.5 % of its cost for 31.4 % of its disruption")) {
			t.Errorf("%s: full's verdict %+v does not give the score", policy, why)
		}
	}
}

// A candidate whose deletion could not pass is not simulated alone; the verdict says why.
func TestBalancedSkipsCandidatesThatCannotPass(t *testing.T) {
	cands := balancedCands(karpv1.ConsolidationPolicyBalanced, balancedCand{"busy", "p", 1, 30})
	r := rules{balanced: map[string]poolTotals{"p": {cost: 10, disruption: 40}}}
	simulated := 0
	cmd, why := consolidate(cands, map[string]int{"p": 1}, r, func(map[string]bool) *scheduling.Result {
		simulated++
		return &scheduling.Result{}
	})
	if cmd != nil || simulated != 0 || why["busy"].Reason != "Balanced" {
		t.Errorf("command %v after %d simulations, verdict %+v; want none, none, Balanced", cmd, simulated, why["busy"])
	}
}

// Every Balanced pool of a move must approve its own share of the saving; pools of other
// policies are not scored.
func TestBalancedEveryPoolMustApprove(t *testing.T) {
	both := func(nodes map[string]bool) *scheduling.Result { return &scheduling.Result{} }
	cands := balancedCands(karpv1.ConsolidationPolicyBalanced, balancedCand{"a", "cheap", 1, 1}, balancedCand{"b", "dear", 1, 1})
	r := rules{balanced: map[string]poolTotals{"cheap": {cost: 2, disruption: 10}, "dear": {cost: 100, disruption: 10}}}
	if cmd, why := evaluate(cands, r, both, -1); cmd != nil || !strings.Contains(why.Message, "NodePool dear") {
		t.Errorf("a move the dear pool rejects: command %v, verdict %+v", cmd, why)
	}
	r.balanced["dear"] = poolTotals{cost: 4, disruption: 10}
	if cmd, why := evaluate(cands, r, both, -1); cmd == nil {
		t.Errorf("a move both pools approve was refused: %+v", why)
	}
	// The dear pool is WhenEmptyOrUnderutilized: only the cheap pool scores.
	cands[1].Pool = &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "dear"}}
	cands[1].Pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	r.balanced = map[string]poolTotals{"cheap": {cost: 2, disruption: 10}}
	if cmd, why := evaluate(cands, r, both, -1); cmd == nil {
		t.Errorf("a mixed-policy move the Balanced pool approves was refused: %+v", why)
	}
}

// The totals cover every node of each Balanced pool (candidates or not, launching or not),
// nothing of other pools and nothing being deleted.
func TestBalancedTotals(t *testing.T) {
	c := newCluster(nil, "a", "b", "going")
	c.pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
	c.run("a", "web-1")
	c.run("a", "web-2")
	c.run("b", "cheap").Annotations = map[string]string{corev1.PodDeletionCost: "-2147483648"}
	c.run("going", "web-3")
	c.claims[2].DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
	other := newCluster(nil, "x")
	other.claims[0].Labels[karpv1.LabelNodePool] = "other"
	snap := c.snapshot()
	snap.NodeClaims = append(snap.NodeClaims, other.claims[0])
	snap.NodePools = append(snap.NodePools, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	got := balancedTotals(snap, func(*karpv1.NodeClaim) (float64, bool) { return 0.5, true })
	want := map[string]poolTotals{"default": {cost: 1, disruption: 3 + 1}}
	if len(got) != 1 || got["default"] != want["default"] {
		t.Errorf("totals %+v, want %+v", got, want)
	}
}
