package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

// TestRepackKeepsPoolLimits solves many small Deployments (a plan the final re-packing changes)
// under pool limits set to exactly what the unlimited plan launches: cpu, memory, nodes. The
// sub-problems see only what their NodeClaims used, so the plan stays within every limit (the
// checker verifies it), and every pod still finds a place.
func TestRepackKeepsPoolLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("solves 2,000 pods four times")
	}
	pods := workload.Pods(workload.SmallDeploymentsShapes(2000, 4))
	free := scheduling.Solve(lognormalInput(t, pods, cmrPool()))
	var cpu, mem int64
	for i := range free.NodeClaims {
		it, _ := free.NodeClaims[i].Cheapest()
		cpu += it.Capacity[catalog.CPU]
		mem += it.Capacity[catalog.Memory]
	}
	nodes := *resource.NewQuantity(int64(len(free.NodeClaims)), resource.DecimalSI)
	for name, limits := range map[string]corev1.ResourceList{
		"cpu":    {corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)},
		"memory": {corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)},
		"nodes":  {"nodes": nodes},
	} {
		np := cmrPool()
		np.Spec.Limits = limits
		in := lognormalInput(t, pods, np)
		res := scheduling.Solve(in)
		if err := schedulingcheck.Check(in, res); err != nil {
			t.Errorf("%s limit %v: checker: %v", name, limits, err)
		}
		if len(res.Unschedulable) > 0 {
			t.Errorf("%s limit %v: %d pods unschedulable, first: %s", name, limits, len(res.Unschedulable), res.Unschedulable[0].Reason)
		}
	}
}
