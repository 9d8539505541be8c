package scheduling

import (
	"cmp"
	"slices"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// Narrow keeps the options a replacement may launch as: of each instance type, its offerings of
// the given capacity types (all if none are given), and the type only if every such offering
// costs less than below, so that wherever the launch lands it stays under the limit (a type's
// dearest zone counts, as Karpenter's worst launch price does). At most the most cheapest types
// stay (0: all). The requirements follow (instance types, zones, capacity types), so the launch
// cannot pick anything else; Labels stay as planned. Narrow reports false, leaving the NodeClaim
// unusable, when no type is left or the requirements' minValues can no longer be met.
func (nc *NodeClaim) Narrow(capacityTypes []string, below float64, most int) bool {
	return nc.narrowTo(func(o catalog.Offering) bool {
		return len(capacityTypes) == 0 || slices.Contains(capacityTypes, o.CapacityType)
	}, below, most)
}

// narrowTo is Narrow keeping the offerings keep accepts.
func (nc *NodeClaim) narrowTo(keep func(catalog.Offering) bool, below float64, most int) bool {
	var kept []InstanceTypeOption
	for _, opt := range nc.InstanceTypes {
		offs := slices.DeleteFunc(slices.Clone(opt.Offerings), func(o catalog.Offering) bool { return !keep(o) })
		if len(offs) == 0 || slices.ContainsFunc(offs, func(o catalog.Offering) bool { return o.PricePerHour >= below }) {
			continue
		}
		slices.SortStableFunc(offs, func(a, b catalog.Offering) int { return cmp.Compare(a.PricePerHour, b.PricePerHour) })
		kept = append(kept, InstanceTypeOption{Type: opt.Type, PricePerHour: offs[0].PricePerHour, Offerings: offs})
	}
	slices.SortStableFunc(kept, func(a, b InstanceTypeOption) int { return cmp.Compare(a.PricePerHour, b.PricePerHour) })
	if most > 0 && len(kept) > most {
		kept = kept[:most]
	}
	nc.InstanceTypes = kept
	if len(kept) == 0 {
		return false
	}
	var names, zones, cts []string
	for _, opt := range kept {
		names = append(names, opt.Type.Name)
		for _, o := range opt.Offerings {
			zones = append(zones, o.Zone)
			cts = append(cts, o.CapacityType)
		}
	}
	slices.Sort(zones)
	slices.Sort(cts)
	nc.Zones, nc.CapacityTypes = slices.Compact(zones), slices.Compact(cts)
	values := map[string][]string{labelInstanceType: names, labelZone: nc.Zones, labelCapacityType: nc.CapacityTypes}
	for i := range nc.Requirements {
		r := &nc.Requirements[i]
		if v, ok := values[r.Key]; ok {
			r.Values = slices.Clone(v)
		}
		if r.MinValues != nil && distinct(kept, r.Key, r.Values) < *r.MinValues {
			return false
		}
	}
	return true
}

// distinct counts the values of key among the options' instance types (for the instance-type,
// zone and capacity-type keys, the requirement's own values).
func distinct(opts []InstanceTypeOption, key string, reqValues []string) int {
	switch key {
	case labelInstanceType, labelZone, labelCapacityType:
		return len(reqValues)
	}
	seen := map[string]bool{}
	for _, opt := range opts {
		if v, ok := opt.Type.Labels[key]; ok {
			seen[v] = true
		}
	}
	return len(seen)
}

// WorstPricePerHour is the most the NodeClaim can cost as launched: its dearest offering.
func (nc *NodeClaim) WorstPricePerHour() float64 {
	worst := 0.0
	for _, opt := range nc.InstanceTypes {
		for _, o := range opt.Offerings {
			worst = max(worst, o.PricePerHour)
		}
	}
	return worst
}
