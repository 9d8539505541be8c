// Package suggest finds the known name a misspelt one was probably meant to be, for "did you
// mean" hints in error messages.
package suggest

import "strings"

// maxDistance is the largest edit distance still offered as a suggestion: beyond two edits the
// guess is more often wrong than helpful.
const maxDistance = 2

// Closest returns the name in names closest to s, ignoring case, within two edits; an exact
// case-insensitive match wins. It returns "" when nothing is close. Ties go to the earlier name,
// so callers pass names sorted for stable messages.
func Closest(s string, names []string) string {
	best, bestD := "", maxDistance+1
	ls := strings.ToLower(s)
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return n
		}
		if d := distance(ls, strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
