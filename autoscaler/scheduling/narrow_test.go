package scheduling

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// narrowClaim: three types; b is cheap in zone-a but dear in zone-b, c is dear on-demand.
func narrowClaim() NodeClaim {
	off := func(zone, ct string, p float64) catalog.Offering {
		return catalog.Offering{Zone: zone, CapacityType: ct, PricePerHour: p, Available: true}
	}
	opt := func(name, family string, offs ...catalog.Offering) InstanceTypeOption {
		return InstanceTypeOption{Type: &catalog.InstanceType{Name: name, Labels: map[string]string{"family": family}},
			PricePerHour: offs[0].PricePerHour, Offerings: offs}
	}
	return NodeClaim{
		InstanceTypes: []InstanceTypeOption{
			opt("a", "x", off("zone-a", "spot", 0.2), off("zone-b", "on-demand", 0.5)),
			opt("b", "y", off("zone-a", "on-demand", 0.3), off("zone-b", "on-demand", 0.9)),
			opt("c", "y", off("zone-b", "spot", 0.4), off("zone-b", "on-demand", 1.5)),
		},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: labelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b", "c"}},
			{Key: labelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"}},
			{Key: labelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand", "spot"}},
			{Key: "family", Operator: corev1.NodeSelectorOpExists},
		},
	}
}

func TestNarrow(t *testing.T) {
	// Every offering counts: b's zone-b price and c's on-demand price leave a below $1/h.
	nc := narrowClaim()
	if !nc.Narrow(nil, 0.8, 0) || !slices.Equal(nc.Requirements[0].Values, []string{"a"}) || nc.WorstPricePerHour() != 0.5 {
		t.Errorf("below $0.80/h: types %v at most $%.2f/h, want [a] at most $0.50/h", nc.Requirements[0].Values, nc.WorstPricePerHour())
	}
	// Spot only: a and c stay, in price order, and the zones and capacity types follow.
	nc = narrowClaim()
	if !nc.Narrow([]string{"spot"}, 1, 0) {
		t.Fatal("spot below $1/h: nothing left")
	}
	want := [][]string{{"a", "c"}, {"zone-a", "zone-b"}, {"spot"}}
	for i, w := range want {
		if got := nc.Requirements[i].Values; !slices.Equal(got, w) {
			t.Errorf("spot below $1/h: %s %v, want %v", nc.Requirements[i].Key, got, w)
		}
	}
	if nc.PricePerHour() != 0.2 || nc.WorstPricePerHour() != 0.4 {
		t.Errorf("spot below $1/h: $%.2f–%.2f/h, want $0.20–0.40/h", nc.PricePerHour(), nc.WorstPricePerHour())
	}
	// The cheapest one only.
	nc = narrowClaim()
	if !nc.Narrow([]string{"spot"}, 1, 1) || !slices.Equal(nc.Requirements[1].Values, []string{"zone-a"}) {
		t.Errorf("the cheapest spot type: zones %v, want [zone-a]", nc.Requirements[1].Values)
	}
	// minValues: two families are required, spot below $0.30/h leaves one.
	nc = narrowClaim()
	nc.Requirements[3].MinValues = ptr.To(2)
	if nc.Narrow([]string{"spot"}, 0.3, 0) {
		t.Error("minValues 2 on family met by one type of family x")
	}
	if nc = narrowClaim(); nc.Narrow(nil, 0.1, 0) {
		t.Error("nothing costs under $0.10/h, yet Narrow kept something")
	}
}
