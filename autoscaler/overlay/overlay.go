// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to the instance types each
// NodePool may launch, before the scheduling engine sees them, with Karpenter's rules:
//
//   - An overlay selects, per NodePool, the instance types whose labels (with the pool's name
//     and template labels) satisfy its requirements, and of those the offerings whose zone and
//     capacity type do. A type with no selected offering is not selected.
//   - Overlays are taken heaviest first (weight, unset = 0), names later in the alphabet first
//     among equals. For each offering the first overlay that sets a price wins; for each
//     extended resource the first that sets it wins.
//   - An overlay that would set a price or resource already set by an overlay of the same
//     weight conflicts and is not applied anywhere (all NodePools or none).
//
// Apply is pure: the same overlays and pools give the same result, and the input is not
// modified (changed instance types and offerings are copies).
package overlay

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// Reasons a Verdict gives for an overlay that is not applied.
const (
	ReasonInvalid  = "RuntimeValidation"
	ReasonConflict = "Conflict"
)

// Verdict is what became of one overlay.
type Verdict struct {
	Name string
	// Reason and Message are empty when the overlay is applied; ReasonInvalid or
	// ReasonConflict with an explanation when it is not applied at all.
	Reason, Message string
	// Unmodelled lists the capacity resources the scheduling engine does not schedule on; the
	// rest of the overlay applies, pods requesting these stay pending.
	Unmodelled []string
	// Changed counts the (NodePool, instance type) pairs whose price or capacity the overlay
	// set.
	Changed int
}

// Applied reports whether the overlay takes effect.
func (v Verdict) Applied() bool { return v.Reason == "" }

// Apply returns the pools with the overlays applied, and one verdict per overlay, by name.
func Apply(overlays []v1alpha1.NodeOverlay, pools []scheduling.Pool) ([]scheduling.Pool, []Verdict) {
	if len(overlays) == 0 {
		return pools, nil
	}
	ordered := slices.Clone(overlays)
	slices.SortStableFunc(ordered, func(a, b v1alpha1.NodeOverlay) int {
		return cmp.Or(cmp.Compare(weight(&b), weight(&a)), cmp.Compare(b.Name, a.Name))
	})
	st := store{}
	var verdicts []Verdict
	for i := range ordered {
		verdicts = append(verdicts, st.add(&ordered[i], pools))
	}
	sort.Slice(verdicts, func(i, j int) bool { return verdicts[i].Name < verdicts[j].Name })
	return st.applyTo(pools), verdicts
}

func weight(o *v1alpha1.NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

// slot names one instance type of one pool.
type slot struct{ pool, typ int }

// hit is an instance type an overlay selects, with the indexes of the offerings it selects.
type hit struct {
	slot
	offerings []int
}

// store collects the winning changes per instance type of each pool.
type store map[slot]*typeUpdate

type typeUpdate struct {
	price    map[int]*priceUpdate // by offering index
	capacity *capacityUpdate
}

// priceUpdate is the winning price change of one offering and the weight (and name) of the
// last overlay that selected it, against which the next one of equal weight conflicts.
type priceUpdate struct {
	change     change
	weight     int32
	lastByName string
}

// capacityUpdate holds the winning amount of each resource, and the resources of the last
// overlay recorded: an overlay of the same weight naming one of those conflicts (Karpenter
// compares with that overlay only).
type capacityUpdate struct {
	amounts    map[catalog.Resource]int64
	set        map[string]bool
	weight     int32
	last       []string
	lastByName string
}

// add evaluates one overlay (they come heaviest first) and records it unless it is invalid or
// conflicts.
func (st store) add(o *v1alpha1.NodeOverlay, pools []scheduling.Pool) Verdict {
	v := Verdict{Name: o.Name}
	c, err := compile(o)
	if err != nil {
		v.Reason, v.Message = ReasonInvalid, err.Error()
		return v
	}
	v.Unmodelled = c.unmodelled
	var hits []hit
	for p := range pools {
		for t := range pools[p].InstanceTypes {
			if offs := c.selects(&pools[p], t); len(offs) > 0 {
				hits = append(hits, hit{slot{p, t}, offs})
			}
		}
	}
	if msg := st.conflict(c, hits, pools); msg != "" {
		v.Reason, v.Message = ReasonConflict, msg
		return v
	}
	if c.price != nil || len(c.names) > 0 {
		st.record(c, hits)
		v.Changed = len(hits)
	}
	return v
}

// conflict names the first change of c that an overlay of the same weight already made.
func (st store) conflict(c *compiled, hits []hit, pools []scheduling.Pool) string {
	for _, h := range hits {
		u := st[h.slot]
		if u == nil {
			continue
		}
		where := func() string {
			return fmt.Sprintf("%s in NodePool %q", pools[h.pool].InstanceTypes[h.typ].Name, pools[h.pool].NodePool.Name)
		}
		if c.price != nil {
			for _, oi := range h.offerings {
				if p := u.price[oi]; p != nil && p.weight == c.weight {
					o := pools[h.pool].InstanceTypes[h.typ].Offerings[oi]
					return fmt.Sprintf("NodeOverlay %q of the same weight (%d) already sets the price of %s (%s, %s); give one of them another weight or narrow its requirements", p.lastByName, c.weight, where(), o.CapacityType, o.Zone)
				}
			}
		}
		if cu := u.capacity; cu != nil && cu.weight == c.weight {
			for _, name := range c.names {
				if slices.Contains(cu.last, name) {
					return fmt.Sprintf("NodeOverlay %q of the same weight (%d) already sets capacity %s of %s; give one of them another weight or narrow its requirements", cu.lastByName, c.weight, name, where())
				}
			}
		}
	}
	return ""
}

// record stores c's changes where no heavier overlay made them.
func (st store) record(c *compiled, hits []hit) {
	for _, h := range hits {
		u := st[h.slot]
		if u == nil {
			u = &typeUpdate{price: map[int]*priceUpdate{}}
			st[h.slot] = u
		}
		if c.price != nil {
			for _, oi := range h.offerings {
				if p := u.price[oi]; p != nil {
					p.weight, p.lastByName = c.weight, c.name
					continue
				}
				u.price[oi] = &priceUpdate{change: *c.price, weight: c.weight, lastByName: c.name}
			}
		}
		if len(c.names) > 0 {
			u.recordCapacity(c)
		}
	}
}

func (u *typeUpdate) recordCapacity(c *compiled) {
	if u.capacity == nil {
		u.capacity = &capacityUpdate{amounts: map[catalog.Resource]int64{}, set: map[string]bool{}}
	}
	cu := u.capacity
	for _, name := range c.names {
		if cu.set[name] {
			continue
		}
		cu.set[name] = true
		if r, ok := c.modelled[name]; ok {
			cu.amounts[r.index] = r.amount
		}
	}
	cu.weight, cu.last, cu.lastByName = c.weight, c.names, c.name
}

// applyTo copies the pools, instance types and offerings that changed and applies the
// winning changes.
func (st store) applyTo(pools []scheduling.Pool) []scheduling.Pool {
	if len(st) == 0 {
		return pools
	}
	out := slices.Clone(pools)
	copied := map[int]bool{}
	for s, u := range st {
		if !copied[s.pool] {
			out[s.pool].InstanceTypes = slices.Clone(out[s.pool].InstanceTypes)
			copied[s.pool] = true
		}
		it := &out[s.pool].InstanceTypes[s.typ]
		if len(u.price) > 0 {
			it.Offerings = priced(it.Offerings, u.price)
		}
		if u.capacity != nil {
			for r, q := range u.capacity.amounts {
				it.Capacity[r], it.Allocatable[r] = q, q
			}
		}
	}
	return out
}

// priced is a copy of the offerings with the changes applied to the instance's part of each
// price (the node's EBS volumes are not the instance's price), sorted again.
func priced(offs []catalog.Offering, changes map[int]*priceUpdate) []catalog.Offering {
	out := slices.Clone(offs)
	for i, p := range changes {
		o := &out[i]
		o.PricePerHour = p.change.apply(o.PricePerHour-o.VolumesPerHour) + o.VolumesPerHour
		if p.change.absolute {
			o.Estimated = false
		}
	}
	catalog.SortOfferings(out)
	return out
}
