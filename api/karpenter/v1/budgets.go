package v1

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ParseSchedule reads a disruption budget's schedule as Karpenter does: robfig/cron's standard
// parser (five fields or a descriptor such as @daily), in UTC.
func ParseSchedule(schedule string) (s cron.Schedule, err error) {
	// The parser indexes into the input on assumptions about its shape; whatever it trips on is
	// an invalid schedule, not a crash.
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("cannot be parsed (%v)", r)
		}
	}()
	return cron.ParseStandard("TZ=UTC " + schedule)
}

// Active reports whether the budget applies at now: always when it has no schedule, otherwise
// while a schedule hit lies within the last Duration.
func (b *Budget) Active(now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, fmt.Errorf("budget %q: schedule and duration go together", b.Nodes)
	}
	s, err := ParseSchedule(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("budget schedule %q: %w", *b.Schedule, err)
	}
	now = now.UTC()
	return !s.Next(now.Add(-b.Duration.Duration)).After(now), nil
}

// allowed is how many of numNodes nodes the budget lets be disrupted at once while active. A
// percentage rounds up, as a PDB's maxUnavailable does: 10 % of 5 nodes is one node, not none.
func (b *Budget) allowed(numNodes int) (int, error) {
	v := intstr.Parse(b.Nodes)
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, numNodes, true)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("budget nodes %q: want a count or a percentage", b.Nodes)
	}
	return n, nil
}

// AllowedDisruptions is how many of the pool's numNodes nodes may be disrupting at once for the
// reason at now: the smallest value among the active budgets that cover the reason (a budget
// without reasons covers all), or no limit when none does. A budget that cannot be read allows
// nothing (fail closed, as Karpenter does); the error says which.
func (np *NodePool) AllowedDisruptions(reason DisruptionReason, numNodes int, now time.Time) (int, error) {
	allowed := math.MaxInt32
	var firstErr error
	for i := range np.Spec.Disruption.Budgets {
		b := &np.Spec.Disruption.Budgets[i]
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		n, err := b.allowedAt(numNodes, now)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("NodePool %s spec.disruption.budgets[%d]: %w", np.Name, i, err)
		}
		allowed = min(allowed, n)
	}
	return allowed, firstErr
}

// allowedAt is the budget's allowance at now: no limit while inactive, none when unreadable.
func (b *Budget) allowedAt(numNodes int, now time.Time) (int, error) {
	active, err := b.Active(now)
	if err != nil {
		return 0, err
	}
	if !active {
		return math.MaxInt32, nil
	}
	return b.allowed(numNodes)
}
