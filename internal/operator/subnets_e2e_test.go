package operator_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestZoneWithoutFreeAddressesAvoided (Karpenter v1.6): us-east-1a's subnets have no free IPv4
// address left. The workshop scale-out runs all its pods on nodes of the other zones, and no
// CreateFleet request offers EC2 a subnet of us-east-1a: karpool does not spend launches on a
// zone that cannot take them.
func TestZoneWithoutFreeAddressesAvoided(t *testing.T) {
	h := newHarness(t)
	full := h.sim.SetSubnetFreeAddresses("us-east-1a", 0)
	if len(full) == 0 {
		t.Fatal("the simulator has no subnet in us-east-1a")
	}
	h.startController()
	ns := h.namespace("subnets")
	h.workshopScaleOut(ns, 10)
	for _, in := range h.sim.Instances() {
		if in.Zone == "us-east-1a" && (in.State == "pending" || in.State == "running") {
			t.Errorf("instance %s (%s) runs in us-east-1a, whose subnets have no free address", in.ID, in.InstanceType)
		}
	}
	fleets := 0
	for _, c := range h.sim.Calls() {
		in, ok := c.Input.(*ec2.CreateFleetInput)
		if !ok {
			continue
		}
		fleets++
		for _, cfg := range in.LaunchTemplateConfigs {
			for _, o := range cfg.Overrides {
				if slices.Contains(full, aws.ToString(o.SubnetId)) {
					t.Errorf("CreateFleet offered %s in full subnet %s", o.InstanceType, aws.ToString(o.SubnetId))
				}
			}
		}
	}
	if fleets == 0 {
		t.Error("no CreateFleet call recorded")
	}
}
