package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
)

// AnnotationLimitPerHour on a NodePool caps, in USD per hour, what the pool's nodes and
// in-flight NodeClaims may cost together, as spec.limits caps their cpu and memory: karpool
// launches nothing that would take the pool past it. Karpenter has no such limit; it ignores
// the annotation.
const AnnotationLimitPerHour = "karpool.dev/limit-per-hour"

// LimitPerHourPattern is the annotation's form: USD per hour as a decimal number, optionally
// written "$25/h". The CUE schema holds the same pattern (schema/nodepool.cue).
const LimitPerHourPattern = `^\$?[0-9]{1,9}(\.[0-9]{1,6})?(/h)?$`

var limitPerHour = regexp.MustCompile(LimitPerHourPattern)

// ParseLimitPerHour reads the annotation's value: "25", "25.50" or "$25.50/h".
func ParseLimitPerHour(s string) (float64, error) {
	if !limitPerHour.MatchString(s) {
		return 0, fmt.Errorf("annotation %s: %q is not USD per hour (write it as 25, 25.50 or $25.50/h)", AnnotationLimitPerHour, s)
	}
	num := s
	if num[0] == '$' {
		num = num[1:]
	}
	if n := len(num); n > 2 && num[n-2:] == "/h" {
		num = num[:n-2]
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil { // unreachable after the pattern, kept so a change to it cannot slip through
		return 0, fmt.Errorf("annotation %s: %q: %w", AnnotationLimitPerHour, s, err)
	}
	return v, nil
}
