package disruption

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// candidates builds consolidation candidates of pool "default" with the given prices.
func candidates(prices map[string]float64, spot ...string) []Candidate {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	var out []Candidate
	for _, name := range slices.Sorted(maps.Keys(prices)) {
		ct := karpv1.CapacityTypeOnDemand
		if slices.Contains(spot, name) {
			ct = karpv1.CapacityTypeSpot
		}
		out = append(out, Candidate{
			NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelCapacityType: ct}}},
			Node:      &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, Pool: np, Price: prices[name],
		})
	}
	return out
}

// claim is a planned replacement whose options cost these prices (cheapest first).
func claim(prices ...float64) scheduling.NodeClaim {
	var nc scheduling.NodeClaim
	for i, p := range prices {
		nc.InstanceTypes = append(nc.InstanceTypes, scheduling.InstanceTypeOption{
			Type: &catalog.InstanceType{Name: string(rune('a'+i)) + ".large"}, PricePerHour: p})
	}
	return nc
}

func key(nodes map[string]bool) string { return strings.Join(slices.Sorted(maps.Keys(nodes)), ",") }

// The largest group whose pods fit elsewhere goes at once; a group including "c" (whose pods fit
// nowhere) does not.
func TestConsolidateDeletesLargestGroupThatFits(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1})
	var tried []string
	cmd, _ := consolidate(cands, map[string]int{"default": 3}, MinSavings{}, func(nodes map[string]bool) *scheduling.Result {
		tried = append(tried, key(nodes))
		if nodes["c"] {
			return &scheduling.Result{Unschedulable: []scheduling.Unschedulable{{Pod: &corev1.Pod{}, Reason: "no room"}}}
		}
		return &scheduling.Result{}
	})
	if cmd == nil || cmd.Key() != "a,b" || cmd.Decision() != "delete" || cmd.Method != "multi" || cmd.Price != 2 {
		t.Fatalf("command %+v (simulated %v), want multi delete of a,b at $2/h", cmd, tried)
	}
}

// A replacement must be strictly cheaper, and keeps only the instance types that stay so.
func TestConsolidateReplacesOnlyWhenCheaper(t *testing.T) {
	cands := candidates(map[string]float64{"big": 1.0})
	for _, tc := range []struct {
		offer []float64
		want  []float64 // the options kept; nil: no command
	}{
		{offer: []float64{1.0, 1.1}},
		{offer: []float64{1.2}},
		{offer: []float64{0.6, 0.9, 1.0, 1.2}, want: []float64{0.6, 0.9}},
	} {
		cmd, why := consolidate(cands, map[string]int{"default": 1}, MinSavings{}, func(map[string]bool) *scheduling.Result {
			return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(tc.offer...)}}
		})
		if tc.want == nil {
			if cmd != nil || why["big"].Reason != "NoCheaperFit" {
				t.Errorf("offer %v: command %+v, verdict %+v; want none, NoCheaperFit", tc.offer, cmd, why["big"])
			}
			continue
		}
		if cmd == nil || cmd.Decision() != "replace" || cmd.Method != "single" {
			t.Fatalf("offer %v: command %+v, want a single replace", tc.offer, cmd)
		}
		var kept []float64
		for _, o := range cmd.Replacements[0].InstanceTypes {
			kept = append(kept, o.PricePerHour)
		}
		if !slices.Equal(kept, tc.want) || cmd.NewPrice != 0.9 {
			t.Errorf("offer %v: kept %v (at most $%.2f/h), want %v (at most $0.90/h)", tc.offer, kept, cmd.NewPrice, tc.want)
		}
	}
}

// One node may become several cheaper ones (karpool's addition), sharing the saving so that any
// mix of the kept options is still cheaper; several nodes may not.
func TestConsolidateSplitsOneNodeOnly(t *testing.T) {
	two := func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.5, 0.85, 0.95), claim(0.7, 1.05, 1.2)}}
	}
	cmd, _ := consolidate(candidates(map[string]float64{"big": 2.0}), map[string]int{"default": 1}, MinSavings{}, two)
	if cmd == nil || len(cmd.Replacements) != 2 {
		t.Fatalf("command %+v, want one node replaced by two", cmd)
	}
	if got := len(cmd.Replacements[0].InstanceTypes) + len(cmd.Replacements[1].InstanceTypes); got != 4 || cmd.NewPrice >= 2.0 {
		t.Errorf("kept %d options at most $%.2f/h; want 4 (each below its price + $0.40) under $2/h", got, cmd.NewPrice)
	}
	// Together x and y ($2/h) would save as two nodes ($1.20/h), alone neither would.
	if cmd, _ := consolidate(candidates(map[string]float64{"x": 1.0, "y": 1.0}), map[string]int{"default": 2}, MinSavings{}, two); cmd != nil {
		t.Errorf("two nodes into two: %s of %s, want nothing (only a single node is split)", cmd.Decision(), cmd.Key())
	}
}

// Budgets bound the candidates looked at; a spot node is deleted but never replaced.
func TestConsolidateBudgetAndSpot(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1})
	var seen []string
	_, why := consolidate(cands, map[string]int{"default": 1}, MinSavings{}, func(nodes map[string]bool) *scheduling.Result {
		seen = append(seen, key(nodes))
		return &scheduling.Result{Unschedulable: []scheduling.Unschedulable{{Pod: &corev1.Pod{}, Reason: "no room"}}}
	})
	if !slices.Equal(seen, []string{"a"}) {
		t.Errorf("with a budget of one node, simulated %v, want [a]", seen)
	}
	if why["a"].Reason != "PodsDoNotFit" || why["b"].Reason != "Budget" {
		t.Errorf("verdicts %+v, want a: PodsDoNotFit, b: Budget", why)
	}
	spot := candidates(map[string]float64{"s": 1}, "s")
	replace := func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.3)}}
	}
	if cmd, why := consolidate(spot, map[string]int{"default": 1}, MinSavings{}, replace); cmd != nil || why["s"].Reason != "SpotToSpot" {
		t.Errorf("spot node: %+v, verdicts %+v; want no command, SpotToSpot", cmd, why)
	}
	if cmd, _ := consolidate(spot, map[string]int{"default": 1}, MinSavings{}, func(map[string]bool) *scheduling.Result { return &scheduling.Result{} }); cmd == nil {
		t.Error("spot node whose pods fit elsewhere was not deleted")
	}
}

// Every node of a consolidating pool that is not a candidate has a reason.
func TestConsolidationCandidatesSayWhyNot(t *testing.T) {
	t0 := time.Unix(10000, 0)
	c := newCluster(nil, "ok", "recent", "pinned", "guarded", "empty", "optout")
	c.pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	for _, nc := range c.claims {
		nc.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Hour))
		nc.Labels[corev1.LabelInstanceTypeStable] = "m5.large"
	}
	c.claims[1].Status.LastPodEventTime = metav1.NewTime(t0.Add(-30 * time.Second))
	c.node("optout").Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	for _, n := range []string{"ok", "recent", "guarded", "optout"} {
		c.run(n, n+"-web")
	}
	c.run("pinned", "batch").Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	c.run("guarded", "db").Labels = map[string]string{"app": "db"}
	snap := c.snapshot()
	snap.PDBs = []*policyv1.PodDisruptionBudget{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}}
	price := func(nc *karpv1.NodeClaim) (float64, bool) { return 0.1, true }
	cands, why := consolidationCandidates(snap, price, t0)
	if got := claimNames(cands); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("candidates %v, want [ok]", got)
	}
	for name, want := range map[string]string{
		"recent": "consolidateAfter (1m0s) has not passed", "pinned": "pod default/batch has the karpenter.sh/do-not-disrupt",
		"guarded": "PodDisruptionBudget default/db allows no disruption", "empty": "empty", "optout": "do-not-disrupt annotation",
	} {
		if !strings.Contains(why[name].Message, want) {
			t.Errorf("%s: reason %q, want it to say %q", name, why[name], want)
		}
	}
}
