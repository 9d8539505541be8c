package capacityreservation

import (
	"slices"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// WithOfferings adds to each instance type one offering of capacity type "reserved" per
// reservation of that type in one of its offered zones. It is available while the reservation
// can take an instance (available(id) > 0) and is not expiring. The instance types are
// copied where changed; the input is not modified.
func WithOfferings(its []catalog.InstanceType, rs []awsv1.CapacityReservation, available func(id string) int) []catalog.InstanceType {
	if len(rs) == 0 {
		return its
	}
	byType := map[string][]awsv1.CapacityReservation{}
	for _, r := range rs {
		byType[r.InstanceType] = append(byType[r.InstanceType], r)
	}
	out := make([]catalog.InstanceType, len(its))
	copy(out, its)
	for i := range out {
		mine := byType[out[i].Name]
		if len(mine) == 0 {
			continue
		}
		offs := append([]catalog.Offering(nil), out[i].Offerings...)
		for _, r := range mine {
			if o, ok := reserved(offs, r, available(r.ID)); ok {
				offs = append(offs, o)
			}
		}
		catalog.SortOfferings(offs)
		out[i].Offerings = offs
	}
	return out
}

// reserved is the offering of reservation r among a type's offerings: in r's zone, which the
// type must be offered in (the class's subnets), priced from its on-demand offering there
// (catalog.ReservedPrice).
func reserved(offs []catalog.Offering, r awsv1.CapacityReservation, count int) (catalog.Offering, bool) {
	i := slices.IndexFunc(offs, func(o catalog.Offering) bool {
		return o.Zone == r.AvailabilityZone && o.CapacityType == catalog.CapacityTypeOnDemand
	})
	if i < 0 {
		return catalog.Offering{}, false
	}
	return catalog.Offering{
		Zone: r.AvailabilityZone, CapacityType: catalog.CapacityTypeReserved,
		PricePerHour: catalog.ReservedPrice(offs[i]), VolumesPerHour: offs[i].VolumesPerHour,
		Available:     count > 0 && r.State != StateExpiring,
		ReservationID: r.ID, ReservationType: r.ReservationType, ReservationCapacity: count,
	}, true
}
