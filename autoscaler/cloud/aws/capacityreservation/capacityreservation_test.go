package capacityreservation

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

func TestOfferingsPricedAsKarpenterPricesThem(t *testing.T) {
	its := []catalog.InstanceType{{Name: "m5.xlarge", Offerings: []catalog.Offering{
		{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.192 + 0.008, VolumesPerHour: 0.008, Available: true},
		{Zone: "us-east-1b", CapacityType: "on-demand", PricePerHour: 0.200, VolumesPerHour: 0.008, Available: true},
	}}, {Name: "c5.large", Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.09, Available: true}}}}
	rs := []awsv1.CapacityReservation{
		{ID: "cr-a", InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", ReservationType: TypeDefault, State: StateActive},
		{ID: "cr-full", InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1b", ReservationType: TypeDefault, State: StateActive},
		{ID: "cr-block", InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", ReservationType: TypeCapacityBlock, State: StateExpiring},
		// Not offered: no subnet in us-east-1c (the type has no offering there).
		{ID: "cr-c", InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1c", ReservationType: TypeDefault, State: StateActive},
	}
	room := map[string]int{"cr-a": 2, "cr-full": 0, "cr-block": 5, "cr-c": 3}
	got := WithOfferings(its, rs, func(id string) int { return room[id] })
	if len(its[0].Offerings) != 2 {
		t.Fatalf("the input was modified: %d offerings", len(its[0].Offerings))
	}
	byID := map[string]catalog.Offering{}
	for _, o := range got[0].Offerings {
		if o.CapacityType == "reserved" {
			byID[o.ReservationID] = o
		}
	}
	if len(byID) != 3 || len(got[1].Offerings) != 1 {
		t.Fatalf("reserved offerings %v; c5.large %v", byID, got[1].Offerings)
	}
	a := byID["cr-a"]
	if want := 0.192/catalog.ReservedPriceDivisor + 0.008; a.PricePerHour != want || !a.Available || a.ReservationCapacity != 2 || a.Zone != "us-east-1a" {
		t.Errorf("cr-a: %+v, want price %g, available, room 2", a, want)
	}
	if got[0].Offerings[0].ReservationID != "cr-a" {
		t.Errorf("the cheapest offering is %+v, want the available reservation", got[0].Offerings[0])
	}
	if byID["cr-full"].Available || byID["cr-block"].Available {
		t.Errorf("an exhausted reservation and an expiring block must be unavailable: %+v %+v", byID["cr-full"], byID["cr-block"])
	}
}

func TestCapacityBlockExpiresFortyMinutesBeforeItsEnd(t *testing.T) {
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cr := ec2types.CapacityReservation{CapacityReservationId: aws.String("cr-1"), InstanceType: aws.String("p5.48xlarge"),
		AvailabilityZone: aws.String("us-east-1a"), OwnerId: aws.String("111122223333"), EndDate: &end,
		InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted, ReservationType: ec2types.CapacityReservationTypeCapacityBlock}
	for _, tc := range []struct {
		now  time.Time
		want string
	}{{end.Add(-41 * time.Minute), StateActive}, {end.Add(-40 * time.Minute), StateExpiring}, {end.Add(-time.Minute), StateExpiring}} {
		r, err := fromEC2(cr, tc.now)
		if err != nil || r.State != tc.want || r.ReservationType != TypeCapacityBlock || r.EndTime == nil {
			t.Errorf("%v before the end: %+v, %v; want state %s", end.Sub(tc.now), r, err, tc.want)
		}
	}
	// A default reservation with an end date never expires early: it becomes plain on-demand.
	cr.ReservationType = ec2types.CapacityReservationTypeDefault
	if r, _ := fromEC2(cr, end.Add(-time.Minute)); r.State != StateActive {
		t.Errorf("default reservation: state %s", r.State)
	}
	cr.InstanceMatchCriteria = "someday"
	if _, err := fromEC2(cr, end); err == nil {
		t.Error("an unknown instance match criteria was accepted")
	}
}

func TestNextCheckWakesForTheExpiry(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	end := metav1.NewTime(now.Add(ExpiringBefore + 20*time.Second))
	if d := NextCheck([]awsv1.CapacityReservation{{EndTime: &end}}, now); d != 20*time.Second {
		t.Errorf("next check in %v, want 20s (when the block starts expiring)", d)
	}
	if d := NextCheck(nil, now); d != PollEvery {
		t.Errorf("next check in %v, want %v", d, PollEvery)
	}
}

func TestSelectorTermsBecomeQueries(t *testing.T) {
	in, _ := input(awsv1.CapacityReservationSelectorTerm{ID: "cr-1"})
	if len(in.CapacityReservationIds) != 1 || in.MaxResults != nil {
		t.Errorf("id term: %+v (EC2 refuses MaxResults with ids)", in)
	}
	in, _ = input(awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{"team": "ml", "any": "*"}, InstanceMatchCriteria: "open"})
	names := map[string][]string{}
	for _, f := range in.Filters {
		names[aws.ToString(f.Name)] = f.Values
	}
	if names["state"][0] != "active" || names["tag:team"][0] != "ml" || names["tag-key"][0] != "any" || names["instance-match-criteria"][0] != "open" {
		t.Errorf("filters %v", names)
	}
	if in, _ := input(awsv1.CapacityReservationSelectorTerm{}); in != nil {
		t.Errorf("an empty term made a query: %+v", in)
	}
}

func TestAvailabilityFollowsLaunchesAndTerminations(t *testing.T) {
	p := New(nil, time.Now)
	p.available["cr-1"] = 1
	p.MarkLaunched("cr-1")
	p.MarkLaunched("cr-1")
	if p.Available("cr-1") != 0 {
		t.Fatalf("after two launches: %d", p.Available("cr-1"))
	}
	p.MarkTerminated("cr-1")
	p.MarkTerminated("cr-unknown")
	if p.Available("cr-1") != 1 || p.Available("cr-unknown") != 0 {
		t.Fatalf("after a termination: %d, unknown %d", p.Available("cr-1"), p.Available("cr-unknown"))
	}
	p.MarkExhausted("cr-1")
	if p.Available("cr-1") != 0 {
		t.Fatalf("after exhaustion: %d", p.Available("cr-1"))
	}
}
