package scheduling_test

import (
	"testing"

	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// TestRandomWorkloadsPassTheChecker solves random inputs (pools with requirements, taints, limits
// and minValues; daemonsets; existing nodes; deployments with node affinity, tolerations,
// topology spread, pod affinity and anti-affinity, preferences, host ports, zonal volumes and
// pod-level requests) and has the independent checker verify every result.
func TestRandomWorkloadsPassTheChecker(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 60
	}
	failures := 0
	for seed := int64(1); seed <= int64(n); seed++ {
		in := randomInput(seed)
		res := scheduling.Solve(in)
		if err := schedulingcheck.Check(in, res); err != nil {
			failures++
			if failures <= 5 {
				t.Errorf("seed %d: %v", seed, err)
			}
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d random inputs failed the check", failures, n)
	}
}
