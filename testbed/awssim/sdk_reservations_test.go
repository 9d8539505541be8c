package awssim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpool/karpool/testbed/awssim"
)

// offsetClock is real time moved forward by the test (Options.Clock).
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// advanceTo moves the clock to t (never backwards).
func (c *offsetClock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := time.Until(t); d > c.offset {
		c.offset = d
	}
}

func addReservation(t *testing.T, srv *awssim.Server, spec awssim.CapacityReservationSpec) string {
	t.Helper()
	id, err := srv.AddCapacityReservation(spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// reservation describes one reservation by id through the SDK.
func reservation(t *testing.T, c *ec2.Client, id string) ec2types.CapacityReservation {
	t.Helper()
	out := try(c.DescribeCapacityReservations(testCtx(t, time.Minute), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})).OK(t)
	if len(out.CapacityReservations) != 1 {
		t.Fatalf("describing %s: %+v", id, out.CapacityReservations)
	}
	return out.CapacityReservations[0]
}

func available(t *testing.T, c *ec2.Client, id string) int32 {
	t.Helper()
	return aws.ToInt32(reservation(t, c, id).AvailableInstanceCount)
}

func reservationIDs(rs []ec2types.CapacityReservation) string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, aws.ToString(r.CapacityReservationId))
	}
	return strings.Join(ids, ",")
}

func TestDescribeCapacityReservations(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	c := ec2.NewFromConfig(cfg)
	end := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	odcr := addReservation(t, srv, awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, Tags: map[string]string{"team": "blue"}})
	open := addReservation(t, srv, awssim.CapacityReservationSpec{InstanceType: "c5.large", AvailabilityZone: "us-east-1b",
		TotalInstanceCount: 1, InstanceMatchCriteria: "open", OwnerID: "444455556666"})
	block := addReservation(t, srv, awssim.CapacityReservationSpec{InstanceType: "g5.xlarge", AvailabilityZone: "us-east-1c",
		TotalInstanceCount: 4, ReservationType: "capacity-block", EndDate: &end, Tags: map[string]string{"team": "ml"}})
	if err := srv.SetCapacityReservationState(open, "cancelled"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(odcr, "cr-") || len(odcr) != 3+17 {
		t.Fatalf("reservation id %q, want cr- and 17 hex digits", odcr)
	}

	r := reservation(t, c, block)
	if aws.ToString(r.CapacityReservationArn) != "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/"+block ||
		aws.ToString(r.OwnerId) != "111122223333" || aws.ToString(r.AvailabilityZoneId) != "use1-az3" ||
		r.InstancePlatform != ec2types.CapacityReservationInstancePlatformLinuxUnix || r.Tenancy != ec2types.CapacityReservationTenancyDefault ||
		aws.ToInt32(r.TotalInstanceCount) != 4 || aws.ToInt32(r.AvailableInstanceCount) != 4 || r.State != ec2types.CapacityReservationStateActive ||
		r.EndDateType != ec2types.EndDateTypeLimited || !aws.ToTime(r.EndDate).Equal(end) || r.StartDate == nil ||
		r.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaTargeted || r.ReservationType != ec2types.CapacityReservationTypeCapacityBlock ||
		tagValue(r.Tags, "team") != "ml" {
		t.Errorf("capacity block as described: %+v", r)
	}
	if r := reservation(t, c, odcr); r.EndDateType != ec2types.EndDateTypeUnlimited || r.EndDate != nil || r.ReservationType != ec2types.CapacityReservationTypeDefault {
		t.Errorf("reservation without end date: %+v", r)
	}

	for _, tc := range []struct {
		filters []ec2types.Filter
		want    string
	}{
		{nil, odcr + "," + open + "," + block},
		{[]ec2types.Filter{filter("state", "active")}, odcr + "," + block},
		{[]ec2types.Filter{filter("state", "cancelled")}, open},
		{[]ec2types.Filter{filter("owner-id", "444455556666")}, open},
		{[]ec2types.Filter{filter("instance-type", "m5.large", "g5.xlarge")}, odcr + "," + block},
		{[]ec2types.Filter{filter("availability-zone", "us-east-1b")}, open},
		{[]ec2types.Filter{filter("instance-match-criteria", "open")}, open},
		{[]ec2types.Filter{filter("instance-match-criteria", "targeted"), filter("state", "active")}, odcr + "," + block},
		{[]ec2types.Filter{filter("tag:team", "blue")}, odcr},
		{[]ec2types.Filter{filter("tag-key", "team")}, odcr + "," + block},
		{[]ec2types.Filter{filter("end-date-type", "limited")}, block},
		{[]ec2types.Filter{filter("instance-platform", "Linux/UNIX"), filter("tenancy", "default"), filter("tag:team", "m*")}, block},
		{[]ec2types.Filter{filter("tag:team", "red")}, ""},
	} {
		out := try(c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{Filters: tc.filters})).OK(t)
		if got := reservationIDs(out.CapacityReservations); got != tc.want {
			t.Errorf("filters %+v: %s, want %s", tc.filters, got, tc.want)
		}
	}

	// Pages of one, as Karpenter's paginator reads them.
	var pages []string
	p := ec2.NewDescribeCapacityReservationsPaginator(c, &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1)})
	for p.HasMorePages() {
		pages = append(pages, reservationIDs(try(p.NextPage(ctx)).OK(t).CapacityReservations))
	}
	if got := strings.Join(pages, "|"); got != odcr+"|"+open+"|"+block {
		t.Errorf("pages %s", got)
	}

	_, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("reservation-type", "capacity-block")}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0000000000000ffff"}})
	wantCode(t, err, "InvalidCapacityReservationId.NotFound")
	_, err = c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"reservation-1"}})
	wantCode(t, err, "InvalidCapacityReservationId.Malformed")
	_, err = c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{odcr}, MaxResults: aws.Int32(5)})
	wantCode(t, err, "InvalidParameterCombination")

	// Reservations take tags like other resources.
	try(c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{open}, Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("blue")}}})).OK(t)
	out := try(c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag:team", "blue")}})).OK(t)
	if got := reservationIDs(out.CapacityReservations); got != odcr+","+open {
		t.Errorf("after tagging: %s", got)
	}

	for name, spec := range map[string]awssim.CapacityReservationSpec{
		"unknown type":            {InstanceType: "m5.mega", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1},
		"unknown zone":            {InstanceType: "m5.large", AvailabilityZone: "us-east-1z", TotalInstanceCount: 1},
		"no instances":            {InstanceType: "m5.large", AvailabilityZone: "us-east-1a"},
		"block without end date":  {InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, ReservationType: "capacity-block"},
		"open block":              {InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, ReservationType: "capacity-block", EndDate: &end, InstanceMatchCriteria: "open"},
		"unknown state":           {InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, State: "sleeping"},
		"more available than all": {InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, AvailableInstanceCount: aws.Int32(2)},
	} {
		if _, err := srv.AddCapacityReservation(spec); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := srv.SetCapacityReservationState(odcr, "sleeping"); err == nil {
		t.Error("unknown state accepted")
	}
	if err := srv.SetCapacityReservationState("cr-0000000000000ffff", "active"); err == nil {
		t.Error("unknown reservation accepted")
	}
}

// launchEnv is what the launch tests share: a client, the node profile, an image, the subnets by
// zone (a, b, c) and the security group.
type launchEnv struct {
	srv     *awssim.Server
	c       *ec2.Client
	profile string
	ami     string
	subnets []ec2types.Subnet
	sg      string
}

func newLaunchEnv(t *testing.T, opts awssim.Options) launchEnv {
	srv, cfg := newSim(t, opts)
	c := ec2.NewFromConfig(cfg)
	e := launchEnv{srv: srv, c: c, profile: nodeRole(t, cfg), ami: al2023AMI(t, cfg, "x86_64")}
	e.subnets, e.sg = discovered(t, c)
	return e
}

// reservedLT is a launch template as Karpenter writes it for a reserved launch: targeted at
// one reservation with capacity-reservations-only, and the capacity-block market for a block.
func (e launchEnv) reservedLT(t *testing.T, name, crID string, market ec2types.MarketType) *string {
	return e.lt(t, name, func(d *ec2types.RequestLaunchTemplateData) {
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(crID)}}
		if market != "" {
			d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: market}
		}
	})
}

func (e launchEnv) lt(t *testing.T, name string, edit func(*ec2types.RequestLaunchTemplateData)) *string {
	t.Helper()
	return createLTWith(t, e.c, name, e.ami, e.sg, e.profile, edit).LaunchTemplateId
}

// describe returns one instance through DescribeInstances.
func (e launchEnv) describe(t *testing.T, id string) ec2types.Instance {
	t.Helper()
	out := try(e.c.DescribeInstances(testCtx(t, time.Minute), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).OK(t)
	return out.Reservations[0].Instances[0]
}

func (e launchEnv) info(t *testing.T, id string) awssim.InstanceInfo {
	t.Helper()
	for _, in := range e.srv.Instances() {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("no instance %s", id)
	return awssim.InstanceInfo{}
}

// fleetErrors lists the codes of a fleet's errors.
func fleetErrors(out *ec2.CreateFleetOutput) string {
	var codes []string
	for _, e := range out.Errors {
		codes = append(codes, aws.ToString(e.ErrorCode))
	}
	return strings.Join(codes, ",")
}

func TestTargetedCreateFleetConsumesTheReservation(t *testing.T) {
	e := newLaunchEnv(t, awssim.Options{})
	ctx := testCtx(t, 2*time.Minute)
	cr := addReservation(t, e.srv, awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2})
	lt := e.reservedLT(t, "karpool/reserved", cr, "")
	// A reservation's capacity is held: an insufficient-capacity fault does not reach it.
	e.srv.SetFaults(awssim.Faults{InsufficientCapacity: []awssim.CapacityFault{{InstanceType: "m5.large"}}})
	var ids []string
	for i := 1; i <= 2; i++ {
		out := try(e.c.CreateFleet(ctx, fleetInput(lt, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(e.subnets[:1], "m5.large")))).OK(t)
		if len(out.Instances) != 1 || len(out.Errors) != 0 || out.Instances[0].Lifecycle != ec2types.InstanceLifecycleOnDemand {
			t.Fatalf("launch %d: %+v errors %s", i, out.Instances, fleetErrors(out))
		}
		ids = append(ids, out.Instances[0].InstanceIds[0])
		if got := available(t, e.c, cr); got != int32(2-i) {
			t.Fatalf("after launch %d: %d available", i, got)
		}
	}
	inst := e.describe(t, ids[0])
	spec := inst.CapacityReservationSpecification
	if aws.ToString(inst.CapacityReservationId) != cr || spec.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly ||
		spec.CapacityReservationTarget == nil || aws.ToString(spec.CapacityReservationTarget.CapacityReservationId) != cr || inst.InstanceLifecycle != "" {
		t.Errorf("reserved instance: id %s spec %+v lifecycle %q", aws.ToString(inst.CapacityReservationId), spec, inst.InstanceLifecycle)
	}
	if info := e.info(t, ids[0]); info.CapacityType != "reserved" || info.CapacityReservationID != cr {
		t.Errorf("admin view: %+v", info)
	}
	for _, f := range []ec2types.Filter{filter("capacity-reservation-id", cr),
		filter("capacity-reservation-specification.capacity-reservation-preference", "capacity-reservations-only"),
		filter("capacity-reservation-specification.capacity-reservation-target.capacity-reservation-id", cr)} {
		out := try(e.c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f}})).OK(t)
		if len(out.Reservations) != 2 {
			t.Errorf("filter %s: %d instances", aws.ToString(f.Name), len(out.Reservations))
		}
	}

	// The third launch finds the reservation used up: a per-override error Karpenter reads.
	out := try(e.c.CreateFleet(ctx, fleetInput(lt, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(e.subnets[:1], "m5.large")))).OK(t)
	if len(out.Instances) != 0 || fleetErrors(out) != "ReservationCapacityExceeded" || !strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), cr) {
		t.Fatalf("launch beyond the reservation: %+v errors %+v", out.Instances, out.Errors)
	}
	// Terminating gives the slot back at once (shutting-down), once.
	try(e.c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})).OK(t)
	try(e.c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})).OK(t)
	if got := available(t, e.c, cr); got != 1 {
		t.Fatalf("after termination: %d available, want 1", got)
	}
	eventually(t, 10*time.Second, "terminated", func() bool { return e.info(t, ids[0]).State == "terminated" })
	// Even brought back and terminated again (admin state change), it gives the slot once.
	if err := e.srv.ChangeState(ids[0], "running"); err != nil {
		t.Fatal(err)
	}
	try(e.c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})).OK(t)
	if got := available(t, e.c, cr); got != 1 {
		t.Fatalf("after terminated: %d available, want 1", got)
	}
	// Pools sharing the reservation stop at its count: a target of 3 launches the one slot left
	// and the second pool reports the reservation used up.
	out = try(e.c.CreateFleet(ctx, fleetInput(lt, ec2types.DefaultTargetCapacityTypeOnDemand, 3,
		append(fleetOverrides(e.subnets[:1], "m5.large"), fleetOverrides(e.subnets[:1], "m5.large")...)))).OK(t)
	if n := launched(out); n != 1 || fleetErrors(out) != "ReservationCapacityExceeded" || available(t, e.c, cr) != 0 {
		t.Errorf("shared pools launched %d (errors %s), %d available", n, fleetErrors(out), available(t, e.c, cr))
	}
}

func launched(out *ec2.CreateFleetOutput) int {
	n := 0
	for _, g := range out.Instances {
		n += len(g.InstanceIds)
	}
	return n
}

func TestTargetedLaunchRefusals(t *testing.T) {
	e := newLaunchEnv(t, awssim.Options{})
	ctx := testCtx(t, 2*time.Minute)
	cr := addReservation(t, e.srv, awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
	lt := e.reservedLT(t, "karpool/reserved", cr, "")
	for name, tc := range map[string]struct {
		ct        ec2types.DefaultTargetCapacityType
		overrides []ec2types.FleetLaunchTemplateOverridesRequest
		code      string
	}{
		"other type": {ec2types.DefaultTargetCapacityTypeOnDemand, fleetOverrides(e.subnets[:1], "m5.xlarge"), "InvalidParameterCombination"},
		"other zone": {ec2types.DefaultTargetCapacityTypeOnDemand, fleetOverrides(e.subnets[1:2], "m5.large"), "InvalidParameterCombination"},
		"spot":       {ec2types.DefaultTargetCapacityTypeSpot, fleetOverrides(e.subnets[:1], "m5.large"), "InvalidParameterCombination"},
		"as a block": {ec2types.DefaultTargetCapacityTypeCapacityBlock, fleetOverrides(e.subnets[:1], "m5.large"), "InvalidParameterCombination"},
	} {
		out := try(e.c.CreateFleet(ctx, fleetInput(lt, tc.ct, 1, tc.overrides))).OK(t)
		if len(out.Instances) != 0 || fleetErrors(out) != tc.code || !strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), cr) {
			t.Errorf("%s: %+v errors %+v", name, out.Instances, out.Errors)
		}
	}
	if got := available(t, e.c, cr); got != 1 {
		t.Fatalf("refused launches took slots: %d available", got)
	}

	// RunInstances names the reservation in the request.
	run := func(typ ec2types.InstanceType, subnet int, max int32) (*ec2.RunInstancesOutput, error) {
		return e.c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(max), InstanceType: typ,
			ImageId: aws.String(e.ami), SubnetId: e.subnets[subnet].SubnetId,
			CapacityReservationSpecification: &ec2types.CapacityReservationSpecification{
				CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
				CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr)}}})
	}
	for code, spec := range map[string]*ec2types.CapacityReservationSpecification{
		"InvalidParameterCombination": {CapacityReservationPreference: ec2types.CapacityReservationPreferenceOpen,
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr)}},
		"InvalidParameterValue": {CapacityReservationTarget: &ec2types.CapacityReservationTarget{
			CapacityReservationResourceGroupArn: aws.String("arn:aws:resource-groups:us-east-1:111122223333:group/g")}},
	} {
		_, err := e.c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large",
			ImageId: aws.String(e.ami), SubnetId: e.subnets[0].SubnetId, CapacityReservationSpecification: spec})
		wantCode(t, err, code)
	}
	_, err := run("m5.xlarge", 0, 1)
	wantCode(t, err, "InvalidParameterCombination")
	_, err = run("m5.large", 2, 1)
	wantCode(t, err, "InvalidParameterCombination")
	// MaxCount beyond the reservation launches what it holds.
	res := try(run("m5.large", 0, 3)).OK(t)
	if len(res.Instances) != 1 || aws.ToString(res.Instances[0].CapacityReservationId) != cr {
		t.Fatalf("RunInstances into the reservation: %+v", res.Instances)
	}
	_, err = run("m5.large", 0, 1)
	wantCode(t, err, "ReservationCapacityExceeded")

	// An inactive or unknown reservation is refused, naming it.
	if err := e.srv.SetCapacityReservationState(cr, "cancelled"); err != nil {
		t.Fatal(err)
	}
	try(e.c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(res.Instances[0].InstanceId)}})).OK(t)
	if got := available(t, e.c, cr); got != 0 {
		t.Errorf("a cancelled reservation got a slot back: %d available", got)
	}
	_, err = run("m5.large", 0, 1)
	wantCode(t, err, "InvalidParameterValue")
	if !strings.Contains(err.Error(), cr) {
		t.Errorf("error does not name the reservation: %v", err)
	}
	gone := e.reservedLT(t, "karpool/gone", "cr-0000000000000ffff", "")
	out := try(e.c.CreateFleet(ctx, fleetInput(gone, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(e.subnets[:1], "m5.large")))).OK(t)
	if fleetErrors(out) != "InvalidCapacityReservationId.NotFound" {
		t.Errorf("unknown reservation: %+v", out.Errors)
	}
}

func TestOpenReservationsTakeUntargetedLaunches(t *testing.T) {
	e := newLaunchEnv(t, awssim.Options{})
	ctx := testCtx(t, 2*time.Minute)
	open := addReservation(t, e.srv, awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 1, InstanceMatchCriteria: "open"})
	targeted := addReservation(t, e.srv, awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
	none := e.lt(t, "karpool/none", func(d *ec2types.RequestLaunchTemplateData) {
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}
	})
	unspecified := e.lt(t, "karpool/unspecified", nil)
	launch := func(lt *string, ct ec2types.DefaultTargetCapacityType) ec2types.Instance {
		t.Helper()
		out := try(e.c.CreateFleet(ctx, fleetInput(lt, ct, 1, fleetOverrides(e.subnets[:1], "m5.large")))).OK(t)
		if launched(out) != 1 {
			t.Fatalf("launch: errors %+v", out.Errors)
		}
		return e.describe(t, out.Instances[0].InstanceIds[0])
	}

	// none (what Karpenter sets on On-Demand and Spot launches) never uses a reservation.
	for _, ct := range []ec2types.DefaultTargetCapacityType{ec2types.DefaultTargetCapacityTypeOnDemand, ec2types.DefaultTargetCapacityTypeSpot} {
		in := launch(none, ct)
		if in.CapacityReservationId != nil || in.CapacityReservationSpecification.CapacityReservationPreference != ec2types.CapacityReservationPreferenceNone {
			t.Errorf("preference none, %s: in %s, spec %+v", ct, aws.ToString(in.CapacityReservationId), in.CapacityReservationSpecification)
		}
	}
	// Spot never goes into an On-Demand reservation.
	if in := launch(unspecified, ec2types.DefaultTargetCapacityTypeSpot); in.CapacityReservationId != nil {
		t.Errorf("spot instance in %s", aws.ToString(in.CapacityReservationId))
	}
	if available(t, e.c, open) != 1 {
		t.Fatal("launches that must not use the open reservation took its slot")
	}
	// Unspecified preference: EC2 puts the On-Demand instance into the open reservation.
	in := launch(unspecified, ec2types.DefaultTargetCapacityTypeOnDemand)
	if aws.ToString(in.CapacityReservationId) != open || in.CapacityReservationSpecification.CapacityReservationPreference != ec2types.CapacityReservationPreferenceOpen ||
		in.CapacityReservationSpecification.CapacityReservationTarget != nil || available(t, e.c, open) != 0 {
		t.Errorf("unspecified preference: in %q, spec %+v", aws.ToString(in.CapacityReservationId), in.CapacityReservationSpecification)
	}
	// Karpenter does not count an open match as reserved.
	if info := e.info(t, aws.ToString(in.InstanceId)); info.CapacityType != "on-demand" || info.CapacityReservationID != open {
		t.Errorf("admin view of an open match: %+v", info)
	}
	// The open reservation is full and the targeted one takes only targeted launches.
	if in := launch(unspecified, ec2types.DefaultTargetCapacityTypeOnDemand); in.CapacityReservationId != nil {
		t.Errorf("launch beyond the open reservation went into %s", aws.ToString(in.CapacityReservationId))
	}
	if available(t, e.c, targeted) != 1 {
		t.Error("an untargeted launch used a targeted reservation")
	}
}

func TestCapacityBlock(t *testing.T) {
	clk := &offsetClock{}
	e := newLaunchEnv(t, awssim.Options{Clock: clk.Now})
	ctx := testCtx(t, 2*time.Minute)
	end := clk.Now().Add(6 * time.Hour).UTC().Truncate(time.Second)
	cb := addReservation(t, e.srv, awssim.CapacityReservationSpec{InstanceType: "g5.xlarge", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, ReservationType: "capacity-block", EndDate: &end})
	lt := e.reservedLT(t, "karpool/block", cb, ec2types.MarketTypeCapacityBlock)
	onDemandLT := e.reservedLT(t, "karpool/block-as-od", cb, "")
	overrides := fleetOverrides(e.subnets[:1], "g5.xlarge")

	// The block takes only capacity-block launches, and those only target a block.
	for name, tc := range map[string]struct {
		lt *string
		ct ec2types.DefaultTargetCapacityType
	}{
		"on-demand fleet":    {lt, ec2types.DefaultTargetCapacityTypeOnDemand},
		"on-demand market":   {onDemandLT, ec2types.DefaultTargetCapacityTypeCapacityBlock},
		"untargeted request": {e.lt(t, "karpool/untargeted-block", nil), ec2types.DefaultTargetCapacityTypeCapacityBlock},
	} {
		out := try(e.c.CreateFleet(ctx, fleetInput(tc.lt, tc.ct, 1, overrides))).OK(t)
		if launched(out) != 0 || fleetErrors(out) != "InvalidParameterCombination" {
			t.Errorf("%s: %+v errors %+v", name, out.Instances, out.Errors)
		}
	}

	out := try(e.c.CreateFleet(ctx, fleetInput(lt, ec2types.DefaultTargetCapacityTypeCapacityBlock, 1, overrides))).OK(t)
	if launched(out) != 1 || out.Instances[0].Lifecycle != ec2types.InstanceLifecycleCapacityBlock {
		t.Fatalf("capacity block launch: %+v errors %+v", out.Instances, out.Errors)
	}
	first := out.Instances[0].InstanceIds[0]
	if in := e.describe(t, first); in.InstanceLifecycle != ec2types.InstanceLifecycleTypeCapacityBlock || aws.ToString(in.CapacityReservationId) != cb {
		t.Errorf("block instance: lifecycle %q reservation %s", in.InstanceLifecycle, aws.ToString(in.CapacityReservationId))
	}
	if info := e.info(t, first); info.CapacityType != "reserved" {
		t.Errorf("admin view: %+v", info)
	}
	byLifecycle := try(e.c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("instance-lifecycle", "capacity-block")}})).OK(t)
	if len(byLifecycle.Reservations) != 1 {
		t.Errorf("instance-lifecycle capacity-block: %d instances", len(byLifecycle.Reservations))
	}

	// 31 minutes before the end the block still runs and takes launches (RunInstances too).
	clk.advanceTo(end.Add(-31 * time.Minute))
	run := try(e.c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "g5.xlarge",
		SubnetId: e.subnets[0].SubnetId, LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: lt}})).OK(t)
	second := aws.ToString(run.Instances[0].InstanceId)
	if run.Instances[0].InstanceLifecycle != ec2types.InstanceLifecycleTypeCapacityBlock || available(t, e.c, cb) != 0 {
		t.Fatalf("RunInstances into the block: %+v", run.Instances[0])
	}
	for _, id := range []string{first, second} {
		if s := e.info(t, id).State; s != "pending" && s != "running" {
			t.Fatalf("%s is %s 31 minutes before the block ends", id, s)
		}
	}
	// 30 minutes before the end AWS terminates them; the reservation expires at the end.
	clk.advanceTo(end.Add(-30 * time.Minute))
	eventually(t, 10*time.Second, "the block's instances terminated", func() bool {
		return e.info(t, first).State == "terminated" && e.info(t, second).State == "terminated"
	})
	if r := e.describe(t, first).StateReason; r == nil || aws.ToString(r.Code) != "Server.ScheduledStop" {
		t.Errorf("state reason %+v", r)
	}
	if r := reservation(t, e.c, cb); r.State != ec2types.CapacityReservationStateActive || aws.ToInt32(r.AvailableInstanceCount) != 2 {
		t.Errorf("before its end: %s, %d available", r.State, aws.ToInt32(r.AvailableInstanceCount))
	}
	clk.advanceTo(end)
	eventually(t, 10*time.Second, "the block expired", func() bool {
		return reservation(t, e.c, cb).State == ec2types.CapacityReservationStateExpired
	})
	out = try(e.c.CreateFleet(ctx, fleetInput(lt, ec2types.DefaultTargetCapacityTypeCapacityBlock, 1, overrides))).OK(t)
	if launched(out) != 0 || fleetErrors(out) != "InvalidParameterValue" {
		t.Errorf("launch into an expired block: %+v", out.Errors)
	}
}

// A block bought ahead is pending until its start.
func TestCapacityBlockStarts(t *testing.T) {
	clk := &offsetClock{}
	srv, cfg := newSim(t, awssim.Options{Clock: clk.Now})
	c := ec2.NewFromConfig(cfg)
	start := clk.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	end := start.Add(24 * time.Hour)
	cb := addReservation(t, srv, awssim.CapacityReservationSpec{InstanceType: "g5.xlarge", AvailabilityZone: "us-east-1b",
		TotalInstanceCount: 1, ReservationType: "capacity-block", StartDate: &start, EndDate: &end})
	if r := reservation(t, c, cb); r.State != ec2types.CapacityReservationStatePending || !aws.ToTime(r.StartDate).Equal(start) {
		t.Fatalf("before its start: %s from %v", r.State, r.StartDate)
	}
	clk.advanceTo(start)
	eventually(t, 10*time.Second, "the block active", func() bool {
		return reservation(t, c, cb).State == ec2types.CapacityReservationStateActive
	})
}

func TestCapacityReservationAdminAPI(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	c := ec2.NewFromConfig(cfg)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.AdminURL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("capacity-reservations", `{"instanceType":"m5.large","availabilityZone":"us-east-1a","totalInstanceCount":3,
		"instanceMatchCriteria":"open","endDate":"2099-01-01T00:00:00Z","tags":{"team":"blue"}}`)
	var created struct{ ID string }
	if err := json.Unmarshal([]byte(body), &created); code != 200 || err != nil || !strings.HasPrefix(created.ID, "cr-") {
		t.Fatalf("POST capacity-reservations: %d %s", code, body)
	}
	if r := reservation(t, c, created.ID); aws.ToInt32(r.TotalInstanceCount) != 3 || r.InstanceMatchCriteria != "open" || tagValue(r.Tags, "team") != "blue" {
		t.Errorf("created through the admin API: %+v", r)
	}
	for _, bad := range []string{`{"instanceType":"m5.large","availabilityZone":"us-east-1a"}`, `{"instanceType":"m5.large","zone":"us-east-1a"}`} {
		if code, body := post("capacity-reservations", bad); code != 400 {
			t.Errorf("POST %s: %d %s", bad, code, body)
		}
	}
	if code, body := post("capacity-reservation-state", `{"id":"`+created.ID+`","state":"expired"}`); code != 200 {
		t.Fatalf("POST capacity-reservation-state: %d %s", code, body)
	}
	if r := reservation(t, c, created.ID); r.State != ec2types.CapacityReservationStateExpired {
		t.Errorf("state after the admin change: %s", r.State)
	}
	if code, _ := post("capacity-reservation-state", `{"id":"cr-0000000000000ffff","state":"active"}`); code != 404 {
		t.Errorf("unknown reservation: %d", code)
	}
	if code, _ := post("capacity-reservation-state", `{"id":"`+created.ID+`","state":"gone"}`); code != 400 {
		t.Errorf("unknown state: %d", code)
	}
	resp, err := http.Get(srv.AdminURL() + "capacity-reservations")
	if err != nil {
		t.Fatal(err)
	}
	var list []awssim.CapacityReservationInfo
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list) != 1 || list[0].ID != created.ID || list[0].State != "expired" || list[0].AvailableInstanceCount != 3 ||
		list[0].AvailabilityZoneID != "use1-az1" || list[0].EndDateType != "limited" || list[0].Tags["team"] != "blue" {
		t.Errorf("GET capacity-reservations: %v %+v", err, list)
	}
	resp, err = http.Get(srv.AdminURL() + "state")
	if err != nil {
		t.Fatal(err)
	}
	var st awssim.StateInfo
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.CapacityReservations) != 1 || st.CapacityReservations[0].ID != created.ID {
		t.Errorf("GET state: %v %+v", err, st.CapacityReservations)
	}
}
