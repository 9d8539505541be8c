package awssim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// capacityBlockReclaim is how long before a Capacity Block's end AWS terminates its instances.
const capacityBlockReclaim = 30 * time.Minute

// capacityReservation is an On-Demand Capacity Reservation or a Capacity Block.
type capacityReservation struct {
	id, arn, owner   string
	instanceType     string
	zone             zone
	total, available int32
	state            ec2types.CapacityReservationState
	start, created   time.Time
	end              time.Time // zero: no end date (EndDateType unlimited)
	match            ec2types.InstanceMatchCriteria
	kind             ec2types.CapacityReservationType
	tags             []ec2types.Tag
	// activateAtStart: added with a future StartDate, it is pending until then (EC2 delivers
	// Capacity Blocks bought in advance at their start).
	activateAtStart bool
}

func (r *capacityReservation) capacityBlock() bool {
	return r.kind == ec2types.CapacityReservationTypeCapacityBlock
}

// CapacityReservationSpec is a capacity reservation to add to the account (AddCapacityReservation,
// POST /_awssim/capacity-reservations). EC2 creates them through CreateCapacityReservation or a
// Capacity Block purchase; the simulator has them added by the test instead.
type CapacityReservationSpec struct {
	InstanceType       string `json:"instanceType"`
	AvailabilityZone   string `json:"availabilityZone"`
	TotalInstanceCount int32  `json:"totalInstanceCount"`
	// AvailableInstanceCount defaults to TotalInstanceCount; less models slots held by
	// instances outside the simulator.
	AvailableInstanceCount *int32 `json:"availableInstanceCount,omitempty"`
	// OwnerID defaults to the simulator's account (another account: a shared reservation).
	OwnerID string `json:"ownerId,omitempty"`
	// State defaults to active, or pending until StartDate when StartDate is in the future.
	State     string     `json:"state,omitempty"`
	StartDate *time.Time `json:"startDate,omitempty"`
	// EndDate makes EndDateType limited; a capacity block needs one.
	EndDate *time.Time `json:"endDate,omitempty"`
	// InstanceMatchCriteria is open or targeted (default, and the only value for a capacity block).
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
	// ReservationType is default (the default) or capacity-block.
	ReservationType string            `json:"reservationType,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
}

// CapacityReservationInfo is a capacity reservation as CapacityReservations and the admin API
// report it.
type CapacityReservationInfo struct {
	ID                     string            `json:"id"`
	Arn                    string            `json:"arn"`
	OwnerID                string            `json:"ownerId"`
	InstanceType           string            `json:"instanceType"`
	AvailabilityZone       string            `json:"availabilityZone"`
	AvailabilityZoneID     string            `json:"availabilityZoneId"`
	InstancePlatform       string            `json:"instancePlatform"`
	Tenancy                string            `json:"tenancy"`
	TotalInstanceCount     int32             `json:"totalInstanceCount"`
	AvailableInstanceCount int32             `json:"availableInstanceCount"`
	State                  string            `json:"state"`
	StartDate              time.Time         `json:"startDate"`
	EndDate                *time.Time        `json:"endDate,omitempty"`
	EndDateType            string            `json:"endDateType"`
	InstanceMatchCriteria  string            `json:"instanceMatchCriteria"`
	ReservationType        string            `json:"reservationType"`
	Tags                   map[string]string `json:"tags"`
	// Instances are the instances holding a slot of it (running or pending).
	Instances []string `json:"instances"`
}

// errUnknownReservation is wrapped by the errors about a reservation id the account lacks.
var errUnknownReservation = errors.New("no such capacity reservation")

var reservationStates = []ec2types.CapacityReservationState{ec2types.CapacityReservationStateActive,
	ec2types.CapacityReservationStateExpired, ec2types.CapacityReservationStateCancelled,
	ec2types.CapacityReservationStatePending, ec2types.CapacityReservationStateFailed}

// AddCapacityReservation adds a capacity reservation to the account and returns its id.
func (s *Server) AddCapacityReservation(spec CapacityReservationSpec) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r, err := s.newReservation(spec, now)
	if err != nil {
		return "", err
	}
	s.st.reservations[r.id] = r
	s.st.advanceReservations(now)
	s.logf("capacity reservation %s: %d × %s in %s (%s, %s)", r.id, r.total, r.instanceType, r.zone.name, r.kind, r.state)
	s.notify()
	return r.id, nil
}

// newReservation validates a spec into a reservation with a new id. Call with s.mu.
func (s *Server) newReservation(spec CapacityReservationSpec, now time.Time) (*capacityReservation, error) {
	if _, ok := s.spec(spec.InstanceType); !ok {
		return nil, fmt.Errorf("instance type %q is not offered in %s", spec.InstanceType, s.opts.Region)
	}
	z, ok := s.st.zoneByName(spec.AvailabilityZone)
	if !ok {
		return nil, fmt.Errorf("unknown availability zone %q (zones: %s)", spec.AvailabilityZone, strings.Join(zoneNames(s.st.zones), ", "))
	}
	if spec.TotalInstanceCount < 1 {
		return nil, fmt.Errorf("totalInstanceCount must be at least 1, got %d", spec.TotalInstanceCount)
	}
	r := &capacityReservation{instanceType: spec.InstanceType, zone: z, total: spec.TotalInstanceCount,
		available: spec.TotalInstanceCount, owner: spec.OwnerID, created: now.UTC().Truncate(time.Second),
		kind: ec2types.CapacityReservationType(spec.ReservationType), match: ec2types.InstanceMatchCriteria(spec.InstanceMatchCriteria)}
	if a := spec.AvailableInstanceCount; a != nil {
		if *a < 0 || *a > r.total {
			return nil, fmt.Errorf("availableInstanceCount %d is not between 0 and totalInstanceCount %d", *a, r.total)
		}
		r.available = *a
	}
	if err := r.setKind(); err != nil {
		return nil, err
	}
	if err := r.setDates(spec); err != nil {
		return nil, err
	}
	if err := r.setState(spec.State, now); err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(spec.Tags) {
		setTags(&r.tags, []ec2types.Tag{{Key: aws.String(k), Value: aws.String(spec.Tags[k])}})
	}
	if err := validateTagKeys(r.tags); err != nil {
		return nil, err
	}
	if r.owner == "" {
		r.owner = s.opts.AccountID
	}
	r.id = s.st.ids.id("cr")
	r.arn = fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", s.opts.Region, r.owner, r.id)
	return r, nil
}

// setKind defaults and checks the reservation type and match criteria.
func (r *capacityReservation) setKind() error {
	switch r.kind {
	case "":
		r.kind = ec2types.CapacityReservationTypeDefault
	case ec2types.CapacityReservationTypeDefault, ec2types.CapacityReservationTypeCapacityBlock:
	default:
		return fmt.Errorf("reservationType %q is not default or capacity-block", r.kind)
	}
	switch r.match {
	case "":
		r.match = ec2types.InstanceMatchCriteriaTargeted
	case ec2types.InstanceMatchCriteriaOpen, ec2types.InstanceMatchCriteriaTargeted:
	default:
		return fmt.Errorf("instanceMatchCriteria %q is not open or targeted", r.match)
	}
	// Capacity Blocks only take launches that target them.
	if r.capacityBlock() && r.match != ec2types.InstanceMatchCriteriaTargeted {
		return fmt.Errorf("a capacity block's instanceMatchCriteria is targeted")
	}
	return nil
}

func (r *capacityReservation) setDates(spec CapacityReservationSpec) error {
	r.start = r.created
	if spec.StartDate != nil {
		r.start = spec.StartDate.UTC()
	}
	if spec.EndDate != nil {
		r.end = spec.EndDate.UTC()
		if !r.end.After(r.start) {
			return fmt.Errorf("endDate %s is not after startDate %s", r.end.Format(time.RFC3339), r.start.Format(time.RFC3339))
		}
	}
	if r.capacityBlock() && r.end.IsZero() {
		return fmt.Errorf("a capacity block needs an endDate")
	}
	return nil
}

func (r *capacityReservation) setState(state string, now time.Time) error {
	if state == "" {
		r.state = ec2types.CapacityReservationStateActive
		if r.start.After(now) {
			r.state, r.activateAtStart = ec2types.CapacityReservationStatePending, true
		}
		return nil
	}
	r.state = ec2types.CapacityReservationState(state)
	if !contains(reservationStates, r.state) {
		return fmt.Errorf("state %q is not one of %v", state, reservationStates)
	}
	return nil
}

// CapacityReservations lists the account's capacity reservations by id.
func (s *Server) CapacityReservations() []CapacityReservationInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []CapacityReservationInfo{}
	for _, id := range sortedKeys(s.st.reservations) {
		out = append(out, s.reservationInfo(s.st.reservations[id]))
	}
	return out
}

// reservationInfo reports a reservation. Call with s.mu.
func (s *Server) reservationInfo(r *capacityReservation) CapacityReservationInfo {
	d := s.renderReservation(r)
	info := CapacityReservationInfo{ID: r.id, Arn: r.arn, OwnerID: r.owner, InstanceType: r.instanceType,
		AvailabilityZone: r.zone.name, AvailabilityZoneID: r.zone.id, InstancePlatform: string(d.InstancePlatform),
		Tenancy: string(d.Tenancy), TotalInstanceCount: r.total, AvailableInstanceCount: r.available, State: string(r.state),
		StartDate: r.start, EndDate: d.EndDate, EndDateType: string(d.EndDateType), InstanceMatchCriteria: string(r.match),
		ReservationType: string(r.kind), Tags: map[string]string{}, Instances: []string{}}
	for _, t := range r.tags {
		info.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, id := range s.st.order {
		if in := s.st.instances[id]; in != nil && in.reservation == r && !in.slotReleased {
			info.Instances = append(info.Instances, id)
		}
	}
	return info
}

// SetCapacityReservationState changes a reservation's state as EC2 would on its own (expired,
// cancelled, failed, pending, active). Instances already in it keep running; only launches see
// the new state.
func (s *Server) SetCapacityReservationState(id, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.reservations[id]
	if r == nil {
		return fmt.Errorf("capacity reservation %s: %w", id, errUnknownReservation)
	}
	st := ec2types.CapacityReservationState(state)
	if !contains(reservationStates, st) {
		return fmt.Errorf("state %q is not one of %v", state, reservationStates)
	}
	r.state, r.activateAtStart = st, false
	s.logf("capacity reservation %s is %s", id, st)
	if st == ec2types.CapacityReservationStateExpired || st == ec2types.CapacityReservationStateCancelled {
		s.st.leaveReservation(r)
	}
	s.notify()
	return nil
}

// leaveReservation detaches the instances of a reservation that ended: they keep running as
// plain on-demand instances, with no reservation id (a Capacity Block's were reclaimed before).
func (st *state) leaveReservation(r *capacityReservation) {
	for _, id := range st.order {
		if in := st.instances[id]; in != nil && in.reservation == r {
			in.reservation, in.slotReleased = nil, true
		}
	}
}

// advanceReservations applies the reservations' dates: one added with a future StartDate
// becomes active then; AWS terminates the instances of a Capacity Block 30 minutes before its
// end; a reservation past its EndDate expires. Call with s.mu.
func (st *state) advanceReservations(now time.Time) bool {
	changed := false
	for _, id := range sortedKeys(st.reservations) {
		r := st.reservations[id]
		if r.activateAtStart && r.state == ec2types.CapacityReservationStatePending && !now.Before(r.start) {
			r.state, r.activateAtStart = ec2types.CapacityReservationStateActive, false
			changed = true
		}
		if r.end.IsZero() {
			continue
		}
		if r.capacityBlock() && !now.Before(r.end.Add(-capacityBlockReclaim)) && st.reclaimCapacityBlock(r, now) {
			changed = true
		}
		if r.state == ec2types.CapacityReservationStateActive && !now.Before(r.end) {
			r.state = ec2types.CapacityReservationStateExpired
			st.s.logf("capacity reservation %s expired", r.id)
			st.leaveReservation(r)
			changed = true
		}
	}
	return changed
}

// reclaimCapacityBlock terminates the instances still in a Capacity Block near its end, as AWS
// does (an AWS-initiated termination: the usual state-change notifications follow).
func (st *state) reclaimCapacityBlock(r *capacityReservation, now time.Time) bool {
	changed := false
	for _, id := range st.order {
		in := st.instances[id]
		if in == nil || in.reservation != r || in.state == ec2types.InstanceStateNameShuttingDown || in.state == ec2types.InstanceStateNameTerminated {
			continue
		}
		// The code and message are the simulator's: EC2 documents the termination, not its reason.
		st.s.beginTermination(in, now, &ec2types.StateReason{Code: aws.String("Server.ScheduledStop"),
			Message: aws.String(fmt.Sprintf("Server.ScheduledStop: Capacity Block %s ends at %s", r.id, r.end.Format(time.RFC3339)))},
			"Service initiated")
		changed = true
	}
	return changed
}

// releaseSlot gives an instance's reservation slot back when it leaves pending/running, once,
// and only while the reservation is active (an expired or cancelled one has no slots to give).
func (st *state) releaseSlot(in *instance) {
	r := in.reservation
	if r == nil || in.slotReleased {
		return
	}
	in.slotReleased = true
	if r.state == ec2types.CapacityReservationStateActive && r.available < r.total {
		r.available++
	}
}

// ---- DescribeCapacityReservations ----

func validReservationID(id string) bool {
	rest, ok := strings.CutPrefix(id, "cr-")
	if !ok || (len(rest) != 8 && len(rest) != 17) {
		return false
	}
	return strings.Trim(rest, "0123456789abcdef") == ""
}

// reservationNotFound is EC2's error for a reservation id the account does not have.
func reservationNotFound(id string) *apiError {
	if !validReservationID(id) {
		return apiErr(400, "InvalidCapacityReservationId.Malformed", "Invalid id: \"%s\" (expecting \"cr-...\")", id)
	}
	return apiErr(400, "InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
}

func (s *Server) describeCapacityReservations(rc *reqCtx, in *ec2.DescribeCapacityReservationsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	// Karpenter's provider notes EC2 refuses MaxResults with ids, as DescribeInstances does.
	if err := checkMaxResults(in.MaxResults, 1, 1000, "capacityReservationIdSet", len(in.CapacityReservationIds)); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.CapacityReservationIds {
		if s.st.reservations[id] == nil {
			return nil, reservationNotFound(id)
		}
	}
	out := &ec2.DescribeCapacityReservationsOutput{CapacityReservations: []ec2types.CapacityReservation{}}
	for _, id := range sortedKeys(s.st.reservations) {
		r := s.st.reservations[id]
		if len(in.CapacityReservationIds) > 0 && !contains(in.CapacityReservationIds, id) {
			continue
		}
		ok, err := matchFilters(in.Filters, r.filterValues)
		if err != nil {
			return nil, err
		}
		if ok {
			out.CapacityReservations = append(out.CapacityReservations, s.renderReservation(r))
		}
	}
	var err error
	out.CapacityReservations, out.NextToken, err = page(out.CapacityReservations, in.MaxResults, in.NextToken, 0)
	return out, err
}

// filterValues are the values of DescribeCapacityReservations' filters (the SDK documents the
// names; EC2 has no reservation-type filter).
func (r *capacityReservation) filterValues(name string) ([]string, bool) {
	const dateFormat = "2006-01-02T15:04:05.000Z"
	switch name {
	case "instance-type":
		return []string{r.instanceType}, true
	case "owner-id":
		return []string{r.owner}, true
	case "instance-platform":
		return []string{string(ec2types.CapacityReservationInstancePlatformLinuxUnix)}, true
	case "availability-zone":
		return []string{r.zone.name}, true
	case "tenancy":
		return []string{string(ec2types.CapacityReservationTenancyDefault)}, true
	case "state":
		return []string{string(r.state)}, true
	case "start-date":
		return []string{r.start.Format(dateFormat)}, true
	case "end-date":
		if r.end.IsZero() {
			return nil, true
		}
		return []string{r.end.Format(dateFormat)}, true
	case "end-date-type":
		return []string{string(r.endDateType())}, true
	case "instance-match-criteria":
		return []string{string(r.match)}, true
	case "outpost-arn", "placement-group-arn":
		return nil, true
	}
	return tagFilter(r.tags, name)
}

func (r *capacityReservation) endDateType() ec2types.EndDateType {
	if r.end.IsZero() {
		return ec2types.EndDateTypeUnlimited
	}
	return ec2types.EndDateTypeLimited
}

// renderReservation is a reservation as DescribeCapacityReservations reports it. Call with s.mu.
func (s *Server) renderReservation(r *capacityReservation) ec2types.CapacityReservation {
	out := ec2types.CapacityReservation{
		CapacityReservationId: aws.String(r.id), CapacityReservationArn: aws.String(r.arn), OwnerId: aws.String(r.owner),
		InstanceType: aws.String(r.instanceType), AvailabilityZone: aws.String(r.zone.name), AvailabilityZoneId: aws.String(r.zone.id),
		InstancePlatform: ec2types.CapacityReservationInstancePlatformLinuxUnix, Tenancy: ec2types.CapacityReservationTenancyDefault,
		TotalInstanceCount: aws.Int32(r.total), AvailableInstanceCount: aws.Int32(r.available), State: r.state,
		StartDate: aws.Time(r.start), CreateDate: aws.Time(r.created), EndDateType: r.endDateType(),
		InstanceMatchCriteria: r.match, ReservationType: r.kind, Tags: cloneTags(r.tags),
		EbsOptimized: aws.Bool(true), EphemeralStorage: aws.Bool(false), Interruptible: aws.Bool(false),
		CapacityAllocations: []ec2types.CapacityAllocation{{AllocationType: ec2types.AllocationTypeUsed, Count: aws.Int32(r.total - r.available)}},
	}
	if !r.end.IsZero() {
		out.EndDate = aws.Time(r.end)
	}
	return out
}

// ---- launches ----

// reservationTarget is the reservation id a launch names, "" when it names none.
func (sp *launchSpec) reservationTarget() string {
	if sp.crTarget == nil {
		return ""
	}
	return aws.ToString(sp.crTarget.CapacityReservationId)
}

// targetReservation resolves the reservation a launch must go into (nil: none) and checks it
// can take this launch's type, zone and market. fleetType is CreateFleet's
// DefaultTargetCapacityType ("" for RunInstances). EC2 refuses such a launch rather than
// falling back to On-Demand capacity. Availability is the caller's: it counts within a request.
// Call with s.mu, after checkLaunch.
func (s *Server) targetReservation(sp *launchSpec, fleetType ec2types.DefaultTargetCapacityType) (*capacityReservation, *apiError) {
	if aerr := sp.checkReservationRequest(fleetType); aerr != nil {
		return nil, aerr
	}
	id := sp.reservationTarget()
	if id == "" {
		if sp.crPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly {
			return nil, nil
		}
		// Only reservations, none named: any open one that fits.
		r := s.openReservation(sp)
		if r == nil {
			return nil, apiErr(400, "ReservationCapacityExceeded", "There is no open Capacity Reservation with available capacity for %s in %s, and the launch allows only Capacity Reservations (capacity-reservations-only).",
				sp.instanceType, zoneOf(sp.subnet))
		}
		return r, nil
	}
	r := s.st.reservations[id]
	if r == nil {
		return nil, reservationNotFound(id)
	}
	return r, s.fitsReservation(sp, r, fleetType)
}

// checkReservationRequest refuses the combinations of preference, target and market EC2 (or the
// simulator) does not take, before any reservation is looked at.
func (sp *launchSpec) checkReservationRequest(fleetType ec2types.DefaultTargetCapacityType) *apiError {
	if sp.crTarget != nil && sp.crTarget.CapacityReservationResourceGroupArn != nil {
		return apiErr(400, "InvalidParameterValue", "The simulator does not model Capacity Reservation groups (CapacityReservationResourceGroupArn %s).", aws.ToString(sp.crTarget.CapacityReservationResourceGroupArn))
	}
	if sp.marketType == ec2types.MarketTypeInterruptibleCapacityReservation {
		return apiErr(400, "InvalidParameterValue", "The simulator does not model interruptible Capacity Reservations (MarketType %s).", sp.marketType)
	}
	target := sp.reservationTarget()
	switch sp.crPreference {
	case "", ec2types.CapacityReservationPreferenceCapacityReservationsOnly:
	case ec2types.CapacityReservationPreferenceOpen, ec2types.CapacityReservationPreferenceNone:
		if target != "" {
			return apiErr(400, "InvalidParameterCombination", "CapacityReservationPreference %s cannot be combined with CapacityReservationTarget %s.", sp.crPreference, target)
		}
	default:
		return apiErr(400, "InvalidParameterValue", "Value (%s) for parameter CapacityReservationPreference is invalid.", sp.crPreference)
	}
	block := sp.marketType == ec2types.MarketTypeCapacityBlock || fleetType == ec2types.DefaultTargetCapacityTypeCapacityBlock
	if block && target == "" {
		return apiErr(400, "InvalidParameterCombination", "A Capacity Block launch (market type or target capacity type capacity-block) must target a Capacity Block with CapacityReservationSpecification.CapacityReservationTarget.")
	}
	return nil
}

// fitsReservation checks a targeted reservation takes the launch.
func (s *Server) fitsReservation(sp *launchSpec, r *capacityReservation, fleetType ec2types.DefaultTargetCapacityType) *apiError {
	if r.state != ec2types.CapacityReservationStateActive {
		return apiErr(400, "InvalidParameterValue", "Capacity Reservation %s is %s: instances launch only into an active Capacity Reservation.", r.id, r.state)
	}
	if sp.instanceType != r.instanceType {
		return apiErr(400, "InvalidParameterCombination", "The instance type %s does not match the instance type %s of Capacity Reservation %s.", sp.instanceType, r.instanceType, r.id)
	}
	if z := zoneOf(sp.subnet); z != r.zone.name {
		return apiErr(400, "InvalidParameterCombination", "The Availability Zone %s does not match the Availability Zone %s of Capacity Reservation %s.", z, r.zone.name, r.id)
	}
	marketBlock := sp.marketType == ec2types.MarketTypeCapacityBlock
	fleetBlock := fleetType == ec2types.DefaultTargetCapacityTypeCapacityBlock
	if r.capacityBlock() && (!marketBlock || (fleetType != "" && !fleetBlock)) {
		return apiErr(400, "InvalidParameterCombination", "Capacity Reservation %s is a Capacity Block: launch into it with InstanceMarketOptions.MarketType capacity-block (and, in EC2 Fleet, DefaultTargetCapacityType capacity-block); got market type %q, target capacity type %q.",
			r.id, sp.marketType, fleetType)
	}
	if !r.capacityBlock() && (marketBlock || fleetBlock || sp.capacityType == catalog.CapacityTypeSpot || sp.marketType == ec2types.MarketTypeSpot) {
		return apiErr(400, "InvalidParameterCombination", "Capacity Reservation %s is an On-Demand Capacity Reservation: launch into it as On-Demand; got market type %q, target capacity type %q.",
			r.id, sp.marketType, fleetType)
	}
	return nil
}

// reservedCount cuts a fleet pool's count to the slots its reservation (nil: none) has left
// beyond those the request's earlier pools hold.
func reservedCount(r *capacityReservation, held map[*capacityReservation]int32, n int) (int, *apiError) {
	if r == nil {
		return n, nil
	}
	free := int(r.available - held[r])
	if free <= 0 {
		return 0, reservationFull(r)
	}
	return min(n, free), nil
}

// runReservationSpec takes RunInstances' own CapacityReservationSpecification and market type
// over its launch template's.
func (sp *launchSpec) runReservationSpec(in *ec2.RunInstancesInput) {
	if mo := in.InstanceMarketOptions; mo != nil {
		sp.marketType = mo.MarketType
	}
	if c := in.CapacityReservationSpecification; c != nil {
		sp.crPreference, sp.crTarget = c.CapacityReservationPreference, c.CapacityReservationTarget
	}
}

// reservationFilter resolves DescribeInstances' reservation filters (instance-lifecycle for
// Capacity Block instances; Spot is the caller's).
func (in *instance) reservationFilter(name string) ([]string, bool) {
	r := in.reservation
	switch name {
	case "instance-lifecycle":
		if r != nil && r.capacityBlock() {
			return []string{string(ec2types.InstanceLifecycleTypeCapacityBlock)}, true
		}
		return nil, true
	case "capacity-reservation-id":
		if r != nil {
			return []string{r.id}, true
		}
		return nil, true
	case "capacity-reservation-specification.capacity-reservation-preference":
		var out ec2types.Instance
		in.reservationView(&out)
		return []string{string(out.CapacityReservationSpecification.CapacityReservationPreference)}, true
	case "capacity-reservation-specification.capacity-reservation-target.capacity-reservation-id":
		if r != nil && in.crTargeted {
			return []string{r.id}, true
		}
		return nil, true
	}
	return nil, false
}

// reservationFull is EC2's error for a launch beyond a reservation's available instances;
// Karpenter reads the code as the reservation being used up.
func reservationFull(r *capacityReservation) *apiError {
	return apiErr(400, "ReservationCapacityExceeded", "The requested number of instances exceeds the available capacity of Capacity Reservation %s (%d of %d available).",
		r.id, r.available, r.total)
}

// openReservation is the active open reservation an untargeted On-Demand launch goes into
// (EC2 matches type, platform, zone and tenancy), nil when none has room. Call with s.mu.
func (s *Server) openReservation(sp *launchSpec) *capacityReservation {
	if sp.capacityType == catalog.CapacityTypeSpot || sp.marketType == ec2types.MarketTypeSpot || sp.marketType == ec2types.MarketTypeCapacityBlock {
		return nil
	}
	for _, id := range sortedKeys(s.st.reservations) {
		r := s.st.reservations[id]
		if r.state == ec2types.CapacityReservationStateActive && r.match == ec2types.InstanceMatchCriteriaOpen &&
			r.instanceType == sp.instanceType && r.zone.name == zoneOf(sp.subnet) && r.available > 0 {
			return r
		}
	}
	return nil
}

// slotFor is the reservation a new instance goes into: the one resolved for the request
// (targetReservation), else, for an open (or unspecified) preference, any open reservation with
// room; nil for On-Demand or Spot capacity. Call with s.mu before the instance exists.
func (s *Server) slotFor(sp *launchSpec) (*capacityReservation, *apiError) {
	if r := sp.reservation; r != nil {
		if r.available <= 0 {
			return nil, reservationFull(r)
		}
		return r, nil
	}
	switch sp.crPreference {
	case "", ec2types.CapacityReservationPreferenceOpen:
		return s.openReservation(sp), nil
	}
	return nil, nil
}

// holdSlot records that an instance runs in a reservation and takes one of its slots.
func (in *instance) holdSlot(r *capacityReservation, sp *launchSpec) {
	in.crPreference = sp.crPreference
	in.crTargeted = sp.reservationTarget() != ""
	if r == nil {
		return
	}
	in.reservation = r
	r.available--
}

// reservationView is what DescribeInstances reports of an instance's reservation: its
// CapacityReservationId, specification and lifecycle.
func (in *instance) reservationView(out *ec2types.Instance) {
	pref := in.crPreference
	if pref == "" {
		pref = ec2types.CapacityReservationPreferenceOpen
	}
	out.CapacityReservationSpecification = &ec2types.CapacityReservationSpecificationResponse{CapacityReservationPreference: pref}
	r := in.reservation
	if r == nil {
		return
	}
	out.CapacityReservationId = aws.String(r.id)
	if in.crTargeted {
		out.CapacityReservationSpecification.CapacityReservationTarget = &ec2types.CapacityReservationTargetResponse{CapacityReservationId: aws.String(r.id)}
	}
	if r.capacityBlock() {
		out.InstanceLifecycle = ec2types.InstanceLifecycleTypeCapacityBlock
	}
}

// reserved tells whether Karpenter counts the instance as reserved capacity: in a reservation
// it was launched into with capacity-reservations-only.
func (in *instance) reserved() bool {
	return in.reservation != nil && in.crPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly
}

// fleetLifecycle is the lifecycle CreateFleet reports for a capacity type of the request.
func fleetLifecycle(ct string, fleetType ec2types.DefaultTargetCapacityType) ec2types.InstanceLifecycle {
	switch {
	case ct == catalog.CapacityTypeSpot:
		return ec2types.InstanceLifecycleSpot
	case fleetType == ec2types.DefaultTargetCapacityTypeCapacityBlock:
		return ec2types.InstanceLifecycleCapacityBlock
	}
	return ec2types.InstanceLifecycleOnDemand
}
