package aws

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

func reservedOffering(zone, id, typ string, room int, price float64) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: "reserved", PricePerHour: price, Available: room > 0,
		ReservationID: id, ReservationType: typ, ReservationCapacity: room}
}

func claimAllowing(reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{Requirements: reqs}}
}

func in(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// Karpenter's launch order: reserved when allowed and available, then spot, then on-demand; one
// reservation per type and zone (the roomiest), default reservations before capacity blocks,
// and at most one capacity block.
func TestLaunchOptionsPreferReservations(t *testing.T) {
	its := []catalog.InstanceType{
		{Name: "m5.xlarge", Offerings: []catalog.Offering{
			{Zone: "a", CapacityType: "on-demand", PricePerHour: 0.19, Available: true},
			{Zone: "a", CapacityType: "spot", PricePerHour: 0.08, Available: true},
			reservedOffering("a", "cr-small", "default", 1, 1e-8),
			reservedOffering("a", "cr-big", "default", 5, 1e-8),
			reservedOffering("b", "cr-b", "default", 2, 1e-8),
			reservedOffering("a", "cr-block", "capacity-block", 4, 1e-9),
		}},
		{Name: "p5.48xlarge", Offerings: []catalog.Offering{reservedOffering("a", "cr-block2", "capacity-block", 1, 1e-6)}},
	}
	zones := map[string]bool{"a": true, "b": true}
	ct, opts := launchOptions(claimAllowing(in(karpv1.LabelCapacityType, "reserved", "spot", "on-demand")), its, zones)
	var ids []string
	for _, o := range opts {
		ids = append(ids, o.offering.ReservationID)
	}
	if ct != "reserved" || len(ids) != 2 || ids[0] != "cr-big" || ids[1] != "cr-b" {
		t.Fatalf("capacity type %s, reservations %v; want reserved [cr-big cr-b]", ct, ids)
	}
	// Only capacity blocks allowed: the cheapest one alone.
	ct, opts = launchOptions(claimAllowing(in(karpv1.LabelCapacityType, "reserved"), in(awsv1.LabelCapacityReservationType, "capacity-block")), its, zones)
	if ct != "reserved" || len(opts) != 1 || opts[0].offering.ReservationID != "cr-block" {
		t.Fatalf("capacity blocks: %s %v", ct, opts)
	}
	// A claim pinned to a reservation launches only there.
	_, opts = launchOptions(claimAllowing(in(karpv1.LabelCapacityType, "reserved"), in(awsv1.LabelCapacityReservationID, "cr-small")), its, zones)
	if len(opts) != 1 || opts[0].offering.ReservationID != "cr-small" {
		t.Fatalf("pinned: %v", opts)
	}
	// Without reserved in its requirements, spot wins; a reservation-id requirement excludes
	// everything unreserved.
	if ct, _ := launchOptions(claimAllowing(in(karpv1.LabelCapacityType, "spot", "on-demand")), its, zones); ct != "spot" {
		t.Fatalf("spot and on-demand allowed: %s", ct)
	}
	if _, opts := launchOptions(claimAllowing(in(karpv1.LabelCapacityType, "on-demand"), in(awsv1.LabelCapacityReservationID, "cr-b")), its, zones); len(opts) != 0 {
		t.Fatalf("on-demand with a reservation id requirement: %v", opts)
	}
}

// Drift reads status.amis as Karpenter does: a GPU node on the standard image has drifted (the
// class's NVIDIA image is the one for it); a CPU node on it has not.
func TestAMISuitsTheNode(t *testing.T) {
	standard := awsv1.AMI{ID: "ami-1", Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist}}}
	cpu := map[string]string{corev1.LabelArchStable: "amd64"}
	gpu := map[string]string{corev1.LabelArchStable: "amd64", awsv1.LabelInstanceGPUCount: "1"}
	arm := map[string]string{corev1.LabelArchStable: "arm64"}
	if !amiSuits(standard, cpu) || amiSuits(standard, gpu) || amiSuits(standard, arm) {
		t.Errorf("standard image suits cpu/gpu/arm: %v %v %v, want true false false", amiSuits(standard, cpu), amiSuits(standard, gpu), amiSuits(standard, arm))
	}
	if !amiSuits(standard, map[string]string{}) {
		t.Error("a NodeClaim without an architecture label must not drift on the image")
	}
}
