package scheduling

import (
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// folder folds NodeClaims into others (fold.go).
type folder struct{ *solver }

// foldSources caps how many of the cheapest NodeClaims fold tries to empty.
const foldSources = 64

// fold is the plan's last improvement: it moves all pods of a cheap NodeClaim into the spare
// room of another NodeClaim, grown to a larger type if need be, whenever that costs less than
// the two. The packers fill nodes one at a time and retry rounds add NodeClaims for the pods
// left over, so a plan can end with a small node whose pods another node (or a slightly larger
// one) holds for less: a 2-cpu and a 1-cpu pod on a c8gd.xlarge plus a t3.nano.
//
// Only pods with no topology constraint take part (not counted by any spread or affinity, no
// host ports): moving them changes no count another placement relied on. NodeClaims of pools
// with minValues, or held on a side of a spread (bin.sides) or to a launch zone, are left alone.
// It reports whether it changed the plan.
func (s *folder) fold() bool {
	var sources []*bin
	for _, b := range s.bins[s.existing:] {
		if s.foldable(b) && s.movable(b) {
			sources = append(sources, b)
		}
	}
	if len(sources) == 0 {
		return false
	}
	// What a NodeClaim costs is its target's price (shrink has made the target its cheapest
	// option): a table lookup, where binPrice would walk every type.
	price := func(b *bin) float64 { return s.pools[b.pool].prices(s.zoneIdx, b.zoneMask, b.ctMask)[b.target] }
	sort.SliceStable(sources, func(i, j int) bool { return price(sources[i]) < price(sources[j]) })
	if len(sources) > foldSources {
		sources = sources[:foldSources]
	}
	changed := false
	for _, b := range sources {
		if b.dead || len(b.pods) == 0 {
			continue
		}
		pb := price(b)
		classes := s.classesOf(b)
		var best *bin
		var bestPlan foldPlan
		saving := 1e-9
		for _, o := range s.bins[s.existing:] {
			if o == b || !s.foldable(o) {
				continue
			}
			po := price(o)
			plan, ok := s.foldInto(b, o, classes, po+pb-saving)
			if ok && po+pb-plan.price > saving {
				best, bestPlan, saving = o, plan, po+pb-plan.price
			}
		}
		if best != nil {
			s.applyFold(b, best, bestPlan)
			changed = true
		}
	}
	return changed
}

// foldable: a live new NodeClaim whose type set fold may change.
func (s *folder) foldable(b *bin) bool {
	return b.kind == binNew && !b.dead && len(b.pods) > 0 && len(s.pools[b.pool].minValues) == 0 &&
		len(b.sides) == 0 && !b.launchWide() && len(b.uncounted) == 0
}

// movable: every pod of the NodeClaim is free of topology constraints and host ports.
func (s *folder) movable(b *bin) bool {
	for _, pi := range b.pods {
		c := s.podClass[pi]
		if len(c.countedBy) > 0 || len(c.owns) > 0 || c.portSet != nil || c.variants[c.v].constrained() {
			return false
		}
	}
	return true
}

// foldPlan is how NodeClaim o takes the pods of another: its narrowed requirements and the type
// it launches as.
type foldPlan struct {
	types  bitset
	zones  uint32
	cts    uint8
	custom []*sigCompat
	target int
	price  float64
}

// foldInto plans o taking b's pods (of the given classes): the cheapest type priced below
// budget that every pod of both accepts and that holds them all, within the pool's limits once
// b is gone. It allocates only for the plan it returns: it runs for many pairs.
func (s *folder) foldInto(b, o *bin, classes []*class, budget float64) (foldPlan, bool) {
	p := s.pools[o.pool]
	plan := foldPlan{zones: o.zoneMask, cts: o.ctMask, target: -1}
	var narrowing [8]*sigCompat
	narrow := narrowing[:0] // compatibilities that do not allow every type
	for _, c := range classes {
		cp := s.compatWith(c.variants[c.v].sig, p)
		if !cp.ok || !s.customPossible(o, cp) {
			return plan, false
		}
		plan.zones &= cp.zoneMask
		plan.cts &= cp.ctMask
		if !cp.all {
			narrow = append(narrow, cp)
		}
	}
	if plan.zones == 0 || plan.cts == 0 || o.zone >= 0 && plan.zones&(1<<o.zone) == 0 {
		return plan, false
	}
	need := o.used
	addTo(&need, &b.used, 1)
	prices, order := p.sorted(s.zoneIdx, plan.zones, plan.cts)
	cur := &p.types[o.target]
	for _, i := range order {
		if prices[i] >= budget || math.IsInf(prices[i], 1) {
			break
		}
		t := &p.types[i]
		if !o.types.has(i) || !allHave(narrow, i) || !fits(&need, &t.usable) || !t.offers(plan.zones, plan.cts) {
			continue
		}
		if i != int(o.target) && !s.fitsAfterFold(b, p, cur, t) {
			continue
		}
		plan.types = o.types.clone()
		for _, cp := range narrow {
			plan.types.and(plan.types, cp.types)
		}
		for _, c := range classes {
			if cp := s.compatWith(c.variants[c.v].sig, p); cp.custom != nil {
				plan.custom = append(plan.custom, cp)
			}
		}
		plan.target, plan.price = i, prices[i]
		return plan, true
	}
	return plan, false
}

// allHave reports whether every compatibility allows type i.
func allHave(cps []*sigCompat, i int) bool {
	for _, cp := range cps {
		if !cp.types.has(i) {
			return false
		}
	}
	return true
}

// classesOf lists the distinct classes of a NodeClaim's pods.
func (s *folder) classesOf(b *bin) []*class {
	var out []*class
	for _, pi := range b.pods {
		if c := s.podClass[pi]; !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// fitsAfterFold reports whether o's pool stays within its limits with o grown from cur to t and
// b gone.
func (s *folder) fitsAfterFold(b *bin, p *poolState, cur, t *typeInfo) bool {
	if int(b.pool) == p.idx {
		bt := &p.types[b.target]
		p.commit(bt, -1)
		defer p.commit(bt, 1)
	}
	return p.fitsLimitsSwap(cur, t)
}

// applyFold moves b's pods onto o as planned and drops b.
func (s *folder) applyFold(b, o *bin, plan foldPlan) {
	if !plan.types.equal(o.types) {
		o.types, o.allTypes = plan.types.clone(), false
	}
	o.zoneMask, o.ctMask = plan.zones, plan.cts
	for _, cp := range plan.custom {
		s.narrowCustom(o, cp)
	}
	for _, pi := range b.pods {
		s.podBin[pi] = o.id
	}
	o.pods = append(o.pods, b.pods...)
	addTo(&o.used, &b.used, 1)
	b.pods, b.used = nil, catalog.Resources{}
	s.dropBin(b)
	if plan.target != int(o.target) {
		s.retarget(o, plan.target)
	} else {
		s.treeUpdate(o)
	}
	if o.zone < 0 && bits.OnesCount32(o.zoneMask) == 1 {
		s.narrowZone(o, int32(bits.TrailingZeros32(o.zoneMask)))
	}
}
