package scheduling_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/costbound"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// smallDeploymentsCase is one measurement of the many-small-Deployments profile
// (workload.SmallDeploymentsShapes): the engine's cost over the whole-pod bound.
type smallDeploymentsCase struct {
	pool        string
	pods        int
	seed        int64
	cost, bound float64
	solveTime   time.Duration
	boundTime   time.Duration
}

func (c smallDeploymentsCase) String() string {
	return fmt.Sprintf("%-3s %5d pods seed %d: $%.2f/h (solved in %s), whole-pod bound $%.2f/h (%s), cost %.5f × it",
		c.pool, c.pods, c.seed, c.cost, c.solveTime.Round(time.Millisecond), c.bound, c.boundTime.Round(100*time.Microsecond), c.cost/c.bound)
}

// measureSmallDeployments solves the profile on a pool and checks the result with the
// independent checker.
func measureSmallDeployments(t *testing.T, pool string, np *karpv1.NodePool, pods int, seed int64) smallDeploymentsCase {
	t.Helper()
	in := lognormalInput(t, workload.Pods(workload.SmallDeploymentsShapes(pods, seed)), np)
	start := time.Now()
	res := scheduling.Solve(in)
	solveTime := time.Since(start)
	if len(res.Unschedulable) > 0 {
		t.Fatalf("%s, %d pods, seed %d: %d unschedulable: %s", pool, pods, seed, len(res.Unschedulable), res.Unschedulable[0].Reason)
	}
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Fatalf("%s, %d pods, seed %d: checker: %v", pool, pods, seed, err)
	}
	p := boundProblem(in)
	start = time.Now()
	bound, err := costbound.WholePods(p)
	if err != nil {
		t.Fatalf("%s, %d pods, seed %d: whole-pod bound: %v", pool, pods, seed, err)
	}
	c := smallDeploymentsCase{pool: pool, pods: pods, seed: seed, cost: res.TotalPricePerHour(), bound: bound,
		solveTime: solveTime, boundTime: time.Since(start)}
	if c.bound > c.cost*(1+1e-9) {
		t.Errorf("%v: the whole-pod bound is above a feasible packing", c)
	}
	return c
}

var smallDeploymentsPools = []struct {
	name string
	np   func() *karpv1.NodePool
}{{"cmr", cmrPool}, {"all", allNonBurstablePool}}

// smallDeploymentsTarget is issue 12's target: at most 1.03 × the whole-pod bound on every seed
// (seeds 1-6 reach 1.0300 at worst, cmr seed 4; TestCalibrateSmallDeployments prints them).
const smallDeploymentsTarget = 1.03

// TestSmallDeploymentsCostNearBound guards the engine's packing on many small Deployments with
// varied memory:cpu ratios (issue 12, item 8) against the whole-pod bound, on c/m/r and on all
// non-burstable types: seeds 1 and 4 at 2,000 pods (4 is the hardest), seed 1 at 10,000.
func TestSmallDeploymentsCostNearBound(t *testing.T) {
	if testing.Short() {
		t.Skip("solves six workloads of up to 10k pods")
	}
	for _, pl := range smallDeploymentsPools {
		for _, run := range []struct {
			pods int
			seed int64
		}{{2000, 1}, {2000, 4}, {10000, 1}} {
			c := measureSmallDeployments(t, pl.name, pl.np(), run.pods, run.seed)
			t.Log(c)
			if r := c.cost / c.bound; r > smallDeploymentsTarget {
				t.Errorf("%v: want ≤ %.2f × the whole-pod bound", c, smallDeploymentsTarget)
			}
		}
	}
}

// TestCalibrateSmallDeployments prints cost / whole-pod bound of the profile for seeds 1 to 6
// (SEEDS=n for more), 2,000 and 10,000 pods, on c/m/r and all non-burstable types.
func TestCalibrateSmallDeployments(t *testing.T) {
	if os.Getenv("CALIBRATE") == "" {
		t.Skip("calibration tool, not a test: set CALIBRATE=1 to run it")
	}
	seeds := int64(6)
	if v := os.Getenv("SEEDS"); v != "" {
		fmt.Sscan(v, &seeds)
	}
	for _, pl := range smallDeploymentsPools {
		for _, pods := range []int{2000, 10000} {
			sum, worst := 0.0, 0.0
			for seed := int64(1); seed <= seeds; seed++ {
				c := measureSmallDeployments(t, pl.name, pl.np(), pods, seed)
				t.Log(c)
				sum += c.cost / c.bound
				worst = max(worst, c.cost/c.bound)
			}
			t.Logf("%-3s %5d pods: mean %.4f, worst %.4f × the whole-pod bound", pl.name, pods, sum/float64(seeds), worst)
		}
	}
}
