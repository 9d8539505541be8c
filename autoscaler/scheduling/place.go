package scheduling

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/internal/requirements"
)

// placer places classes, constrained ones in batches against the topology counters.
type placer struct{ *solver }

const unlimited = math.MaxInt32

// placeClass places a constrained class batch by batch, relaxing preferences when a level fails.
func (s *placer) placeClass(c *class) {
	if c.blocked != "" {
		c.reason = c.blocked
		return
	}
	s.resetCursors(c)
	for c.remaining() > 0 {
		v := c.variants[c.v]
		if s.placeBatch(c, v) > 0 {
			continue
		}
		if c.v+1 < len(c.variants) {
			c.v++
			s.resetCursors(c)
			continue
		}
		return
	}
}

func (s *placer) resetCursors(c *class) {
	n := len(s.zones) + 1
	if cap(c.cursors) < n {
		c.cursors = make([]int32, n)
		return
	}
	c.cursors = c.cursors[:n]
	clear(c.cursors)
}

// placeBatch places as many pods of the class as one bin (in one zone) takes; it returns how
// many it placed, and records the reason when it placed none.
func (s *placer) placeBatch(c *class, v *variant) int {
	if v.zoneCons || (len(c.antiSel) > 0 && s.antiSelZone(c)) {
		var allow [maxZones]int32
		order, reason := s.zoneAllowance(c, v, &allow)
		if len(order) == 0 {
			c.reason = reason
			return 0
		}
		for _, z := range order {
			if b, k := s.findBin(c, v, z); b != nil {
				return s.place(c, v, b, z, min(k, int(allow[z])))
			}
		}
		reasons := []string{}
		for _, z := range order {
			b, k, r := s.openBin(c, v, z)
			if b != nil {
				return s.place(c, v, b, z, min(k, int(allow[z])))
			}
			reasons = append(reasons, r)
		}
		c.reason = dedupReasons(reasons)
		return 0
	}
	if b, k := s.findBin(c, v, -1); b != nil {
		return s.place(c, v, b, -1, k)
	}
	b, k, r := s.openBin(c, v, -1)
	if b == nil {
		c.reason = r
		return 0
	}
	return s.place(c, v, b, -1, k)
}

func (s *placer) antiSelZone(c *class) bool {
	for _, id := range c.antiSel {
		if s.counters[id].kind == keyZone {
			return true
		}
	}
	return false
}

func dedupReasons(rs []string) string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		if r != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return strings.Join(out, "; ")
}

// zoneAllowance computes how many pods of the class each zone may take now; it returns the
// zones with a positive allowance in the order to try them.
func (s *placer) zoneAllowance(c *class, v *variant, allow *[maxZones]int32) ([]int32, string) {
	elig := s.sigZones(v.sig)
	nz := len(s.zones)
	for z := 0; z < nz; z++ {
		if elig&(1<<z) != 0 {
			allow[z] = unlimited
		}
	}
	if elig == 0 {
		return nil, s.noCapacityReason(c, v)
	}
	reason := ""
	var spreadCtr *counter
	for _, sp := range v.spreads {
		ctr := s.counters[sp.ctr]
		if ctr.kind != keyZone {
			continue
		}
		if spreadCtr == nil {
			spreadCtr = ctr
		}
		domains := s.spreadZones(c, sp)
		lo := int32(unlimited)
		for m := domains; m != 0; m &= m - 1 {
			lo = min(lo, ctr.zone[bits.TrailingZeros32(m)])
		}
		if int32(bits.OnesCount32(domains)) < sp.minDomains || lo == unlimited {
			lo = 0
		}
		for z := 0; z < nz; z++ {
			if allow[z] == 0 {
				continue
			}
			if sp.self {
				allow[z] = max(0, min(allow[z], sp.maxSkew+lo-ctr.zone[z]))
			} else if ctr.zone[z]-lo > sp.maxSkew {
				allow[z] = 0
			}
		}
		reason = fmt.Sprintf("topology spread on %s (maxSkew %d) leaves no zone", labelZone, sp.maxSkew)
	}
	for _, a := range v.affs {
		ctr := s.counters[a.ctr]
		if ctr.kind != keyZone {
			continue
		}
		if ctr.total > 0 {
			for z := 0; z < nz; z++ {
				if ctr.zone[z] == 0 {
					allow[z] = 0
				}
			}
			reason = "the zones holding pods that match the required pod affinity cannot take the pod"
		} else if !a.self {
			return nil, "no pod matches the required pod affinity (zone)"
		}
	}
	for _, a := range v.antis {
		ctr := s.counters[a.ctr]
		if ctr.kind != keyZone {
			continue
		}
		for z := 0; z < nz; z++ {
			if ctr.zone[z] > 0 {
				allow[z] = 0
			} else if a.self {
				allow[z] = min(allow[z], 1)
			}
		}
		reason = "pod anti-affinity (zone) excludes every zone"
	}
	for _, id := range c.antiSel {
		ctr := s.counters[id]
		if ctr.kind != keyZone {
			continue
		}
		for z := 0; z < nz; z++ {
			if ctr.ownZone[z] > 0 {
				allow[z] = 0
			}
		}
		if reason == "" {
			reason = "the anti-affinity of pods already placed excludes every zone"
		}
	}
	var order []int32
	for z := 0; z < nz; z++ {
		if allow[z] > 0 {
			order = append(order, int32(z))
		}
	}
	if spreadCtr != nil {
		sort.SliceStable(order, func(i, j int) bool { return spreadCtr.zone[order[i]] < spreadCtr.zone[order[j]] })
	}
	return order, reason
}

func (s *poolSet) allZones() uint32 {
	if len(s.zones) >= 32 {
		return math.MaxUint32
	}
	return uint32(1)<<uint(len(s.zones)) - 1
}

// findBin returns the first bin (existing first, then new NodeClaims in creation order) that
// takes at least one pod of the class in zone z (-1: any zone), and how many it takes.
func (s *placer) findBin(c *class, v *variant, z int32) (*bin, int) {
	slot := int(z) + 1
	advance := true
	req := treeReq(&c.req)
	for i := int(c.cursors[slot]); i < len(s.bins); i++ {
		// Skip the bins without room for one pod (permanently so while constrained pods are
		// placed: room only shrinks; cursors are reset before anything can grow it).
		if j := s.tree.first(i, req); j < 0 || j >= len(s.bins) {
			if advance {
				c.cursors[slot] = int32(len(s.bins))
			}
			return nil, 0
		} else {
			i = j
		}
		b := s.bins[i]
		k, perm, _ := s.binCapacity(c, v, b, z)
		if k > 0 {
			if advance {
				c.cursors[slot] = int32(i)
			}
			return b, k
		}
		if advance && perm {
			c.cursors[slot] = int32(i + 1)
		} else {
			advance = false
		}
	}
	return nil, 0
}

// binCapacity is how many pods of the class the bin takes now (in zone z if z >= 0); perm
// reports that the bin will never take one (resources, hostname counts and requirements only
// get tighter while constrained pods are placed).
func (s *placer) binCapacity(c *class, v *variant, b *bin, z int32) (int, bool, string) {
	if b.dead || b.closed {
		return 0, true, "closed"
	}
	if b.kind != binNew {
		if !s.sigOnBin(v.sig, b) {
			return 0, true, "requirements"
		}
		if (z >= 0 && b.zone != z) || (b.zone < 0 && v.zoneCons) {
			return 0, true, "zone"
		}
	} else {
		p := s.pools[b.pool]
		cp := s.compatWith(v.sig, p)
		if !cp.ok {
			return 0, true, cp.reason
		}
		if !cp.all && !cp.types.has(int(b.target)) {
			return 0, true, "instance type"
		}
		zm := b.zoneMask & cp.zoneMask
		if z >= 0 {
			zm &= 1 << z
		}
		cm := b.ctMask & cp.ctMask
		if zm == 0 || cm == 0 || !p.types[b.target].offers(zm, cm) || b.zone >= 0 && zm&(1<<b.zone) == 0 {
			return 0, true, "zone"
		}
		if cp.custom != nil {
			for key, d := range cp.custom {
				if bd := b.custom[key]; bd != nil && !intersect(bd.Clone(), d) {
					return 0, true, "label " + key
				}
			}
		}
	}
	room := b.room()
	k := fitCount(&c.req, &room, c.remaining())
	if k == 0 {
		return 0, true, "resources"
	}
	if c.portConf != nil {
		if !s.portsFree(c, b, s.pools) {
			return 0, true, "host port " + s.describePorts(c) + " is in use on the node"
		}
		k = 1 // the pods of the class ask for the same ports
	}
	if v.hostCons || len(c.antiSel) > 0 {
		var perm bool
		var why string
		if k, perm, why = s.hostCap(c, v, b, k); k == 0 {
			return 0, perm, why
		}
	}
	if v.labelCons {
		var why string
		if k, why = s.labelCap(c, v, b, k); k == 0 {
			return 0, false, why
		}
	}
	if b.kind == binNew && len(s.pools[b.pool].minValues) > 0 {
		p := s.pools[b.pool]
		cp := s.compatWith(v.sig, p)
		types := b.types
		if !cp.all {
			types = make(bitset, len(b.types))
			types.and(b.types, cp.types)
		}
		types = s.withoutPortClashes(c, p, types)
		zm := b.zoneMask & cp.zoneMask
		if z >= 0 {
			zm &= 1 << z
		} else if c.needZone && !c.free && b.zone < 0 && bits.OnesCount32(zm) > 1 {
			if zz := s.pickZone(c, b, types); zz >= 0 {
				zm &= 1 << zz
			}
		}
		types = s.filterNarrow(c, b, types, zm)
		for k > 0 && !s.minValuesOK(b, types, zm, b.ctMask&cp.ctMask, &c.req, k) {
			k--
		}
		if k == 0 {
			return 0, true, "minValues"
		}
	}
	return k, false, ""
}

// hostCap applies the hostname-keyed constraints.
func (s *placer) hostCap(c *class, v *variant, b *bin, k int) (int, bool, string) {
	for _, sp := range v.spreads {
		ctr := s.counters[sp.ctr]
		if ctr.kind != keyHost {
			continue
		}
		cnt := ctr.hostCount(b)
		lo := s.hostMin(c, sp, ctr)
		if sp.self {
			a := int(sp.maxSkew + lo - cnt)
			if a <= 0 {
				return 0, lo == 0, "topology spread (hostname)"
			}
			k = min(k, a)
		} else if cnt-lo > sp.maxSkew {
			return 0, lo == 0, "topology spread (hostname)"
		}
	}
	for _, a := range v.affs {
		ctr := s.counters[a.ctr]
		if ctr.kind != keyHost {
			continue
		}
		if ctr.total > 0 {
			if ctr.hostCount(b) == 0 {
				return 0, false, "pod affinity (hostname)"
			}
		} else if !a.self {
			return 0, false, "no pod matches the required pod affinity (hostname)"
		}
	}
	for _, a := range v.antis {
		ctr := s.counters[a.ctr]
		if ctr.kind != keyHost {
			continue
		}
		if ctr.hostCount(b) > 0 {
			return 0, true, "pod anti-affinity (hostname)"
		}
		if a.self {
			k = 1
		}
	}
	for _, id := range c.antiSel {
		ctr := s.counters[id]
		if ctr.kind == keyHost && ctr.hostOwners(b) > 0 {
			return 0, true, "anti-affinity of pods on the node"
		}
	}
	return k, false, ""
}

// hostMin is the smallest count of a hostname spread over eligible nodes: zero whenever a new
// node can be launched for the pod, else the least over the nodes (existing and new) it may use.
func (s *placer) hostMin(c *class, sp spreadC, ctr *counter) int32 {
	if s.canLaunch(c) {
		return 0
	}
	lo, n := int32(unlimited), int32(0)
	for _, b := range s.bins {
		if b.dead || !s.hostDomain(c, sp, ctr, b) {
			continue
		}
		lo = min(lo, ctr.hostCount(b))
		n++
	}
	if lo == unlimited || n < sp.minDomains {
		return 0
	}
	return lo
}

// hostDomain reports whether a node is a domain of a hostname spread of the class for hostMin.
// A new NodeClaim that may launch both as a node matching the pod's node requirements and as
// one that does not is judged by the type it launches as (refType), and placing the class holds
// it on that side (holdHostDomains): counted as a domain with no pods while it launches outside,
// it would keep pods off nodes they fit on; left out while it launches inside, it would be a
// domain the placement ignored. In a pool with minValues, where a side may leave too few
// options, it counts whenever it may match (the safe side).
func (s *placer) hostDomain(c *class, sp spreadC, ctr *counter, b *bin) bool {
	if !s.domainNode(c, sp, b) {
		return false
	}
	if b.kind != binNew || !sp.honorAffinity || ctr.filter == nil || len(s.pools[b.pool].minValues) > 0 {
		return true
	}
	in, _, _ := s.filterDecision(ctr, b, s.refType(b))
	return in
}

// holdHostDomains keeps every new NodeClaim on the side of the class's hostname spreads that
// hostDomain judged it on, when those judgements bound the placement (no new node can be
// launched for the class, see hostMin).
func (s *placer) holdHostDomains(c *class, v *variant) {
	for _, sp := range v.spreads {
		ctr := s.counters[sp.ctr]
		if ctr.kind != keyHost || !sp.honorAffinity || ctr.filter == nil {
			continue
		}
		for _, b := range s.bins[s.existing:] {
			if b.dead || len(s.pools[b.pool].minValues) > 0 || !s.domainNode(c, sp, b) {
				continue
			}
			in, match, elig := s.filterDecision(ctr, b, s.refType(b))
			if elig == nil || b.holds(elig, in) {
				continue
			}
			b.sides = append(b.sides, side{elig: elig, in: in})
			if in {
				s.narrowCustom(b, match)
			}
		}
	}
}

// canLaunch reports whether some pool can launch a node for the pod's required terms.
func (s *placer) canLaunch(c *class) bool {
	if c.launch == 0 {
		c.launch = 2
		for _, sig := range c.reqSigs {
			if s.anyPool(sig) {
				c.launch = 1
			}
		}
	}
	return c.launch == 1
}

// domainNode reports whether a node counts as a domain of the class's spread (node affinity
// honoured unless the policy says Ignore; taints ignored unless Honor). A new NodeClaim counts
// when it may launch as a matching node.
func (s *placer) domainNode(c *class, sp spreadC, b *bin) bool {
	if b.kind == binNew {
		sigs := c.reqSigsAll
		if sp.honorTaints {
			sigs = c.reqSigs
		}
		if !sp.honorAffinity {
			return !sp.honorTaints || s.compatWith(s.sigFor(nil, c.reqSigs[0].tols, false), s.pools[b.pool]).ok
		}
		for _, sig := range sigs {
			if cp := s.compatWith(sig, s.pools[b.pool]); cp.ok && cp.zoneMask&b.zoneMask != 0 {
				return true
			}
		}
		return false
	}
	if sp.honorTaints {
		for _, t := range b.taints {
			if !tolerates(c.reqSigs[0].tols, t.Key, t.Value, t.Effect) {
				return false
			}
		}
	}
	if !sp.honorAffinity {
		return true
	}
	for _, sig := range c.reqSigs {
		if requirements.Match(sig.reqs, b.labels) {
			return true
		}
	}
	return false
}

// spreadZones are the zones that count as domains of a zone spread of the class: zones of the
// nodes it may use and zones the pools could launch a node for it in.
func (s *placer) spreadZones(c *class, sp spreadC) uint32 {
	idx := 0
	if sp.honorAffinity {
		idx |= 1
	}
	if sp.honorTaints {
		idx |= 2
	}
	if c.domKnown&(1<<idx) != 0 {
		return c.domZones[idx]
	}
	var z uint32
	sigs := c.reqSigsAll
	if sp.honorTaints {
		sigs = c.reqSigs
	}
	for _, p := range s.pools {
		if !sp.honorAffinity {
			if p.invalid == "" && (!sp.honorTaints || s.compatWith(s.sigFor(nil, c.reqSigs[0].tols, false), p).ok) {
				z |= p.zonesOffered()
			}
			continue
		}
		for _, sig := range sigs {
			if cp := s.compatWith(sig, p); cp.ok {
				z |= cp.zoneMask
			}
		}
	}
	for _, b := range s.bins[:s.existing] {
		if b.zone >= 0 && s.domainNode(c, sp, b) {
			z |= 1 << b.zone
		}
	}
	c.domZones[idx] = z
	c.domKnown |= 1 << idx
	return z
}

// labelCap applies constraints keyed on other labels; the bin's value must be known.
func (s *placer) labelCap(c *class, v *variant, b *bin, k int) (int, string) {
	for _, sp := range v.spreads {
		ctr := s.counters[sp.ctr]
		if ctr.kind != keyLabel {
			continue
		}
		val, ok := s.domainOf(b, ctr.label)
		if !ok {
			return 0, "topology key " + ctr.label + " undecided on the node"
		}
		lo := s.labelMin(c, sp, ctr)
		if sp.self {
			a := int(sp.maxSkew + lo - ctr.other[val])
			if a <= 0 {
				return 0, "topology spread on " + ctr.label
			}
			k = min(k, a)
		} else if ctr.other[val]-lo > sp.maxSkew {
			return 0, "topology spread on " + ctr.label
		}
	}
	for _, a := range v.affs {
		ctr := s.counters[a.ctr]
		if ctr.kind != keyLabel {
			continue
		}
		val, ok := s.domainOf(b, ctr.label)
		if !ok {
			return 0, "topology key " + ctr.label + " undecided on the node"
		}
		if ctr.total > 0 && ctr.other[val] == 0 {
			return 0, "pod affinity on " + ctr.label
		}
		if ctr.total == 0 && !a.self {
			return 0, "no pod matches the required pod affinity on " + ctr.label
		}
	}
	for _, a := range v.antis {
		ctr := s.counters[a.ctr]
		if ctr.kind != keyLabel {
			continue
		}
		val, ok := s.domainOf(b, ctr.label)
		if !ok {
			return 0, "topology key " + ctr.label + " undecided on the node"
		}
		if ctr.other[val] > 0 {
			return 0, "pod anti-affinity on " + ctr.label
		}
		if a.self {
			k = 1
		}
	}
	for _, id := range c.antiSel {
		ctr := s.counters[id]
		if ctr.kind != keyLabel {
			continue
		}
		if val, ok := s.domainOf(b, ctr.label); ok && ctr.ownOther[val] > 0 {
			return 0, "anti-affinity of pods already placed on " + ctr.label
		}
	}
	return k, ""
}

// labelMin is the smallest count over the values the label can take for the pod.
func (s *placer) labelMin(c *class, sp spreadC, ctr *counter) int32 {
	vals := map[string]bool{}
	for _, b := range s.bins[:s.existing] {
		if !s.domainNode(c, sp, b) {
			continue
		}
		if val, ok := b.labels[ctr.label]; ok {
			vals[val] = true
		}
	}
	sigs := c.reqSigsAll
	if sp.honorTaints {
		sigs = c.reqSigs
	}
	for _, p := range s.pools {
		for _, sig := range sigs {
			cp := s.compatWith(sig, p)
			if !cp.ok {
				continue
			}
			if val, ok := p.fixed[ctr.label]; ok {
				vals[val] = true
				continue
			}
			if ctr.label == labelCapacityType {
				for ct := 0; ct < numCT; ct++ {
					if cp.ctMask&(1<<ct) != 0 {
						vals[ctNames[ct]] = true
					}
				}
				continue
			}
			if d := cp.custom[ctr.label]; d != nil || p.custom[ctr.label] != nil {
				if d == nil {
					d = p.custom[ctr.label]
				}
				finite, _ := d.Finite() // a label the pool defines (finite values only)
				for _, val := range finite {
					vals[val] = true
				}
				continue
			}
			cp.types.each(func(i int) bool {
				if val, ok := p.types[i].it.Labels[ctr.label]; ok {
					vals[val] = true
				}
				return true
			})
		}
	}
	if int32(len(vals)) < sp.minDomains || len(vals) == 0 {
		return 0
	}
	lo := int32(unlimited)
	for val := range vals {
		lo = min(lo, ctr.other[val])
	}
	return lo
}

// minValuesOK reports whether a new NodeClaim narrowed to types, zones and cts, with k more
// pods of size req, still fits enough distinct values of every minValues requirement of its
// pool.
//
// Only the options priced at or above the NodeClaim's launch type (floorType) count when that
// type is constrained: in a pool with limits a NodeClaim lists only the types that keep the pool
// within them in place of its target (the others at theirs) and cost no less than the target (it
// counts against the limits as its cheapest option); on a NodeClaim with sides, a cheaper type
// off a side would launch it on the wrong side, and on one that launches in one of the zones
// it lists (launchZone), a cheaper type offered cheapest in another zone would launch it
// there. See finalizeBin.
func (s *launcher) minValuesOK(b *bin, types bitset, zones uint32, cts uint8, req *catalog.Resources, k int) bool {
	p := s.pools[b.pool]
	if len(p.minValues) == 0 {
		return true
	}
	need := b.used
	addTo(&need, req, int64(k))
	limited := p.hasLimits()
	cur := &p.types[b.target]
	var prices []float64
	floor := math.Inf(-1)
	if limited || len(b.sides) > 0 || b.launchWide() {
		prices = p.prices(s.zoneIdx, zones, cts)
		_, floor = s.floorType(b, types, zones, cts, &need)
	}
	for _, mv := range p.minValues {
		seen := map[string]bool{}
		types.each(func(i int) bool {
			t := &p.types[i]
			if prices != nil && prices[i] < floor || limited && i != int(b.target) && !p.fitsLimitsSwap(cur, t) {
				return true
			}
			if fits(&need, &t.usable) && t.offers(zones, cts) {
				if val, ok := t.it.Labels[mv.key]; ok {
					seen[val] = true
				}
			}
			return len(seen) < mv.min
		})
		if len(seen) < mv.min {
			return false
		}
	}
	return true
}

// floorType is the type a new NodeClaim narrowed to types, zones and cts and holding need
// launches as once shrunk (see bestType), and its price: the cheapest that fits, is offered, is
// on every side of the NodeClaim and, in a pool with limits, is the target or fits the limits in
// its place without growing a limited resource (-1 and +Inf if none).
func (s *launcher) floorType(b *bin, types bitset, zones uint32, cts uint8, need *catalog.Resources) (int, float64) {
	p := s.pools[b.pool]
	limited := p.hasLimits()
	cur := &p.types[b.target]
	prices := p.prices(s.zoneIdx, zones, cts)
	best, floor := -1, math.Inf(1)
	types.each(func(i int) bool {
		t := &p.types[i]
		if prices[i] < floor && fits(need, &t.usable) && t.offers(zones, cts) && b.sideOK(i) && s.launchOK(b, i, zones, cts) &&
			(!limited || i == int(b.target) || p.fitsLimitsSwap(cur, t) && !p.grows(cur, t)) {
			best, floor = i, prices[i]
		}
		return true
	})
	return best, floor
}

// openBin opens a new NodeClaim for the class (in zone z if z >= 0): the highest-weight pool
// that can take the pod, the cheapest per pod among equal weights. It returns the NodeClaim and
// how many pods of the class it takes.
func (s *placer) openBin(c *class, v *variant, z int32) (*bin, int, string) {
	var reasons []string
	type cand struct {
		p     *poolState
		cp    *sigCompat
		t     int
		zones uint32
		score float64
	}
	for i := 0; i < len(s.poolOrder); {
		j := i
		var cands []cand
		for ; j < len(s.poolOrder) && s.poolOrder[j].weight == s.poolOrder[i].weight; j++ {
			p := s.poolOrder[j]
			cp := s.compatWith(v.sig, p)
			if !cp.ok {
				reasons = append(reasons, cp.reason)
				continue
			}
			zones := cp.zoneMask
			if z >= 0 {
				zones &= 1 << z
				if zones == 0 {
					reasons = append(reasons, fmt.Sprintf("nodepool %q offers no compatible instance type in zone %s", p.name, s.zones[z]))
					continue
				}
			}
			t, why := s.pickTarget(p, cp, zones, c)
			if t < 0 {
				reasons = append(reasons, why)
				continue
			}
			ti := &p.types[t]
			cands = append(cands, cand{p, cp, t, zones, ti.price / float64(max(1, fitCount(&c.req, &ti.usable, c.remaining())))})
		}
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].score < cands[b].score })
		for _, cd := range cands {
			// Constraints keyed on a label the pool leaves open (capacity type, arch, a custom
			// label) may need a value other than the cheapest type's: try each, cheapest first.
			why := ""
			for n, cp := range s.labelChoices(v, s.counters, cd.p, cd.cp, cd.zones) {
				t := cd.t
				if n > 0 {
					if t, why = s.pickTarget(cd.p, cp, cd.zones, c); t < 0 {
						continue
					}
				}
				b := s.newBin(cd.p, cp, cd.zones, t)
				if v.labelCons {
					s.decideLabels(v, b)
				}
				var k int
				if k, _, why = s.binCapacity(c, v, b, z); k > 0 {
					return b, k, ""
				}
				s.dropBin(b)
			}
			reasons = append(reasons, fmt.Sprintf("a new node of nodepool %q cannot take the pod: %s", cd.p.name, why))
		}
		i = j
	}
	if len(s.pools) == 0 {
		return nil, 0, "no nodepools"
	}
	return nil, 0, dedupReasons(reasons)
}

// pickTarget chooses the target instance type of a new NodeClaim for a pod of the class: the
// pool's preferred size among the allowed types that fit the pod and the pool's limits and whose
// daemonsets leave the pod's host ports free.
func (s *placer) pickTarget(p *poolState, cp *sigCompat, zones uint32, c *class) (int, string) {
	s.ensureRank(p)
	req := &c.req
	fitAny, limited, ports := false, false, false
	for _, t := range p.rank {
		if !cp.all && !cp.types.has(t) {
			continue
		}
		ti := &p.types[t]
		if !fits(req, &ti.usable) || !ti.offers(zones, cp.ctMask) {
			continue
		}
		if intersects(c.portConf, ti.dsPorts) {
			ports = true
			continue
		}
		fitAny = true
		if !s.fitsLimits(p, ti) {
			limited = true
			continue
		}
		return t, ""
	}
	if limited || (fitAny && p.nodeLimit >= 0) {
		return -1, p.limitsReason()
	}
	if ports && !fitAny {
		return -1, fmt.Sprintf("the daemonsets of nodepool %q use host port %s on every instance type that fits the pod", p.name, s.describePorts(c))
	}
	return -1, fmt.Sprintf("no instance type of nodepool %q has room for requests %s (after daemonsets)", p.name, FormatResources(*req))
}

// noCapacityReason explains why no node could take the class at all.
func (s *placer) noCapacityReason(c *class, v *variant) string {
	var reasons []string
	for _, p := range s.poolOrder {
		if cp := s.compatWith(v.sig, p); !cp.ok {
			reasons = append(reasons, cp.reason)
		}
	}
	if len(reasons) == 0 {
		return "no nodepool or node can take the pod"
	}
	return dedupReasons(reasons)
}

// place binds k pods of the class to the bin (narrowing a new NodeClaim's requirements).
func (s *placer) place(c *class, v *variant, b *bin, z int32, k int) int {
	if k <= 0 {
		return 0
	}
	if v.hostCons && !s.canLaunch(c) {
		s.holdHostDomains(c, v)
	}
	if b.kind == binNew {
		s.narrowBin(c, v, b, z, k)
	}
	addTo(&b.used, &c.req, int64(k))
	union(&b.ports, c.portSet)
	s.treeUpdate(b)
	pods := c.pods[c.placed : c.placed+k]
	b.pods = append(b.pods, pods...)
	for _, pi := range pods {
		s.podBin[pi] = b.id
		s.podSeq[pi] = s.seq
		s.seq++
	}
	c.placed += k
	s.countPod(c, b, int32(k), false)
	return k
}

// narrowBin intersects a new NodeClaim's requirements with the class's and decides the zone
// when the class needs one (k pods of the class are about to be placed).
func (s *placer) narrowBin(c *class, v *variant, b *bin, z int32, k int) {
	p := s.pools[b.pool]
	cp := s.compatWith(v.sig, p)
	zm := b.zoneMask & cp.zoneMask
	if z >= 0 {
		zm &= 1 << z
	}
	cm := b.ctMask & cp.ctMask
	if !cp.all || zm != b.zoneMask || cm != b.ctMask {
		if b.allTypes {
			b.types, b.allTypes = p.all.clone(), false
		}
		if !cp.all {
			b.types.and(b.types, cp.types)
		}
		b.zoneMask, b.ctMask = zm, cm
		b.types.each(func(i int) bool {
			if !p.types[i].offers(zm, cm) {
				b.types.clear(i)
			}
			return true
		})
	}
	if c.portConf != nil && p.dsPorts {
		// Types whose daemonsets take one of the pods' host ports cannot hold them.
		if b.allTypes {
			b.types, b.allTypes = p.all.clone(), false // p.all is shared
		}
		b.types = s.withoutPortClashes(c, p, b.types)
	}
	if cp.custom != nil {
		if b.custom == nil {
			b.custom = map[string]*domain{}
		}
		for key, d := range cp.custom {
			if bd := b.custom[key]; bd != nil {
				intersect(bd, d)
			} else {
				b.custom[key] = d.Clone()
			}
		}
	}
	if b.zone < 0 {
		if bits.OnesCount32(b.zoneMask) == 1 {
			s.narrowZone(b, int32(bits.TrailingZeros32(b.zoneMask)))
		} else if c.needZone && !c.free {
			if zz := s.pickZone(c, b, b.types); zz >= 0 {
				s.narrowZone(b, zz)
			} else if zz := s.launchZone(b, c, &c.req, k); zz >= 0 {
				s.launchIn(b, zz)
			}
		}
	}
	if v.labelCons {
		s.decideLabels(v, b)
	}
}

// pickZone chooses a zone for an undecided NodeClaim that receives pods counted per zone: the
// zone where those pods' counters are lowest, then the cheapest (-1: leave it open). types are
// the NodeClaim's types the class's pods accept.
func (s *placer) pickZone(c *class, b *bin, types bitset) int32 {
	p := s.pools[b.pool]
	t := &p.types[b.target]
	best, bestCount, bestPrice := int32(-1), int32(0), 0.0
	m0 := b.zoneMask
	if len(p.minValues) > 0 {
		// No zone alone keeps minValues: leave the zone open (and the pods uncounted per zone
		// until it is settled), as Karpenter does for NodeClaims spanning zones.
		if m0 = s.minValuesZones(b, types, m0, &c.req, 1); m0 == 0 {
			return -1
		}
	}
	for m := m0; m != 0; m &= m - 1 {
		z := int32(bits.TrailingZeros32(m))
		if !t.offers(1<<z, b.ctMask) {
			continue
		}
		var cnt int32
		for _, id := range c.countedBy {
			if ctr := s.counters[id]; ctr.kind == keyZone {
				cnt += ctr.zone[z]
			}
		}
		price := t.priceIn(1<<z, b.ctMask, s.zoneIdx)
		if best < 0 || cnt < bestCount || (cnt == bestCount && price < bestPrice) {
			best, bestCount, bestPrice = z, cnt, price
		}
	}
	return best
}

// decideLabels fixes the value of other topology keys on a new NodeClaim when undecided: the
// capacity type or instance type label of its target.
func (s *placer) decideLabels(v *variant, b *bin) {
	p := s.pools[b.pool]
	keys := map[string]bool{}
	for _, sp := range v.spreads {
		if ctr := s.counters[sp.ctr]; ctr.kind == keyLabel {
			keys[ctr.label] = true
		}
	}
	for _, a := range append(append([]affC{}, v.affs...), v.antis...) {
		if ctr := s.counters[a.ctr]; ctr.kind == keyLabel {
			keys[ctr.label] = true
		}
	}
	for key := range keys {
		if _, ok := s.domainOf(b, key); ok {
			continue
		}
		t := &p.types[b.target]
		switch {
		case key == labelCapacityType:
			for ct := 0; ct < numCT; ct++ {
				if b.ctMask&(1<<ct) != 0 && t.zoneByCT[ct]&b.zoneMask != 0 {
					b.ctMask = 1 << ct
					break
				}
			}
		case b.custom[key] != nil && len(finiteOf(b.custom[key])) > 0:
			b.custom[key].Pin(finiteOf(b.custom[key])[0])
		default:
			val, has := t.it.Labels[key]
			if b.allTypes {
				b.types, b.allTypes = p.all.clone(), false
			}
			b.types.each(func(i int) bool {
				if v2, ok := p.types[i].it.Labels[key]; ok != has || v2 != val {
					b.types.clear(i)
				}
				return true
			})
		}
	}
}
