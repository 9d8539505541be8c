package scheduling_test

import (
	"testing"

	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// TestKarpenterMixPassesTheChecker solves Karpenter's benchmark input at the benchmark sizes:
// every pod is scheduled and the checker accepts the result.
func TestKarpenterMixPassesTheChecker(t *testing.T) {
	sizes := []int{1000, 5000, 20000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		in := benchInput(workload.KarpenterMix(n))
		res := scheduling.Solve(in)
		if len(res.Unschedulable) > 0 {
			t.Errorf("%d pods: %d unschedulable, first: %s", n, len(res.Unschedulable), res.Unschedulable[0].Reason)
		}
		if err := schedulingcheck.Check(in, res); err != nil {
			t.Errorf("%d pods: %v", n, err)
		}
	}
	in := benchInput(workload.PreferencePods(4000))
	res := scheduling.Solve(in)
	if len(res.Unschedulable) > 0 {
		t.Errorf("preferences: %d unschedulable", len(res.Unschedulable))
	}
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Errorf("preferences: %v", err)
	}
}
