package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
)

func costLimited(limit string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Annotations = map[string]string{karpoolv1alpha1.AnnotationLimitPerHour: limit}
	}
}

// claimsWorst sums what the new NodeClaims may cost as launched: each its dearest offering.
func claimsWorst(res *scheduling.Result) float64 {
	sum := 0.0
	for i := range res.NodeClaims {
		sum += res.NodeClaims[i].WorstPricePerHour()
	}
	return sum
}

func wantLimitReason(t *testing.T, res *scheduling.Result, n int) {
	t.Helper()
	if len(res.Unschedulable) != n {
		t.Fatalf("%d pods unschedulable, want %d", len(res.Unschedulable), n)
	}
	for _, u := range res.Unschedulable {
		if !strings.Contains(u.Reason, karpoolv1alpha1.AnnotationLimitPerHour) {
			t.Fatalf("pod %s: reason %q does not name the cost limit", u.Pod.Name, u.Reason)
		}
	}
}

// Three pods of 1.5 cpu need more than $0.20/h (one per c5.large at $0.085/h, two per m5.xlarge
// at $0.192/h): some wait, and no NodeClaim can launch past the limit.
func TestCostLimitStopsProvisioning(t *testing.T) {
	in := &scheduling.Input{Pods: pods("p", 3, "1500m", "1Gi"), Pools: []scheduling.Pool{pool("capped", costLimited("0.20"))}}
	res := solve(t, in)
	if len(res.NodeClaims) == 0 || claimsWorst(res) > 0.20 {
		t.Fatalf("%d NodeClaims that may cost $%.3f/h; want some, within $0.20/h", len(res.NodeClaims), claimsWorst(res))
	}
	wantLimitReason(t, res, 3-len(res.Bindings))
	// Every option a NodeClaim lists keeps the pool within the limit, whichever launches.
	for i, nc := range res.NodeClaims {
		others := claimsWorst(res) - nc.WorstPricePerHour()
		for _, o := range nc.InstanceTypes {
			if others+o.PricePerHour > 0.20+1e-9 {
				t.Errorf("NodeClaim %d lists %s at $%.3f/h: with the others it could pass the limit", i, o.Type.Name, o.PricePerHour)
			}
		}
	}
	// Without the annotation all three launch: the limit is what held the third.
	if res := solve(t, &scheduling.Input{Pods: in.Pods, Pools: []scheduling.Pool{pool("capped")}}); len(res.Unschedulable) != 0 {
		t.Fatalf("without a cost limit %d pods unschedulable", len(res.Unschedulable))
	}
}

// fullNode is an on-demand node of pool "capped" in zone-a with no room left.
func fullNode(name, instanceType string) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"karpenter.sh/nodepool": "capped", "topology.kubernetes.io/zone": "zone-a",
		"node.kubernetes.io/instance-type": instanceType, "karpenter.sh/capacity-type": "on-demand"}}}
	full := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"), corev1.ResourcePods: resource.MustParse("0")}
	node.Status.Capacity, node.Status.Allocatable = full, full
	return node
}

func TestCostLimitCountsNodesAndInFlightClaims(t *testing.T) {
	// An m5.xlarge node on-demand in zone-a: $0.192/h of the $0.30/h.
	node := fullNode("old", "m5.xlarge")
	in := &scheduling.Input{Pods: pods("p", 2, "1500m", "1Gi"), Pools: []scheduling.Pool{pool("capped", costLimited("0.30"))},
		Nodes: []scheduling.ExistingNode{{Node: node}}}
	res := solve(t, in)
	if len(res.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims beside the $0.192/h node, want 1 ($0.085/h)", len(res.NodeClaims))
	}
	wantLimitReason(t, res, 1)

	// A NodeClaim not launched yet that may become m5.large or m5.2xlarge counts as the dearer
	// ($0.384/h): nothing more fits under $0.45/h, though its cheapest option is $0.096/h.
	flight := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "capped-flight", Labels: map[string]string{"karpenter.sh/nodepool": "capped"}},
		Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.2xlarge"}}}}}
	in = &scheduling.Input{Pods: pods("p", 2, "3", "1Gi"), Pools: []scheduling.Pool{pool("capped", costLimited("0.45"))},
		NodeClaims: []scheduling.InFlightNodeClaim{{NodeClaim: flight}}}
	res = solve(t, in)
	if len(res.NodeClaims) != 0 {
		t.Fatalf("%d NodeClaims beside an in-flight one that may cost $0.384/h of $0.45/h, want none", len(res.NodeClaims))
	}
	wantLimitReason(t, res, 2)
}

// A pool that may launch spot or on-demand counts a NodeClaim at on-demand until it launches:
// if spot runs out, it launches on-demand, and the limit must still hold.
func TestCostLimitCountsTheDearestOffering(t *testing.T) {
	np := nodePool("capped")
	costLimited("0.10")(np)
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}}
	p := scheduling.Pool{NodePool: np, InstanceTypes: []catalog.InstanceType{itype("c5.large", 2, 4, 29, 0.085, "amd64", true)}}
	res := solve(t, &scheduling.Input{Pods: pods("p", 2, "1500m", "1Gi"), Pools: []scheduling.Pool{p}})
	if len(res.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims, want 1: two spot c5.large ($0.0595/h each) fit $0.10/h, but not on-demand ($0.085/h)", len(res.NodeClaims))
	}
	wantLimitReason(t, res, 1)
}

func TestUnreadableCostLimitLaunchesNothing(t *testing.T) {
	res := solve(t, &scheduling.Input{Pods: pods("p", 2, "1", "1Gi"), Pools: []scheduling.Pool{pool("capped", costLimited("25 dollars"))}})
	if len(res.NodeClaims) != 0 {
		t.Fatalf("%d NodeClaims from a pool whose limit does not parse", len(res.NodeClaims))
	}
	wantLimitReason(t, res, 2)
}

// 1,000 pods of mixed shapes in one batch on the us-east-1 catalog, spot and on-demand: the
// plan stays within the limit whichever offering each NodeClaim launches as (the checker sums
// them too), and the pods that do not fit are the ones the limit holds.
func TestCostLimitHoldsForAThousandPods(t *testing.T) {
	np := workload.BenchNodePool()
	np.Spec.Limits = nil
	np.Annotations = map[string]string{karpoolv1alpha1.AnnotationLimitPerHour: "$5.00/h"}
	ps := workload.Lognormal(1000)
	in := &scheduling.Input{Pods: ps, Pools: []scheduling.Pool{{NodePool: np, InstanceTypes: usEast1(t)}}}
	res := solve(t, in)
	if worst := claimsWorst(res); worst > 5.0+1e-6 || len(res.NodeClaims) == 0 {
		t.Fatalf("%d NodeClaims that may cost $%.4f/h; want some, within $5.00/h", len(res.NodeClaims), worst)
	}
	if len(res.Unschedulable) == 0 {
		t.Fatal("every pod scheduled: the workload should need more than $5.00/h")
	}
	wantLimitReason(t, res, len(res.Unschedulable))
}

// A pool past its limit (lowered after its nodes launched) may still replace a node by a
// cheaper one: the disruption frees the node's cost for its replacement (CostLimitSlack).
func TestCostLimitSlackLetsConsolidationMoveTowardTheLimit(t *testing.T) {
	node := fullNode("stays", "m5.2xlarge")
	// The pod of the m5.xlarge ($0.192/h) being consolidated; the pool may spend $0.30/h and its
	// other node alone costs $0.384/h.
	in := &scheduling.Input{Pods: pods("moved", 1, "1", "1Gi"), Pools: []scheduling.Pool{pool("capped", costLimited("0.30"))},
		Nodes: []scheduling.ExistingNode{{Node: node}}}
	res := solve(t, in)
	wantLimitReason(t, res, 1)
	in.Options.CostLimitSlack = map[string]float64{"capped": 0.192}
	res = solve(t, in)
	if len(res.NodeClaims) != 1 || res.NodeClaims[0].WorstPricePerHour() > 0.192 {
		t.Fatalf("%d NodeClaims (unschedulable %v): want one replacement within the $0.192/h freed", len(res.NodeClaims), res.Unschedulable)
	}
}
