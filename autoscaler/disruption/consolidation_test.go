package disruption

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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
			Pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-web", UID: types.UID(name + "-web")}}},
		})
	}
	return out
}

// stranded is a simulation's result where the pod of the first of the nodes fits nowhere.
func stranded(cands []Candidate, nodes map[string]bool) *scheduling.Result {
	for _, c := range cands {
		if nodes[c.Node.Name] {
			return &scheduling.Result{Unschedulable: []scheduling.Unschedulable{{Pod: c.Pods[0], Reason: "no room"}}}
		}
	}
	panic("no candidate among the nodes")
}

// claim is a planned on-demand replacement whose options cost these prices (cheapest first).
func claim(prices ...float64) scheduling.NodeClaim {
	return claimOf(karpv1.CapacityTypeOnDemand, prices...)
}

// claimOf is a planned replacement of one capacity type whose options cost these prices.
func claimOf(capacityType string, prices ...float64) scheduling.NodeClaim {
	nc := scheduling.NodeClaim{CapacityTypes: []string{capacityType}}
	for i, p := range prices {
		nc.InstanceTypes = append(nc.InstanceTypes, scheduling.InstanceTypeOption{
			Type: &catalog.InstanceType{Name: fmt.Sprintf("t%d.large", i)}, PricePerHour: p,
			Offerings: []catalog.Offering{{Zone: "zone-a", CapacityType: capacityType, PricePerHour: p, Available: true}}})
	}
	return nc
}

func key(nodes map[string]bool) string { return strings.Join(slices.Sorted(maps.Keys(nodes)), ",") }

// The largest group whose pods fit elsewhere goes at once; a group including "c" (whose pods fit
// nowhere) does not.
func TestConsolidateDeletesLargestGroupThatFits(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1})
	var tried []string
	cmd, _ := consolidate(cands, map[string]int{"default": 3}, rules{}, func(nodes map[string]bool) *scheduling.Result {
		tried = append(tried, key(nodes))
		if nodes["c"] {
			return stranded(cands[2:], nodes)
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
		cmd, why := consolidate(cands, map[string]int{"default": 1}, rules{}, func(map[string]bool) *scheduling.Result {
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

// One node may become several cheaper ones, sharing the saving so that any mix of the kept
// options is still cheaper; a group may become fewer, cheaper nodes, never as many (karpool's
// additions).
func TestConsolidateSplitsOneNodeOrShrinksAGroup(t *testing.T) {
	two := func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.5, 0.85, 0.95), claim(0.7, 1.05, 1.2)}}
	}
	cmd, _ := consolidate(candidates(map[string]float64{"big": 2.0}), map[string]int{"default": 1}, rules{}, two)
	if cmd == nil || len(cmd.Replacements) != 2 {
		t.Fatalf("command %+v, want one node replaced by two", cmd)
	}
	if got := len(cmd.Replacements[0].InstanceTypes) + len(cmd.Replacements[1].InstanceTypes); got != 4 || cmd.NewPrice >= 2.0 {
		t.Errorf("kept %d options at most $%.2f/h; want 4 (each below its price + $0.40) under $2/h", got, cmd.NewPrice)
	}
	// A split that may save less than minSplitSavings (at the dearest option each replacement
	// keeps: here $0.99 + $0.99 of $2) is not worth moving every pod, though its cheapest
	// options would save 10 %.
	almost := func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.9, 0.99), claim(0.9, 0.99)}}
	}
	if cmd, why := consolidate(candidates(map[string]float64{"big": 2.0}), map[string]int{"default": 1}, rules{}, almost); cmd != nil || why["big"].Reason != "NoCheaperFit" {
		t.Errorf("split saving 2 %%: command %+v, verdict %+v; want none, NoCheaperFit", cmd, why["big"])
	}
	// Together x and y ($2/h) would save as two nodes ($1.20/h), alone neither would.
	if cmd, _ := consolidate(candidates(map[string]float64{"x": 1.0, "y": 1.0}), map[string]int{"default": 2}, rules{}, two); cmd != nil {
		t.Errorf("two nodes into two: %s of %s, want nothing (a group only shrinks)", cmd.Decision(), cmd.Key())
	}
	cmd, _ = consolidate(candidates(map[string]float64{"x": 1.0, "y": 1.0, "z": 1.0}), map[string]int{"default": 3}, rules{}, two)
	if cmd == nil || cmd.Method != "multi" || cmd.Key() != "x,y,z" || len(cmd.Replacements) != 2 {
		t.Errorf("three nodes into two cheaper: %+v, want a multi-node replace of x,y,z by two", cmd)
	}
}

// Budgets bound the candidates looked at; a spot node is deleted but never replaced.
func TestConsolidateBudgetAndSpot(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1})
	var seen []string
	_, why := consolidate(cands, map[string]int{"default": 1}, rules{}, func(nodes map[string]bool) *scheduling.Result {
		seen = append(seen, key(nodes))
		return stranded(cands, nodes)
	})
	if !slices.Equal(seen, []string{"a"}) {
		t.Errorf("with a budget of one node, simulated %v, want [a]", seen)
	}
	if why["a"].Reason != "PodsDoNotFit" || why["b"].Reason != "Budget" {
		t.Errorf("verdicts %+v, want a: PodsDoNotFit, b: Budget", why)
	}
	spot := candidates(map[string]float64{"s": 1}, "s")
	if cmd, _ := consolidate(spot, map[string]int{"default": 1}, rules{}, func(map[string]bool) *scheduling.Result { return &scheduling.Result{} }); cmd == nil {
		t.Error("spot node whose pods fit elsewhere was not deleted")
	}
}

// A spot node is replaced by spot only behind the gate, a single one only with at least 15
// cheaper types, and launches as one of the 15 cheapest; by a cheaper on-demand node it may be.
func TestConsolidateSpotToSpot(t *testing.T) {
	spot := candidates(map[string]float64{"s": 1}, "s")
	offer := func(capacityType string, n int) func(map[string]bool) *scheduling.Result {
		prices := make([]float64, n)
		for i := range prices {
			prices[i] = 0.3 + 0.01*float64(i)
		}
		return func(map[string]bool) *scheduling.Result {
			return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claimOf(capacityType, prices...)}}
		}
	}
	budget := map[string]int{"default": 1}
	if cmd, why := consolidate(spot, budget, rules{}, offer(karpv1.CapacityTypeSpot, 20)); cmd != nil || why["s"].Reason != "SpotToSpot" {
		t.Errorf("gate off: %+v, verdicts %+v; want no command, SpotToSpot", cmd, why)
	}
	gate := rules{spotToSpot: true}
	if cmd, why := consolidate(spot, budget, gate, offer(karpv1.CapacityTypeSpot, 14)); cmd != nil || !strings.Contains(why["s"].Message, "needs 15 cheaper instance types, 14 are") {
		t.Errorf("gate on, 14 cheaper types: %+v, verdicts %+v; want no command", cmd, why)
	}
	cmd, _ := consolidate(spot, budget, gate, offer(karpv1.CapacityTypeSpot, 20))
	if cmd == nil || len(cmd.Replacements[0].InstanceTypes) != 15 {
		t.Fatalf("gate on, 20 cheaper types: %+v, want a replacement launching as one of 15", cmd)
	}
	if cmd, _ := consolidate(spot, budget, rules{}, offer(karpv1.CapacityTypeOnDemand, 2)); cmd == nil || cmd.Decision() != "replace" {
		t.Errorf("gate off, a cheaper on-demand node: %+v, want a replace", cmd)
	}
}

// A replacement that may be spot launches as spot: its on-demand offerings, dearer than the
// node it replaces, leave its requirements.
func TestConsolidateReplacementMayBeSpotLaunchesAsSpot(t *testing.T) {
	rc := claimOf(karpv1.CapacityTypeSpot, 0.4)
	rc.CapacityTypes = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}
	rc.InstanceTypes[0].Offerings = append(rc.InstanceTypes[0].Offerings,
		catalog.Offering{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, PricePerHour: 1.2, Available: true})
	rc.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: rc.CapacityTypes}}
	cmd, _ := consolidate(candidates(map[string]float64{"od": 1}), map[string]int{"default": 1}, rules{}, func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{rc}}
	})
	if cmd == nil {
		t.Fatal("an on-demand node with a cheaper spot fit was not replaced")
	}
	if got := cmd.Replacements[0].Requirements[0].Values; !slices.Equal(got, []string{karpv1.CapacityTypeSpot}) || cmd.NewPrice != 0.4 {
		t.Errorf("replacement capacity types %v at most $%.2f/h, want [spot] at $0.40/h", got, cmd.NewPrice)
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

	// A static pool's nodes are never consolidated, as in Karpenter.
	c.pool.Spec.Replicas = ptr.To[int64](6)
	cands, why = consolidationCandidates(c.snapshot(), price, t0)
	if len(cands) != 0 || why["ok"].Reason != "StaticNodePool" {
		t.Errorf("static pool: candidates %v, ok's verdict %+v; want none, StaticNodePool", claimNames(cands), why["ok"])
	}
}

// A do-not-disrupt grace period holds the node until it ends, and says until when; after it,
// the node is a candidate again. An unreadable value holds nothing.
func TestDoNotDisruptGracePeriod(t *testing.T) {
	t0 := time.Unix(10000, 0)
	c := newCluster(nil, "warm", "done", "bad")
	c.pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	for _, nc := range c.claims {
		nc.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Hour))
	}
	for _, pod := range []struct {
		node, value string
		started     time.Duration
	}{{"warm", "30m", 10 * time.Minute}, {"done", "30m", 40 * time.Minute}, {"bad", "soon", time.Hour}} {
		p := c.run(pod.node, pod.node+"-cache")
		p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: pod.value}
		p.Status.StartTime = &metav1.Time{Time: t0.Add(-pod.started)}
	}
	cands, why := consolidationCandidates(c.snapshot(), func(*karpv1.NodeClaim) (float64, bool) { return 0.1, true }, t0)
	if got := claimNames(cands); !slices.Equal(got, []string{"bad", "done"}) {
		t.Errorf("candidates %v, want [bad done]", got)
	}
	if want := "has the karpenter.sh/do-not-disrupt annotation until 1970-01-01T03:06:40Z"; why["warm"].Reason != "PodDoNotDisrupt" || !strings.Contains(why["warm"].Message, want) {
		t.Errorf("warm: %+v, want PodDoNotDisrupt saying %q", why["warm"], want)
	}
}

// Of the groups Karpenter's order and the idlest-first order find, the one saving more goes:
// here a is cheap to disrupt but busy, b and c mostly idle.
func TestConsolidatePrefersTheLargerSaving(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1})
	for i, idle := range []float64{0.1, 0.9, 0.95} {
		cands[i].Idle = idle
	}
	cmd, _ := consolidate(cands, map[string]int{"default": 3}, rules{}, func(nodes map[string]bool) *scheduling.Result {
		if len(nodes) > 2 {
			return stranded(cands, nodes)
		}
		used := 0.0 // the pods elsewhere cost what they use
		for i, c := range cands {
			if nodes[c.Node.Name] {
				used += 1 - cands[i].Idle
			}
		}
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(used)}}
	})
	if cmd == nil || cmd.Key() != "b,c" || cmd.Method != "multi" {
		t.Fatalf("command %+v, want b,c replaced by one node (saving $1.85/h; a,b would save $1.00/h)", cmd)
	}
}

// A pod that was pending already and fits nowhere does not hold the candidates: only their own
// pods must find room.
func TestConsolidateIgnoresPodsPendingBefore(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1})
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "huge", UID: "huge"}}
	cmd, why := consolidate(cands, map[string]int{"default": 1}, rules{}, func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{Unschedulable: []scheduling.Unschedulable{{Pod: stuck, Reason: "no instance type has 1000 cpu"}}}
	})
	if cmd == nil || cmd.Decision() != "delete" {
		t.Errorf("command %+v, verdicts %+v; want a deleted despite the stuck pod", cmd, why)
	}
}

// Consolidation waits while pods are in motion (created or judged within settleTime and not
// bound) or NodeClaims are not initialized, and not for pods that have waited longer.
func TestGrowing(t *testing.T) {
	t0 := time.Unix(10000, 0)
	c := newCluster(nil, "a")
	if growing(c.snapshot(), t0) {
		t.Error("growing with every NodeClaim initialized and no pod waiting")
	}
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fresh", CreationTimestamp: metav1.NewTime(t0.Add(-5 * time.Second))}}
	c.pods = append(c.pods, fresh)
	if !growing(c.snapshot(), t0) {
		t.Error("not growing while a pod created 5 s ago waits for the scheduler")
	}
	if growing(c.snapshot(), t0.Add(settleTime)) {
		t.Error("growing for a pod that has waited longer than settleTime")
	}
	fresh.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		LastTransitionTime: metav1.NewTime(t0.Add(settleTime - time.Second))}}
	if !growing(c.snapshot(), t0.Add(settleTime)) {
		t.Error("not growing right after the pod was judged unschedulable")
	}
	leaving := c.run("a", "leaving")
	leaving.DeletionTimestamp = &metav1.Time{Time: t0.Add(30 * time.Second)} // deleted with a 30 s grace period
	c.pods = []*corev1.Pod{leaving}
	if !growing(c.snapshot(), t0) {
		t.Error("not growing while a pod terminates")
	}
	if growing(c.snapshot(), t0.Add(30*time.Second+settleTime)) {
		t.Error("growing for a pod stuck terminating for longer than settleTime")
	}
	c.pods = nil
	c.claims[0].Status.Conditions = nil
	if !growing(c.snapshot(), t0) {
		t.Error("not growing while a NodeClaim is not initialized")
	}
}

// A decision is acted on 15 s later only if its candidates still are candidates within the
// budget and, simulated again, still go for no more than was decided.
func TestRevalidate(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1})
	budget := map[string]int{"default": 3}
	deleteAll := func(map[string]bool) *scheduling.Result { return &scheduling.Result{} }
	pending, _ := consolidate(cands[:2], budget, rules{}, deleteAll)
	if pending == nil || pending.Key() != "a,b" {
		t.Fatalf("decision %+v, want a,b deleted", pending)
	}
	if cmd, why := revalidate(pending, cands, budget, rules{}, deleteAll); cmd == nil || cmd.Key() != "a,b" || cmd.Method != "multi" {
		t.Errorf("unchanged: %+v (%s), want a,b still deleted", cmd, why)
	}
	if cmd, why := revalidate(pending, cands[1:], budget, rules{}, deleteAll); cmd != nil || !strings.Contains(why, "a is no longer a candidate") {
		t.Errorf("a gone: %+v (%s), want no command naming a", cmd, why)
	}
	if cmd, why := revalidate(pending, cands, map[string]int{"default": 1}, rules{}, deleteAll); cmd != nil || !strings.Contains(why, "budget") {
		t.Errorf("budget of 1: %+v (%s), want no command naming the budget", cmd, why)
	}
	pricier := func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(1.5)}}
	}
	if cmd, why := revalidate(pending, cands, budget, rules{}, pricier); cmd != nil || !strings.Contains(why, "1 new node(s)") {
		t.Errorf("now needing a node: %+v (%s), want no command", cmd, why)
	}
}

// When no prefix of either order can go, a single node that can is joined by the others that
// can go with it: here b's pods only fit where a's and c's do not.
func TestConsolidateGrowsASingleNode(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1})
	for i, idle := range []float64{0.1, 0.5, 0.9} {
		cands[i].Idle = idle
	}
	cmd, _ := consolidate(cands, map[string]int{"default": 3}, rules{}, func(nodes map[string]bool) *scheduling.Result {
		if nodes["b"] && len(nodes) > 1 {
			return stranded(cands, nodes)
		}
		return &scheduling.Result{}
	})
	if cmd == nil || cmd.Key() != "a,c" || cmd.Method != "multi" || cmd.Decision() != "delete" {
		t.Fatalf("command %+v, want a and c deleted together", cmd)
	}
}
