package scheduling_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// reservedPool is the small catalog with a reservation of m5.xlarge in zone-a taking room
// nodes, priced as Karpenter prices reserved capacity; the pool allows capacityTypes.
func reservedPool(room int, capacityTypes ...string) scheduling.Pool {
	p := pool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: capacityTypes}}
	})
	for i := range p.InstanceTypes {
		it := &p.InstanceTypes[i]
		if it.Name == "m5.xlarge" {
			it.Offerings = append(slices.Clone(it.Offerings), catalog.Offering{Zone: "zone-a", CapacityType: "reserved", PricePerHour: 0.192 / 1e7,
				Available: room > 0, ReservationID: "cr-1", ReservationType: "default", ReservationCapacity: room})
			catalog.SortOfferings(it.Offerings)
		}
	}
	return p
}

func reservedClaims(res *scheduling.Result) (reserved, other []*scheduling.NodeClaim) {
	for i := range res.NodeClaims {
		nc := &res.NodeClaims[i]
		if _, o := nc.Cheapest(); o.CapacityType == "reserved" {
			reserved = append(reserved, nc)
		} else {
			other = append(other, nc)
		}
	}
	return reserved, other
}

// As Karpenter: reserved capacity first, as many nodes as the reservation takes, then
// on-demand; each reserved NodeClaim may launch only into its reservation.
func TestReservationUsedFirstThenFallback(t *testing.T) {
	// 12 pods of 1.5 cpu: one m5.xlarge (3.9 cpu allocatable) takes 2.
	res := solve(t, &scheduling.Input{Pods: pods("p", 12, "1500m", "1Gi"), Pools: []scheduling.Pool{reservedPool(2, "reserved", "on-demand")}})
	reserved, other := reservedClaims(res)
	if len(reserved) != 2 || len(other) == 0 || len(res.Unschedulable) != 0 {
		t.Fatalf("%d reserved, %d other NodeClaims, %d unschedulable; want 2 reserved and the rest on-demand", len(reserved), len(other), len(res.Unschedulable))
	}
	for _, nc := range reserved {
		if !slices.Equal(nc.CapacityTypes, []string{"reserved"}) || !hasRequirement(nc, awsv1.LabelCapacityReservationID, "cr-1") ||
			!hasRequirement(nc, karpv1.LabelCapacityType, "reserved") || nc.Labels[awsv1.LabelCapacityReservationID] != "cr-1" ||
			nc.Labels[corev1.LabelTopologyZone] != "zone-a" || len(nc.InstanceTypes) != 1 {
			t.Errorf("reserved NodeClaim: capacity types %v, labels %v, requirements %v, %d types; want pinned to cr-1 in zone-a", nc.CapacityTypes, nc.Labels, nc.Requirements, len(nc.InstanceTypes))
		}
	}
	for _, nc := range other {
		if slices.Contains(nc.CapacityTypes, "reserved") || hasRequirement(nc, karpv1.LabelCapacityType, "reserved") || nc.Labels[karpv1.LabelCapacityType] != "on-demand" {
			t.Errorf("fallback NodeClaim: capacity types %v, labels %v; want on-demand only", nc.CapacityTypes, nc.Labels)
		}
		if _, ok := nc.Labels[awsv1.LabelCapacityReservationID]; ok {
			t.Errorf("fallback NodeClaim labelled with a reservation: %v", nc.Labels)
		}
	}
}

// A pool that allows only reserved capacity launches no more than the reservation takes; the
// other pods are unschedulable, saying why.
func TestReservedOnlyPoolStopsAtTheReservation(t *testing.T) {
	res := solve(t, &scheduling.Input{Pods: pods("p", 12, "1500m", "1Gi"), Pools: []scheduling.Pool{reservedPool(2, "reserved")}})
	reserved, other := reservedClaims(res)
	if len(reserved) != 2 || len(other) != 0 || len(res.Unschedulable) != 8 {
		t.Fatalf("%d reserved, %d other NodeClaims, %d unschedulable; want 2, 0 and 8", len(reserved), len(other), len(res.Unschedulable))
	}
	// An exhausted reservation offers nothing at all.
	res = solve(t, &scheduling.Input{Pods: pods("p", 2, "1500m", "1Gi"), Pools: []scheduling.Pool{reservedPool(0, "reserved")}})
	if len(res.NodeClaims) != 0 || len(res.Unschedulable) != 2 {
		t.Fatalf("exhausted reservation: %d NodeClaims, %d unschedulable", len(res.NodeClaims), len(res.Unschedulable))
	}
}

// Reserved capacity is used only by pools that ask for it (Karpenter: a NodePool must be
// compatible with capacity type reserved).
func TestReservationNeedsThePoolToAllowIt(t *testing.T) {
	res := solve(t, &scheduling.Input{Pods: pods("p", 4, "1500m", "1Gi"), Pools: []scheduling.Pool{reservedPool(2, "on-demand")}})
	if reserved, _ := reservedClaims(res); len(reserved) != 0 {
		t.Fatalf("%d reserved NodeClaims from a pool that allows on-demand only", len(reserved))
	}
}

func hasRequirement(nc *scheduling.NodeClaim, key, value string) bool {
	for _, r := range nc.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn && slices.Equal(r.Values, []string{value}) {
			return true
		}
	}
	return false
}

// A NodeClaim pinned to the reservation but not launched yet holds its place: the next plan
// puts one more node into a reservation of 2, not 2.
func TestInFlightNodeClaimHoldsItsReservation(t *testing.T) {
	inflight := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-inflight", Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved"}},
			{Key: awsv1.LabelCapacityReservationID, Operator: corev1.NodeSelectorOpIn, Values: []string{"cr-1"}},
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}}}}}
	in := &scheduling.Input{Pods: pods("p", 12, "1500m", "1Gi"), Pools: []scheduling.Pool{reservedPool(2, "reserved", "on-demand")},
		NodeClaims: []scheduling.InFlightNodeClaim{{NodeClaim: inflight}}}
	res := solve(t, in)
	if reserved, _ := reservedClaims(res); len(reserved) != 1 {
		t.Fatalf("%d new NodeClaims in the reservation with 1 of its 2 places held in flight; want 1", len(reserved))
	}
	// Once launched, the cloud's count says so: the plan may use both places it reports.
	inflight.Status.ProviderID = "aws:///zone-a/i-1"
	if reserved, _ := reservedClaims(solve(t, in)); len(reserved) != 2 {
		t.Fatalf("%d new NodeClaims in the reservation after the in-flight one launched; want 2", len(reserved))
	}
}
