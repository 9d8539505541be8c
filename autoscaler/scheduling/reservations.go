package scheduling

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// reserve gives the new NodeClaims of a plan their capacity reservations. Reserved offerings
// cost next to nothing, so the engine plans onto them freely; a reservation takes only as many
// nodes as it has room for (Offering.ReservationCapacity). In plan order, a NodeClaim that can
// launch into a reservation with room is pinned to it (its requirements say capacity type
// reserved and the reservation's id, so the launch cannot land elsewhere) and takes one place;
// the others lose their reserved offerings and launch as their cheapest other option, as
// Karpenter's scheduler falls back. A NodeClaim left with no option (its pool allows only
// reserved capacity) is dropped and its pods are unschedulable. In-flight NodeClaims pinned to
// a reservation and not launched yet hold their place: the cloud counts a place taken only
// once the instance exists.
func reserve(in *Input, res *Result) *Result {
	room := reservationRoom(res.NodeClaims)
	if len(room) == 0 {
		return res
	}
	for _, f := range in.NodeClaims {
		if id := pinnedReservation(f.NodeClaim); id != "" && f.NodeClaim.Status.ProviderID == "" {
			room[id]--
		}
	}
	dropped := map[int]bool{}
	for i := range res.NodeClaims {
		nc := &res.NodeClaims[i]
		if !nc.hasReserved() {
			continue
		}
		if id := nc.reservationWithRoom(room); id != "" && nc.pin(id) {
			room[id]--
			continue
		}
		if !nc.dropReserved() {
			dropped[i] = true
		}
	}
	if len(dropped) == 0 {
		return res
	}
	return withoutNodeClaims(res, dropped, "its NodePool allows only capacity type reserved and the matching capacity reservations are taken by other NodeClaims of this plan")
}

// pinnedReservation is the reservation a NodeClaim may only launch into ("" if none).
func pinnedReservation(nc *karpv1.NodeClaim) string {
	for _, r := range nc.Spec.Requirements {
		if r.Key == awsv1.LabelCapacityReservationID && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

// reservationRoom is how many more nodes each reservation offered to the plan can take (the
// least any offering says, should two views disagree).
func reservationRoom(ncs []NodeClaim) map[string]int {
	room := map[string]int{}
	for i := range ncs {
		for _, opt := range ncs[i].InstanceTypes {
			for _, o := range opt.Offerings {
				if o.ReservationID == "" {
					continue
				}
				if cur, ok := room[o.ReservationID]; !ok || o.ReservationCapacity < cur {
					room[o.ReservationID] = o.ReservationCapacity
				}
			}
		}
	}
	return room
}

func (nc *NodeClaim) hasReserved() bool {
	for _, opt := range nc.InstanceTypes {
		for _, o := range opt.Offerings {
			if o.ReservationID != "" {
				return true
			}
		}
	}
	return false
}

// reservationWithRoom is the cheapest of the NodeClaim's reservations with room ("" if none).
func (nc *NodeClaim) reservationWithRoom(room map[string]int) string {
	best, id := math.Inf(1), ""
	for _, opt := range nc.InstanceTypes {
		for _, o := range opt.Offerings {
			if o.ReservationID != "" && room[o.ReservationID] > 0 && o.PricePerHour < best {
				best, id = o.PricePerHour, o.ReservationID
			}
		}
	}
	return id
}

// pin narrows the NodeClaim to reservation id. It reports false, leaving the NodeClaim as it
// was, when that would break the requirements' minValues.
func (nc *NodeClaim) pin(id string) bool {
	before := nc.clone()
	if !nc.narrowTo(func(o catalog.Offering) bool { return o.ReservationID == id }, math.Inf(1), 0) {
		*nc = before
		return false
	}
	nc.Requirements = append(nc.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: awsv1.LabelCapacityReservationID, Operator: corev1.NodeSelectorOpIn, Values: []string{id}})
	nc.relabel(before.InstanceTypes[0].Type)
	return true
}

// dropReserved removes the reserved offerings; false when nothing else is left.
func (nc *NodeClaim) dropReserved() bool {
	old := nc.InstanceTypes[0].Type
	if !nc.narrowTo(func(o catalog.Offering) bool { return o.ReservationID == "" }, math.Inf(1), 0) {
		return false
	}
	nc.relabel(old)
	return true
}

// relabel makes Labels those of the cheapest option again after narrowing: its type's labels
// in place of old's, its zone and capacity type, and the reservation labels of a reserved one.
func (nc *NodeClaim) relabel(old *catalog.InstanceType) {
	it, o := nc.Cheapest()
	labels := make(map[string]string, len(nc.Labels))
	for k, v := range nc.Labels {
		if _, typeLabel := old.Labels[k]; !typeLabel {
			labels[k] = v
		}
	}
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[labelZone], labels[labelCapacityType] = o.Zone, o.CapacityType
	delete(labels, awsv1.LabelCapacityReservationID)
	delete(labels, awsv1.LabelCapacityReservationType)
	if o.ReservationID != "" {
		labels[awsv1.LabelCapacityReservationID] = o.ReservationID
		labels[awsv1.LabelCapacityReservationType] = o.ReservationType
	}
	nc.Labels = labels
}

// clone copies what narrowing changes.
func (nc *NodeClaim) clone() NodeClaim {
	c := *nc
	c.InstanceTypes = slices.Clone(nc.InstanceTypes)
	c.Zones, c.CapacityTypes = slices.Clone(nc.Zones), slices.Clone(nc.CapacityTypes)
	c.Requirements = make([]karpv1.NodeSelectorRequirementWithMinValues, len(nc.Requirements))
	for i, r := range nc.Requirements {
		c.Requirements[i] = *r.DeepCopy()
	}
	return c
}

// withoutNodeClaims removes the dropped NodeClaims from the plan: their pods become
// unschedulable for reason, the other bindings keep their NodeClaims, renumbered.
func withoutNodeClaims(res *Result, dropped map[int]bool, reason string) *Result {
	newIndex := make([]int, len(res.NodeClaims))
	kept := res.NodeClaims[:0:0]
	for i := range res.NodeClaims {
		newIndex[i] = -1
		if !dropped[i] {
			newIndex[i] = len(kept)
			kept = append(kept, res.NodeClaims[i])
		}
	}
	out := &Result{NodeClaims: kept, Unschedulable: res.Unschedulable}
	for _, b := range res.Bindings {
		if b.NodeClaim >= 0 && dropped[b.NodeClaim] {
			out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: b.Pod, Reason: reason})
			continue
		}
		if b.NodeClaim >= 0 {
			b.NodeClaim = newIndex[b.NodeClaim]
		}
		out.Bindings = append(out.Bindings, b)
	}
	return out
}
