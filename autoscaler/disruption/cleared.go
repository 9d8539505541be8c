package disruption

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/karpool/karpool/autoscaler/scheduling"
)

// A scale-down leaves many underused nodes and the budget lets a few go per step. Karpenter
// validates every step for the validation delay, so a fleet of twenty nodes at the default 10 %
// budget needs six or more steps of at least 15 s each. karpool validates, with the first step,
// every candidate that could be deleted together with it, and then deletes that cleared set a
// budget's share at a time: each share is simulated again on the cluster as it is just before it
// goes (the pods of the shares before it have moved), and a share that no longer fits ends the
// run. The budget holds throughout: a share waits until the nodes before it are gone.

// clearedFor is how long a cleared set waits for its next share after the last one went; a
// scale-down that stalls longer (a drain held by a PodDisruptionBudget) is validated again.
const clearedFor = time.Minute

// aheadOf returns the other candidates that could be deleted together with the command's,
// without new nodes, idlest first: the longest such prefix of the rest, then those of the next
// maxGrow that can still join one by one (as grow does: a prefix stops at the first node whose
// pods do not fit, while later ones may). Nil when the command replaces nodes or no other
// candidate can join it.
func aheadOf(cmd *Command, cands []Candidate, r rules, simulate func(map[string]bool) *scheduling.Result) []Candidate {
	if cmd == nil || len(cmd.Replacements) > 0 {
		return nil
	}
	var rest []Candidate
	for _, cand := range cands {
		if _, err := minSavingsFor(cand.Pool, r.minSavings); err != nil {
			continue // consolidate leaves these out too
		}
		if !slices.ContainsFunc(cmd.Candidates, func(c Candidate) bool { return c.NodeClaim.Name == cand.NodeClaim.Name }) {
			rest = append(rest, cand)
		}
	}
	slices.SortStableFunc(rest, func(a, b Candidate) int { return cmp.Compare(b.Idle, a.Idle) })
	rest = rest[:min(len(rest), max(0, maxMultiNode-len(cmd.Candidates)))]
	// Deleting more nodes only takes room away, so success shrinks with length: binary search.
	lo, hi := 0, len(rest)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		group := append(slices.Clone(cmd.Candidates), rest[:mid]...)
		if next, _ := evaluate(group, r, simulate, 0); next != nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	ahead := slices.Clip(rest[:lo])
	for i, cand := range rest[lo:] {
		if i == maxGrow {
			break
		}
		group := append(append(slices.Clone(cmd.Candidates), ahead...), cand)
		if next, _ := evaluate(group, r, simulate, 0); next != nil {
			ahead = append(ahead, cand)
		}
	}
	return ahead
}

// clearAhead validates a command's cleared set on a fresh state, as its command is validated:
// the ones still candidates must still be able to go together with it, without new nodes. It
// returns their names, or nil.
func clearAhead(cmd *Command, ahead []Candidate, cands []Candidate, r rules, simulate func(map[string]bool) *scheduling.Result) map[string]bool {
	if len(ahead) == 0 || len(cmd.Replacements) > 0 {
		return nil
	}
	names := map[string]bool{}
	for _, a := range ahead {
		names[a.NodeClaim.Name] = true
	}
	group := slices.Clone(cmd.Candidates)
	for _, cand := range cands {
		if names[cand.NodeClaim.Name] {
			group = append(group, cand)
		}
	}
	if len(group) == len(cmd.Candidates) {
		return nil
	}
	if next, _ := evaluate(group, r, simulate, 0); next == nil {
		return nil
	}
	out := map[string]bool{}
	for _, cand := range group[len(cmd.Candidates):] {
		out[cand.NodeClaim.Name] = true
	}
	return out
}

// nextShare is the next budget's share of a cleared set among the current candidates, simulated
// again now: a delete command, or nil with ok false when the share no longer fits (the run
// ends). Nil with ok true: no share now (the budget is taken, or none of the set is a candidate
// at the moment).
func nextShare(cleared map[string]bool, cands []Candidate, budget map[string]int, r rules, simulate func(map[string]bool) *scheduling.Result) (cmd *Command, ok bool) {
	left := maps.Clone(budget)
	var share []Candidate
	for _, cand := range cands {
		if cleared[cand.NodeClaim.Name] && left[cand.Pool.Name] > 0 {
			left[cand.Pool.Name]--
			share = append(share, cand)
		}
	}
	if len(share) == 0 {
		return nil, true
	}
	cmd, _ = evaluate(share, r, simulate, 0)
	if cmd == nil {
		return nil, false
	}
	cmd.Method = "multi"
	if len(share) == 1 {
		cmd.Method = "single"
	}
	return cmd, true
}
