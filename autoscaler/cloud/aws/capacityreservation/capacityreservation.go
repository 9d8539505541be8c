// Package capacityreservation resolves an EC2NodeClass's capacityReservationSelectorTerms to the
// On-Demand Capacity Reservations and Capacity Blocks its nodes may launch into, and keeps the
// count of instances each can still take between two reads of EC2, as Karpenter's AWS provider
// does: a launch takes one, a termination gives one back, a "no capacity" answer empties it.
package capacityreservation

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/ec2filter"
)

// Reservation types and states, as EC2NodeClass status reports them.
const (
	TypeDefault       = "default"
	TypeCapacityBlock = "capacity-block"
	StateActive       = "active"
	StateExpiring     = "expiring"
)

// ExpiringBefore is how long before a capacity block's end Karpenter reports it expiring and
// drains its nodes: EC2 starts terminating them 30 minutes before the end, and draining starts
// 10 minutes before that.
const ExpiringBefore = 40 * time.Minute

// cacheFor is how long one EC2 read of a selector is reused, like the other class resolutions.
const cacheFor = time.Minute

// Provider resolves reservations and tracks their available counts. It is safe for concurrent
// use.
type Provider struct {
	ec2 *ec2.Client
	now func() time.Time

	mu      sync.Mutex
	queries map[string]cachedQuery
	// available is each reservation's count of instances it can still take, as last read
	// from EC2 and adjusted by the launches and terminations since.
	available map[string]int
}

type cachedQuery struct {
	at  time.Time
	out []ec2types.CapacityReservation
}

// New returns a provider reading through client, with now as its clock.
func New(client *ec2.Client, now func() time.Time) *Provider {
	return &Provider{ec2: client, now: now, queries: map[string]cachedQuery{}, available: map[string]int{}}
}

// List resolves the selector terms (ORed; the fields of one term ANDed) to the active
// reservations they match that have not ended, sorted by id. Each read of EC2 also refreshes
// the available counts.
func (p *Provider) List(ctx context.Context, terms []awsv1.CapacityReservationSelectorTerm) ([]awsv1.CapacityReservation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	seen := map[string]bool{}
	var out []awsv1.CapacityReservation
	for i, t := range terms {
		found, err := p.query(ctx, i, t, now)
		if err != nil {
			return nil, err
		}
		for _, cr := range found {
			id := aws.ToString(cr.CapacityReservationId)
			if seen[id] || cr.EndDate != nil && !cr.EndDate.After(now) {
				continue
			}
			seen[id] = true
			r, err := fromEC2(cr, now)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b awsv1.CapacityReservation) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// query answers one term, from the cache when it was read within cacheFor.
func (p *Provider) query(ctx context.Context, i int, t awsv1.CapacityReservationSelectorTerm, now time.Time) ([]ec2types.CapacityReservation, error) {
	in, key := input(t)
	if in == nil {
		return nil, awserr.Invalidf("spec.capacityReservationSelectorTerms[%d] is empty; give an id, or tags, ownerID or instanceMatchCriteria", i)
	}
	if c, ok := p.queries[key]; ok && now.Sub(c.at) < cacheFor {
		return c.out, nil
	}
	var found []ec2types.CapacityReservation
	pg := ec2.NewDescribeCapacityReservationsPaginator(p.ec2, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if awserr.Code(err) == "InvalidCapacityReservationId.NotFound" {
			// A term naming a reservation that no longer exists matches nothing.
			break
		}
		if err != nil {
			return nil, fmt.Errorf("resolving spec.capacityReservationSelectorTerms[%d]: %w", i, err)
		}
		found = append(found, page.CapacityReservations...)
	}
	for _, cr := range found {
		p.available[aws.ToString(cr.CapacityReservationId)] = int(aws.ToInt32(cr.AvailableInstanceCount))
	}
	p.queries[key] = cachedQuery{at: now, out: found}
	return found, nil
}

// input is the DescribeCapacityReservations request of one term and its cache key; nil when
// the term sets nothing. An id is looked up alone (EC2 refuses MaxResults with ids); the other
// fields become filters.
func input(t awsv1.CapacityReservationSelectorTerm) (*ec2.DescribeCapacityReservationsInput, string) {
	active := ec2filter.New("state", string(ec2types.CapacityReservationStateActive))
	if t.ID != "" {
		filters := []ec2types.Filter{active}
		if t.OwnerID != "" {
			filters = append(filters, ec2filter.New("owner-id", t.OwnerID))
		}
		return &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{t.ID}, Filters: filters}, key(t)
	}
	filters := append([]ec2types.Filter{active}, ec2filter.Tags(t.Tags)...)
	if t.OwnerID != "" {
		filters = append(filters, ec2filter.New("owner-id", t.OwnerID))
	}
	if t.InstanceMatchCriteria != "" {
		filters = append(filters, ec2filter.New("instance-match-criteria", t.InstanceMatchCriteria))
	}
	if len(filters) == 1 {
		return nil, ""
	}
	return &ec2.DescribeCapacityReservationsInput{Filters: filters, MaxResults: aws.Int32(1000)}, key(t)
}

func key(t awsv1.CapacityReservationSelectorTerm) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%v", t.ID, t.OwnerID, t.InstanceMatchCriteria, ec2filter.Tags(t.Tags))
}

// fromEC2 is the status entry of a reservation. A capacity block is "expiring" from
// ExpiringBefore its end: no new node launches into it and its nodes are drained.
func fromEC2(cr ec2types.CapacityReservation, now time.Time) (awsv1.CapacityReservation, error) {
	id := aws.ToString(cr.CapacityReservationId)
	crit := string(cr.InstanceMatchCriteria)
	if crit != string(ec2types.InstanceMatchCriteriaOpen) && crit != string(ec2types.InstanceMatchCriteriaTargeted) {
		return awsv1.CapacityReservation{}, fmt.Errorf("capacity reservation %s: EC2 reports instance match criteria %q, which karpool does not know", id, crit)
	}
	typ := cmp.Or(string(cr.ReservationType), TypeDefault)
	if typ != TypeDefault && typ != TypeCapacityBlock {
		return awsv1.CapacityReservation{}, fmt.Errorf("capacity reservation %s: EC2 reports reservation type %q, which karpool does not know", id, typ)
	}
	r := awsv1.CapacityReservation{ID: id, AvailabilityZone: aws.ToString(cr.AvailabilityZone), InstanceMatchCriteria: crit,
		InstanceType: aws.ToString(cr.InstanceType), OwnerID: aws.ToString(cr.OwnerId), ReservationType: typ,
		Interruptible: aws.ToBool(cr.Interruptible), State: StateActive}
	if cr.EndDate != nil {
		end := metav1.NewTime(*cr.EndDate)
		r.EndTime = &end
		if typ == TypeCapacityBlock && !now.Before(cr.EndDate.Add(-ExpiringBefore)) {
			r.State = StateExpiring
		}
	}
	return r, nil
}

// PollEvery is how often a class's reservations are read again: their available counts
// change with every launch, in karpool or elsewhere in the account.
const PollEvery = time.Minute

// NextCheck is when reservations should be read again: PollEvery, or sooner when a capacity
// block starts expiring (or ends) before that.
func NextCheck(rs []awsv1.CapacityReservation, now time.Time) time.Duration {
	next := PollEvery
	for _, r := range rs {
		if r.EndTime == nil {
			continue
		}
		for _, at := range []time.Time{r.EndTime.Add(-ExpiringBefore), r.EndTime.Time} {
			if d := at.Sub(now); d > 0 && d < next {
				next = d
			}
		}
	}
	return next
}

// Available is how many more instances the reservation can take as far as karpool knows (0
// for a reservation it has not read).
func (p *Provider) Available(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.available[id]
}

// MarkLaunched counts one instance launched into the reservation.
func (p *Provider) MarkLaunched(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.available[id] > 0 {
		p.available[id]--
	}
}

// MarkTerminated gives back the slot of an instance of the reservation that terminated.
func (p *Provider) MarkTerminated(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.available[id]; ok {
		p.available[id]++
	}
}

// MarkExhausted records that EC2 refused a launch into the reservation for lack of capacity:
// nothing more launches into it until the next read says otherwise.
func (p *Provider) MarkExhausted(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.available[id] = 0
	// The next List must ask EC2 again, or a cached answer would keep the count at 0.
	clear(p.queries)
}
