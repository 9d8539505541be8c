package disruption

import (
	"maps"
	"slices"
	"testing"

	"github.com/karpool/karpool/autoscaler/scheduling"
)

// fitsUpTo simulates a cluster whose other nodes take the pods of at most n removed nodes.
func fitsUpTo(cands []Candidate, n int, tried *[]string) func(map[string]bool) *scheduling.Result {
	return func(nodes map[string]bool) *scheduling.Result {
		*tried = append(*tried, key(nodes))
		if len(nodes) > n {
			return stranded(cands, nodes)
		}
		return &scheduling.Result{}
	}
}

// The candidates that could follow a budget-sized deletion are the longest group that can go
// with it; a replacement, or a group that fits with nothing more, has none.
func TestAheadOfADeletion(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1})
	var tried []string
	cmd := &Command{Candidates: cands[:2]}
	got := aheadOf(cmd, cands, rules{}, fitsUpTo(cands, 4, &tried))
	if names := claimNames(got); !slices.Equal(names, []string{"c", "d"}) {
		t.Fatalf("ahead %v (simulated %v), want c, d: four nodes' pods fit elsewhere, five do not", names, tried)
	}
	if got := aheadOf(cmd, cands, rules{}, fitsUpTo(cands, 2, &tried)); len(got) != 0 {
		t.Errorf("ahead %v, want none when only the command's two fit", claimNames(got))
	}
	// d's pods fit nowhere: the prefix stops before it, and e and f still join.
	withoutD := func(nodes map[string]bool) *scheduling.Result {
		if nodes["d"] {
			return stranded(cands[3:], nodes)
		}
		return &scheduling.Result{}
	}
	if names := claimNames(aheadOf(cmd, cands, rules{}, withoutD)); !slices.Equal(names, []string{"c", "e", "f"}) {
		t.Errorf("ahead %v, want c, e, f: only d cannot go", names)
	}
	replace := &Command{Candidates: cands[:1], Replacements: []scheduling.NodeClaim{claim(0.5)}}
	if got := aheadOf(replace, cands, rules{}, fitsUpTo(cands, 6, &tried)); len(got) != 0 {
		t.Errorf("ahead of a replacement %v, want none", claimNames(got))
	}
}

// At validation the set is checked again on the fresh candidates: one that is no longer a
// candidate drops out, and a set that no longer fits clears nothing.
func TestClearAhead(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1, "d": 1})
	cmd := &Command{Candidates: cands[:1]}
	ahead := cands[1:]
	fresh := []Candidate{cands[0], cands[1], cands[3]} // c is no longer a candidate
	var tried []string
	got := clearAhead(cmd, ahead, fresh, rules{}, fitsUpTo(cands, 3, &tried))
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"b", "d"}) {
		t.Fatalf("cleared %v (simulated %v), want b, d", names, tried)
	}
	if got := clearAhead(cmd, ahead, cands, rules{}, fitsUpTo(cands, 3, &tried)); got != nil {
		t.Errorf("cleared %v, want nothing: a, b, c, d together no longer fit", got)
	}
}

// Each share takes what the budget allows of the cleared set, in disruption order, simulated
// again; no budget: no share yet; a share that no longer fits ends the run.
func TestNextShare(t *testing.T) {
	cands := candidates(map[string]float64{"a": 1, "b": 1, "c": 1, "d": 1})
	cleared := map[string]bool{"b": true, "c": true, "d": true}
	var tried []string
	cmd, ok := nextShare(cleared, cands, map[string]int{"default": 2}, rules{}, fitsUpTo(cands, 2, &tried))
	if !ok || cmd == nil || cmd.Key() != "b,c" || cmd.Decision() != "delete" || cmd.Method != "multi" {
		t.Fatalf("share %+v, %v; want a multi delete of b,c", cmd, ok)
	}
	if cmd, ok := nextShare(map[string]bool{"d": true}, cands, map[string]int{"default": 2}, rules{}, fitsUpTo(cands, 2, &tried)); !ok || cmd == nil || cmd.Key() != "d" || cmd.Method != "single" {
		t.Errorf("share %+v, %v; want a single delete of d", cmd, ok)
	}
	if cmd, ok := nextShare(cleared, cands, map[string]int{"default": 0}, rules{}, fitsUpTo(cands, 2, &tried)); cmd != nil || !ok {
		t.Errorf("share %+v, %v with no budget; want none yet", cmd, ok)
	}
	if cmd, ok := nextShare(cleared, cands, map[string]int{"default": 3}, rules{}, fitsUpTo(cands, 2, &tried)); cmd != nil || ok {
		t.Errorf("share %+v, %v; want the run ended: three nodes' pods no longer fit", cmd, ok)
	}
}
