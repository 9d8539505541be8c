package aws

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
	"github.com/karpool/karpool/internal/requirements"
)

const (
	labelInstanceType = corev1.LabelInstanceTypeStable
	labelZone         = corev1.LabelTopologyZone
	labelArch         = corev1.LabelArchStable
)

// claimRequirements are a NodeClaim's requirements by key (all must hold).
type claimRequirements map[string][]requirements.Requirement

func requirementsOf(nc *karpv1.NodeClaim) claimRequirements {
	out := claimRequirements{}
	for _, r := range nc.Spec.Requirements {
		req := requirements.New(r.Key, r.Operator, r.Values)
		out[req.Key] = append(out[req.Key], req)
	}
	return out
}

// allows reports whether a label with this value (present = false when the node will not
// carry the label) satisfies every requirement on key. Keys without requirements allow anything.
func (rs claimRequirements) allows(key, value string, present bool) bool {
	for i := range rs[key] {
		if !rs[key][i].Matches(value, present) {
			return false
		}
	}
	return true
}

// instanceTypeAllowed checks the requirements on the labels an instance type defines. Keys the
// type does not define (pool labels, zone, capacity type) are checked elsewhere or are labels
// karpool itself applies; well-known instance keys the type lacks count as absent.
func (rs claimRequirements) instanceTypeAllowed(it *catalog.InstanceType) bool {
	for key := range rs {
		v, ok := it.Labels[key]
		if !ok && !strings.HasPrefix(key, "karpenter.k8s.aws/instance-") {
			continue
		}
		if !rs.allows(key, v, ok) {
			return false
		}
	}
	return true
}

// fits reports whether the instance type's allocatable covers the NodeClaim's requests.
func fits(it *catalog.InstanceType, requests corev1.ResourceList) bool {
	for name, q := range requests {
		idx := slices.Index(catalog.ResourceNames[:], string(name))
		if idx < 0 {
			// An extended resource the catalog does not model: no type offers it.
			return false
		}
		want := q.Value()
		if idx == int(catalog.CPU) {
			want = q.MilliValue()
		}
		if it.Allocatable[idx] < want {
			return false
		}
	}
	return true
}

// option is one way to launch a NodeClaim: an instance type in a zone with a capacity type.
type option struct {
	it       *catalog.InstanceType
	offering catalog.Offering
}

// launchOptions lists what a NodeClaim may launch as, cheapest first: instance types its
// requirements allow and whose allocatable fits its requests, in zones with a subnet, with
// available offerings. As in Karpenter, a capacity reservation is used whenever the NodeClaim
// allows capacity type "reserved" and one is available, spot next, on-demand otherwise. The
// result is deterministic.
func launchOptions(nc *karpv1.NodeClaim, its []catalog.InstanceType, zones map[string]bool) (string, []option) {
	rs := requirementsOf(nc)
	var all []option
	for i := range its {
		it := &its[i]
		if !rs.instanceTypeAllowed(it) || !fits(it, nc.Spec.Resources.Requests) {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && zones[o.Zone] && rs.allows(labelZone, o.Zone, true) && rs.allows(karpv1.LabelCapacityType, o.CapacityType, true) &&
				rs.allowsReservation(o) {
				all = append(all, option{it: it, offering: o})
			}
		}
	}
	capacityType := catalog.CapacityTypeOnDemand
	for _, ct := range []string{catalog.CapacityTypeReserved, catalog.CapacityTypeSpot} {
		if slices.ContainsFunc(all, func(o option) bool { return o.offering.CapacityType == ct }) {
			capacityType = ct
			break
		}
	}
	out := slices.DeleteFunc(all, func(o option) bool { return o.offering.CapacityType != capacityType })
	slices.SortStableFunc(out, func(a, b option) int {
		return cmp.Or(cmp.Compare(a.offering.PricePerHour, b.offering.PricePerHour), cmp.Compare(a.it.Name, b.it.Name),
			cmp.Compare(a.offering.Zone, b.offering.Zone), cmp.Compare(a.offering.ReservationID, b.offering.ReservationID))
	})
	if capacityType == catalog.CapacityTypeReserved {
		out = oneReservationKind(out)
	}
	return capacityType, out
}

// allowsReservation checks the reservation labels a node of the offering would carry (none
// unless it is reserved).
func (rs claimRequirements) allowsReservation(o catalog.Offering) bool {
	reserved := o.ReservationID != ""
	return rs.allows(awsv1.LabelCapacityReservationID, o.ReservationID, reserved) &&
		rs.allows(awsv1.LabelCapacityReservationType, o.ReservationType, reserved)
}

// oneReservationKind narrows reserved options (sorted) to what one CreateFleet request can
// take, as Karpenter's launch filters do: one reservation per instance type and zone (the one
// with the most room), and either default reservations or a single capacity block (the
// cheapest), never both.
func oneReservationKind(opts []option) []option {
	if slices.ContainsFunc(opts, func(o option) bool { return o.offering.ReservationType != capreservation.TypeCapacityBlock }) {
		opts = slices.DeleteFunc(opts, func(o option) bool { return o.offering.ReservationType == capreservation.TypeCapacityBlock })
	} else {
		opts = opts[:1]
	}
	best := map[[2]string]int{}
	var out []option
	for _, o := range opts {
		k := [2]string{o.it.Name, o.offering.Zone}
		if i, ok := best[k]; ok {
			if o.offering.ReservationCapacity > out[i].offering.ReservationCapacity {
				out[i] = o
			}
			continue
		}
		best[k] = len(out)
		out = append(out, o)
	}
	return out
}
