package scheduling

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/internal/requirements"
)

// topology holds the counters of topology spread and pod (anti-)affinity per domain.
type topology struct {
	*launcher
	cls *classSet

	counters      []*counter
	counterIdx    map[string]int32
	labelSetMatch map[string][]int32
}

// counter counts, per topology domain, the pods matching a selector (and, for anti-affinity
// terms, the pods owning the term).
type counter struct {
	id    int32
	kind  uint8
	label string // for keyLabel
	ns    nsMatcher
	sel   labels.Selector
	anti  bool // an anti-affinity term: owners matter
	zone  []int32
	host  []int32
	other map[string]int32
	total int32
	// owners of the anti-affinity term per domain.
	ownZone  []int32
	ownHost  []int32
	ownOther map[string]int32
	used     bool // referenced by a pending class (its counts are maintained)
	// filter, for topology spread with nodeAffinityPolicy Honor: only pods on nodes matching
	// one of these signatures (labels only) count.
	filter []*nodeSig
}

type nsMatcher struct {
	all   bool
	names []string
}

func (m *nsMatcher) matches(ns string) bool { return m.all || slices.Contains(m.names, ns) }

func (m *nsMatcher) key() string {
	if m.all {
		return "*"
	}
	return strings.Join(m.names, ",")
}

func topoKind(key string) (uint8, string) {
	key = karpv1.NormalizeLabel(key)
	switch key {
	case labelZone:
		return keyZone, ""
	case labelHostname:
		return keyHost, ""
	}
	return keyLabel, key
}

// counterFor interns a counter.
func (s *topology) counterFor(topologyKey string, ns nsMatcher, sel labels.Selector, anti bool) int32 {
	return s.counterWith(topologyKey, ns, sel, anti, nil)
}

func (s *topology) counterWith(topologyKey string, ns nsMatcher, sel labels.Selector, anti bool, filter []*nodeSig) int32 {
	kind, label := topoKind(topologyKey)
	key := strconv.Itoa(int(kind)) + "\x00" + label + "\x00" + ns.key() + "\x00" + sel.String()
	if anti {
		key += "\x00anti"
	}
	for _, f := range filter {
		key += "\x00f" + strconv.Itoa(f.id)
	}
	if id, ok := s.counterIdx[key]; ok {
		return id
	}
	c := &counter{id: int32(len(s.counters)), kind: kind, label: label, ns: ns, sel: sel, anti: anti, filter: filter}
	switch kind {
	case keyZone:
		c.zone = make([]int32, len(s.zones))
		if anti {
			c.ownZone = make([]int32, len(s.zones))
		}
	case keyLabel:
		c.other = map[string]int32{}
		if anti {
			c.ownOther = map[string]int32{}
		}
	}
	s.counters = append(s.counters, c)
	s.counterIdx[key] = c.id
	return c.id
}

// labelSetKey identifies a namespace and label set.
func labelSetKey(ns string, l map[string]string) string {
	buf := append([]byte(ns), 0)
	return string(appendSortedMap(buf, l))
}

// matchCounters returns the counters matching a namespace and label set (cached).
func (s *topology) matchCounters(ns string, l map[string]string) []int32 {
	key := labelSetKey(ns, l)
	if m, ok := s.labelSetMatch[key]; ok {
		return m
	}
	var out []int32
	set := labels.Set(l)
	for _, c := range s.counters {
		if c.ns.matches(ns) && c.sel.Matches(set) {
			out = append(out, c.id)
		}
	}
	s.labelSetMatch[key] = out
	return out
}

// prepareTopology wires classes to counters and counts the pods already bound.
func (s *topology) prepareTopology() {
	// Required anti-affinity terms of bound pods repel pending pods (symmetry).
	type owner struct {
		bin int
		ctr int32
	}
	var owners []owner
	for bi, pods := range s.existingPods {
		for _, p := range pods {
			if p == nil || isTerminal(p) || p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
				continue
			}
			for i := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				t := &p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
				id := s.counterFor(t.TopologyKey, s.cls.termNamespaces(p.Namespace, t), selectorOf(t.LabelSelector), true)
				owners = append(owners, owner{bi, id})
			}
		}
	}
	for _, c := range s.counters {
		if c.kind == keyHost {
			c.host = make([]int32, len(s.bins), len(s.bins)+64)
			if c.anti {
				c.ownHost = make([]int32, len(s.bins), len(s.bins)+64)
			}
		}
	}
	for _, o := range owners {
		s.counters[o.ctr].addOwner(s, s.bins[o.bin], 1)
	}
	// Bound pods count in their domains.
	if len(s.counters) > 0 {
		for bi, pods := range s.existingPods {
			b := s.bins[bi]
			for _, p := range pods {
				if p == nil || isTerminal(p) {
					continue
				}
				for _, id := range s.matchCounters(p.Namespace, p.Labels) {
					s.counters[id].add(s, b, 1)
				}
			}
		}
	}
	for _, c := range s.cls.classes {
		c.countedBy = s.matchCounters(c.ns, c.labels)
		for _, id := range c.countedBy {
			ctr := s.counters[id]
			if ctr.anti {
				c.antiSel = append(c.antiSel, id)
			}
			if ctr.kind == keyZone {
				c.needZone = true
			}
		}
		for _, id := range c.owns {
			if s.counters[id].kind == keyZone {
				c.needZone = true
			}
		}
	}
	// Classes some other class's pod affinity points at are placed first.
	affUsers := map[int32][]int{}
	for _, c := range s.cls.classes {
		for _, v := range c.variants {
			for _, a := range v.affs {
				if u := affUsers[a.ctr]; len(u) == 0 || u[len(u)-1] != c.id {
					affUsers[a.ctr] = append(u, c.id)
				}
			}
		}
	}
	if len(affUsers) > 0 {
		for _, o := range s.cls.classes {
			for _, id := range o.countedBy {
				for _, user := range affUsers[id] {
					if user != o.id {
						o.affTarget = true
					}
				}
			}
		}
	}
	for _, c := range s.cls.classes {
		// Pods with host ports take one node each (per conflicting port): placed one by one.
		c.free = !c.affTarget && len(c.antiSel) == 0 && c.portSet == nil
		for _, v := range c.variants {
			if v.constrained() {
				c.free = false
			}
		}
	}
}

// domainOf is a bin's value for a label topology key (keyLabel counters).
func (s *topology) domainOf(b *bin, key string) (string, bool) {
	if b.kind != binNew {
		v, ok := b.labels[key]
		return v, ok
	}
	p := s.pools[b.pool]
	if v, ok := p.fixed[key]; ok {
		return v, true
	}
	if d := b.custom[key]; d != nil {
		if v, ok := single(d); ok {
			return v, true
		}
	}
	if key == labelCapacityType {
		for ct := 0; ct < numCT; ct++ {
			if b.ctMask == 1<<ct {
				return ctNames[ct], true
			}
		}
		return "", false
	}
	// An instance type label: known if every candidate type agrees.
	first, agreed, has := "", true, false
	b.types.each(func(i int) bool {
		v, ok := p.types[i].it.Labels[key]
		if !has {
			first, has = v, ok
			if !ok {
				first = "\x00"
			}
			return true
		}
		if (ok && v != first) || (!ok && first != "\x00") {
			agreed = false
			return false
		}
		return true
	})
	if agreed && has && first != "\x00" {
		return first, true
	}
	return "", false
}

// filterEligible reports whether pods on the bin count for a counter with a node filter. An
// existing node is judged by its labels. A new NodeClaim may still launch as types (or with
// pool-defined label values) inside or outside the filter: for hostname counters, counting
// whenever it may match is the safe side; for the others the NodeClaim is narrowed to the side
// its reference type (refType) is on, so that the count stays exact.
func (s *topology) filterEligible(ctr *counter, b *bin) bool {
	if b.kind != binNew {
		for _, sig := range ctr.filter {
			if requirements.Match(sig.reqs, b.labels) {
				return true
			}
		}
		return false
	}
	p := s.pools[b.pool]
	in, match, elig := s.filterDecision(ctr, b, s.refType(b))
	if elig == nil {
		return false
	}
	if ctr.kind == keyHost {
		for i := range elig {
			if elig[i]&b.types[i] != 0 {
				return true
			}
		}
		return false
	}
	var none catalog.Resources
	if narrowed := sideTypes(b.types, in, match, elig); len(p.minValues) == 0 || s.minValuesOK(b, narrowed, b.zoneMask, b.ctMask, &none, 0) {
		b.types, b.allTypes = narrowed, false
	} else {
		// Narrowing would break minValues: keep the types, but make sure the node launches
		// (as its cheapest option) on the side it was counted on. Only options priced at or
		// above the cheapest type on that side can then be listed; when those are too few,
		// count on the side of the type the NodeClaim launches as (floorType) instead, which
		// keeps every option it lists now.
		b.sides = append(b.sides, side{elig: elig, in: in})
		if !s.minValuesOK(b, b.types, b.zoneMask, b.ctMask, &none, 0) {
			b.sides = b.sides[:len(b.sides)-1]
			if t, _ := s.floorType(b, b.types, b.zoneMask, b.ctMask, &b.used); t >= 0 {
				in, match, _ = s.filterDecision(ctr, b, t)
			}
			b.sides = append(b.sides, side{elig: elig, in: in})
		}
	}
	if in {
		s.narrowCustom(b, match)
	}
	return in
}

// narrowCustom narrows a new NodeClaim's pool-defined labels to the values a filter signature
// it was counted inside of accepts.
func (s *topology) narrowCustom(b *bin, match *sigCompat) {
	if match.custom == nil {
		return
	}
	p := s.pools[b.pool]
	if b.custom == nil {
		b.custom = map[string]*domain{}
	}
	for key, fd := range match.custom {
		bd := b.custom[key]
		if bd == nil {
			bd = p.custom[key].Clone()
			b.custom[key] = bd
		}
		bd.Intersect(fd)
	}
}

// refType is the type a new NodeClaim's side of a node filter is decided by: its target, or,
// when a side recorded earlier excludes the target (it was decided by floorType), the type it
// launches as.
func (s *topology) refType(b *bin) int {
	if b.sideOK(int(b.target)) {
		return int(b.target)
	}
	if t, _ := s.floorType(b, b.types, b.zoneMask, b.ctMask, &b.used); t >= 0 {
		return t
	}
	return int(b.target)
}

// sideTypes narrows a type set to one side of a node filter: the matching signature's types
// (in), or the types no signature the NodeClaim could match allows (out).
func sideTypes(types bitset, in bool, match *sigCompat, elig bitset) bitset {
	narrowed := types.clone()
	if in {
		narrowed.and(narrowed, match.types)
	} else {
		for i := range narrowed {
			narrowed[i] &^= elig[i]
		}
	}
	return narrowed
}

// filterDecision decides on which side of a counter's node filter a new NodeClaim falls: in
// when type ref is allowed by a filter signature whose pool-defined labels the NodeClaim can
// still take (match is that signature's evaluation); elig are the types of every signature the
// NodeClaim could match (nil when none can).
func (s *topology) filterDecision(ctr *counter, b *bin, ref int) (bool, *sigCompat, bitset) {
	p := s.pools[b.pool]
	var elig bitset
	var match *sigCompat
	for _, sig := range ctr.filter {
		cp := s.compatWith(sig, p)
		if !cp.ok || (b.zone >= 0 && cp.zoneMask&(1<<b.zone) == 0) || !s.customPossible(b, cp) {
			continue
		}
		if elig == nil {
			elig = newBitset(len(p.types))
		}
		for i := range elig {
			elig[i] |= cp.types[i]
		}
		if match == nil && cp.types.has(ref) {
			match = cp
		}
	}
	return match != nil, match, elig
}

// customPossible reports whether the NodeClaim's pool-defined labels can still take values the
// signature accepts.
func (s *topology) customPossible(b *bin, cp *sigCompat) bool {
	for key, fd := range cp.custom {
		bd := b.custom[key]
		if bd == nil {
			continue // the NodeClaim has the pool's full domain, which fd narrows
		}
		if !intersect(bd.Clone(), fd) {
			return false
		}
	}
	return true
}

// filterNarrow applies to a type set the narrowing filterEligible will do when the class's pods
// are counted on the new NodeClaim (so that minValues can be checked beforehand).
func (s *topology) filterNarrow(c *class, b *bin, types bitset, zones uint32) bitset {
	out := types
	ref := s.refType(b)
	for _, id := range c.countedBy {
		ctr := s.counters[id]
		if ctr.filter == nil || ctr.kind == keyHost {
			continue
		}
		in, match, elig := s.filterDecision(ctr, b, ref)
		if elig == nil {
			continue
		}
		if narrowed := sideTypes(out, in, match, elig); s.minValuesOK(b, narrowed, zones, b.ctMask, &c.req, 1) {
			out = narrowed
		}
	}
	return out
}

func (c *counter) hostSlot(b *bin) {
	for int(b.id) >= len(c.host) {
		c.host = append(c.host, 0)
	}
	if c.anti {
		for int(b.id) >= len(c.ownHost) {
			c.ownHost = append(c.ownHost, 0)
		}
	}
}

// add counts k matching pods placed on b; the bin's domain must be known.
func (c *counter) add(s *topology, b *bin, k int32) {
	if c.filter != nil && !s.filterEligible(c, b) {
		return
	}
	switch c.kind {
	case keyHost:
		c.hostSlot(b)
		c.host[b.id] += k
	case keyZone:
		if b.zone < 0 {
			return
		}
		c.zone[b.zone] += k
	default:
		v, ok := s.domainOf(b, c.label)
		if !ok {
			return
		}
		c.other[v] += k
	}
	c.total += k
}

func (c *counter) addOwner(s *topology, b *bin, k int32) {
	switch c.kind {
	case keyHost:
		c.hostSlot(b)
		c.ownHost[b.id] += k
	case keyZone:
		if b.zone >= 0 {
			c.ownZone[b.zone] += k
		}
	default:
		if v, ok := s.domainOf(b, c.label); ok {
			c.ownOther[v] += k
		}
	}
}

func (c *counter) hostCount(b *bin) int32 {
	if int(b.id) < len(c.host) {
		return c.host[b.id]
	}
	return 0
}

func (c *counter) hostOwners(b *bin) int32 {
	if int(b.id) < len(c.ownHost) {
		return c.ownHost[b.id]
	}
	return 0
}

// countPod records k pods of the class on the bin in every counter; free pods on a bin whose
// zone is still open wait in b.uncounted (deferred=false means the pods were just placed).
func (s *topology) countPod(c *class, b *bin, k int32, settling bool) {
	if !settling && c.needZone && b.zone < 0 && b.kind == binNew {
		b.uncounted = append(b.uncounted, b.pods[len(b.pods)-int(k):]...)
		for _, id := range c.countedBy {
			if ctr := s.counters[id]; ctr.kind != keyZone {
				ctr.add(s, b, k)
			}
		}
		for _, id := range c.owns {
			if ctr := s.counters[id]; ctr.kind != keyZone {
				ctr.addOwner(s, b, k)
			}
		}
		return
	}
	for _, id := range c.countedBy {
		ctr := s.counters[id]
		if settling && ctr.kind != keyZone {
			continue
		}
		ctr.add(s, b, k)
	}
	for _, id := range c.owns {
		ctr := s.counters[id]
		if settling && ctr.kind != keyZone {
			continue
		}
		ctr.addOwner(s, b, k)
	}
}
