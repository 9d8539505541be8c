package operator_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/testbed/awssim"
)

// TestCapacityReservationFirstThenOnDemand: an On-Demand Capacity Reservation of 2 m5.xlarge
// selected by tag is resolved into the class's status, and 6 pods of 1.5 cpu (2 per node) get
// 2 nodes launched into the reservation (pinned to it, labelled with it, its count used up in
// EC2) and the third on-demand outside it, as Karpenter falls back once a reservation is full.
func TestCapacityReservationFirstThenOnDemand(t *testing.T) {
	h := newHarness(t)
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	class := &awsv1.EC2NodeClass{}
	h.eventually("the class's subnets resolved", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return err
		}
		if len(class.Status.Subnets) == 0 {
			return fmt.Errorf("no subnets in status yet")
		}
		return nil
	})
	zone := class.Status.Subnets[0].Zone
	id, err := h.sim.AddCapacityReservation(awssim.CapacityReservationSpec{InstanceType: "m5.xlarge", AvailabilityZone: zone,
		TotalInstanceCount: 2, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(class.DeepCopy())
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}
	if err := h.c.Patch(h.ctx, class, patch); err != nil {
		t.Fatal(err)
	}
	h.eventually("the reservation in the class's status", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return err
		}
		c := meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady)
		if len(class.Status.CapacityReservations) != 1 || class.Status.CapacityReservations[0].ID != id || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v, condition %+v", class.Status.CapacityReservations, c)
		}
		return nil
	})

	h.workshopPool("reserved", karpv1.NodePoolRequirement{Key: "node.kubernetes.io/instance-type", Operator: "In", Values: []string{"m5.xlarge"}},
		karpv1.NodePoolRequirement{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"reserved", "on-demand"}})
	ns := h.namespace("reserved")
	h.deployment(ns, "train", 6, "1500m")
	h.runningPods(ns, "train", 6, 3*time.Minute)

	reserved, onDemand := 0, 0
	for _, nc := range h.nodeClaims() {
		switch nc.Labels[karpv1.LabelCapacityType] {
		case "reserved":
			reserved++
			if nc.Labels[awsv1.LabelCapacityReservationID] != id || nc.Labels[awsv1.LabelCapacityReservationType] != "default" || !pinnedTo(&nc, id) {
				t.Errorf("reserved NodeClaim %s: labels %v, requirements %v; want pinned to and labelled with %s", nc.Name, nc.Labels, nc.Spec.Requirements, id)
			}
		case "on-demand":
			onDemand++
			if _, ok := nc.Labels[awsv1.LabelCapacityReservationID]; ok || pinnedTo(&nc, id) {
				t.Errorf("on-demand NodeClaim %s carries the reservation: %v", nc.Name, nc.Labels)
			}
		}
	}
	if reserved != 2 || onDemand != 1 {
		t.Fatalf("%d reserved and %d on-demand NodeClaims; want 2 in the reservation and 1 on-demand", reserved, onDemand)
	}
	inReservation := 0
	for _, in := range h.sim.Instances() {
		if in.CapacityReservationID == id {
			inReservation++
		}
	}
	for _, r := range h.sim.CapacityReservations() {
		if r.ID == id && (r.AvailableInstanceCount != 0 || inReservation != 2) {
			t.Errorf("in EC2 the reservation has %d places left and %d instances; want 0 and 2", r.AvailableInstanceCount, inReservation)
		}
	}
}

// pinnedTo reports whether the NodeClaim may launch only into reservation id.
func pinnedTo(nc *karpv1.NodeClaim, id string) bool {
	for _, r := range nc.Spec.Requirements {
		if r.Key == awsv1.LabelCapacityReservationID && r.Operator == "In" && len(r.Values) == 1 && r.Values[0] == id {
			return true
		}
	}
	return false
}
