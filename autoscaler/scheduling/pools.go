package scheduling

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/internal/requirements"
)

// poolSet holds the pools with their instance types and offerings, the zones, the daemonsets,
// and the node signatures with their compatibility per pool.
type poolSet struct {
	in      *Input
	ports   *portTable // the solve's host ports, for the daemonsets'
	zones   []string
	zoneIdx map[string]int

	pools     []*poolState
	poolOrder []*poolState // weight desc, name
	daemons   []*daemon

	sigs    map[string]*nodeSig
	sigList []*nodeSig

	labelTemplates map[labelsKey]map[string]string

	// typeKeys is the label keys of each instance type list, by where it is in memory: pools
	// of one node class share their list, and a thousand pools would otherwise each walk it.
	typeKeys map[typeList]map[string]bool
	// typeScratch gathers a pool's instance types while it is built.
	typeScratch []typeInfo

	// preferTaints: some pool or node has a PreferNoSchedule taint.
	preferTaints bool

	oneChoice [1]*sigCompat // labelChoices' result when nothing is open
}

// newPoolSet returns the pool set of the input, not built yet (see buildPools).
func newPoolSet(in *Input, ports *portTable) poolSet {
	return poolSet{in: in, ports: ports, sigs: map[string]*nodeSig{}}
}

// Capacity types, as indexes into masks.
const (
	ctSpot = iota
	ctOnDemand
	ctReserved
	numCT
)

var ctNames = [numCT]string{catalog.CapacityTypeSpot, catalog.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}

func ctIndex(s string) int {
	for i, n := range ctNames {
		if n == s {
			return i
		}
	}
	return -1
}

const maxZones = 32

// typeInfo is an instance type as seen by one pool.
type typeInfo struct {
	it *catalog.InstanceType
	// usable is allocatable minus the requests of the daemonsets that would run on the node.
	usable catalog.Resources
	ds     catalog.Resources
	// dsPorts are the host ports of those daemonsets (interned: dsPortIDs).
	dsPorts   bitset
	dsPortIDs []int
	// zoneByCT holds, per capacity type, the zones with an available offering the pool allows.
	zoneByCT [numCT]uint32
	// price is the cheapest available offering the pool allows; worst the dearest, which is
	// what a NodeClaim of this type counts against the pool's cost limit until it launches.
	price, worst float64
	// eff is how much of the pool's demand (at LP dual prices) a node of this type carries per
	// dollar; 1 for the types of the LP optimum.
	eff float64
}

// offers reports whether the type has an available offering in the zone and capacity type masks.
func (t *typeInfo) offers(zones uint32, cts uint8) bool {
	for ct := 0; ct < numCT; ct++ {
		if cts&(1<<ct) != 0 && t.zoneByCT[ct]&zones != 0 {
			return true
		}
	}
	return false
}

// priceIn is the cheapest offering within the masks (+Inf if none).
func (t *typeInfo) priceIn(zones uint32, cts uint8, zoneIdx map[string]int) float64 {
	best, _ := t.priceRange(zones, cts, zoneIdx)
	return best
}

// priceRange is the cheapest and the dearest offering within the masks (+Inf and 0 if none).
func (t *typeInfo) priceRange(zones uint32, cts uint8, zoneIdx map[string]int) (float64, float64) {
	best, worst := math.Inf(1), 0.0
	for i := range t.it.Offerings {
		o := &t.it.Offerings[i]
		if !o.Available {
			continue
		}
		ct := ctIndex(o.CapacityType)
		z, ok := zoneIdx[o.Zone]
		if ct < 0 || !ok || cts&(1<<ct) == 0 || zones&(1<<z) == 0 {
			continue
		}
		best, worst = min(best, o.PricePerHour), max(worst, o.PricePerHour)
	}
	return best, worst
}

type minValue struct {
	key string
	min int
}

// poolState is a NodePool prepared for scheduling.
type poolState struct {
	idx    int
	name   string
	np     *karpv1.NodePool
	weight int32
	types  []typeInfo
	all    bitset
	// fixed labels every node of the pool carries (template labels, the pool name, the region).
	fixed map[string]string
	// custom holds the pool's requirements on keys that are neither instance type labels nor
	// zone/capacity type: the node gets one of the allowed values.
	custom   map[string]*domain
	typeKeys map[string]bool
	zoneMask uint32
	ctMask   uint8
	taints   []corev1.Taint // NoSchedule / NoExecute template taints
	// preferTaints are the PreferNoSchedule template taints: avoided by pods that do not
	// tolerate them until every other relaxation has failed (nodeSig.avoid).
	preferTaints []corev1.Taint
	// limits; limited marks the resources that have one. nodeLimit < 0 means none.
	limits    catalog.Resources
	limited   [catalog.NumResources]bool
	nodeLimit int64
	usage     catalog.Resources
	nodes     int64
	// costLimit is the karpool.dev/limit-per-hour annotation (+Inf without one); cost what the
	// pool's nodes and NodeClaims count against it: launched ones at their offering's price,
	// others at the dearest offering they may launch as (typeInfo.worst), so that no launch
	// can take the pool past the limit.
	costLimit float64
	cost      float64
	// minValues hold packing back (Strict); relaxed are the pool's minValues under
	// Options.MinValuesBestEffort, which only the NodeClaims' requirements carry.
	minValues, relaxed []minValue
	// invalid explains why the pool can launch nothing.
	invalid string
	// dsPorts: a daemonset of some type uses a host port.
	dsPorts bool
	// rank lists type indexes in the order new NodeClaims prefer them as a target size.
	rank []int
	// duals are the LP dual prices of the pool's demand ($ per unit of each resource).
	duals [catalog.NumResources]float64
	// priceCache holds, per zone and capacity type mask, each type's cheapest offering; order
	// the type indexes sorted by it; offCache the allowed offerings of each type.
	priceCache map[uint64][]float64
	orderCache map[uint64][]int
	offCache   map[uint64][]offeringSet
}

type offeringSet struct {
	offs  []catalog.Offering
	zones uint32
	cts   uint8
	done  bool
}

// sorted returns the prices within the masks and the type indexes sorted by price, then name.
func (p *poolState) sorted(zoneIdx map[string]int, zones uint32, cts uint8) ([]float64, []int) {
	prices := p.prices(zoneIdx, zones, cts)
	key := uint64(zones)<<8 | uint64(cts)
	if o, ok := p.orderCache[key]; ok {
		return prices, o
	}
	if p.orderCache == nil {
		p.orderCache = map[uint64][]int{}
	}
	o := make([]int, len(p.types))
	for i := range o {
		o[i] = i
	}
	sort.SliceStable(o, func(a, b int) bool {
		if prices[o[a]] != prices[o[b]] {
			return prices[o[a]] < prices[o[b]]
		}
		return p.types[o[a]].it.Name < p.types[o[b]].it.Name
	})
	p.orderCache[key] = o
	return prices, o
}

// offerings returns a type's available offerings within the masks, cheapest first (shared,
// read-only), and the zones and capacity types they cover.
func (p *poolState) offerings(zoneIdx map[string]int, t int, zones uint32, cts uint8) ([]catalog.Offering, uint32, uint8) {
	key := uint64(zones)<<8 | uint64(cts)
	sets, ok := p.offCache[key]
	if !ok {
		if p.offCache == nil {
			p.offCache = map[uint64][]offeringSet{}
		}
		sets = make([]offeringSet, len(p.types))
		p.offCache[key] = sets
	}
	set := &sets[t]
	if !set.done {
		ti := &p.types[t]
		for _, of := range ti.it.Offerings {
			z, ok := zoneIdx[of.Zone]
			ct := ctIndex(of.CapacityType)
			if !of.Available || !ok || ct < 0 || zones&(1<<z) == 0 || cts&(1<<ct) == 0 || ti.zoneByCT[ct]&(1<<z) == 0 {
				continue
			}
			set.offs = append(set.offs, of)
			set.zones |= 1 << z
			set.cts |= 1 << ct
		}
		sort.SliceStable(set.offs, func(i, j int) bool {
			a, b := set.offs[i], set.offs[j]
			if a.PricePerHour != b.PricePerHour {
				return a.PricePerHour < b.PricePerHour
			}
			if a.Zone != b.Zone {
				return a.Zone < b.Zone
			}
			return a.CapacityType < b.CapacityType
		})
		set.done = true
	}
	return set.offs, set.zones, set.cts
}

// prices returns each type's cheapest available offering within the masks (+Inf if none).
func (p *poolState) prices(zoneIdx map[string]int, zones uint32, cts uint8) []float64 {
	key := uint64(zones)<<8 | uint64(cts)
	if v, ok := p.priceCache[key]; ok {
		return v
	}
	if p.priceCache == nil {
		p.priceCache = map[uint64][]float64{}
	}
	v := make([]float64, len(p.types))
	for i := range p.types {
		t := &p.types[i]
		if zones == p.zoneMask && cts == p.ctMask {
			v[i] = t.price
		} else {
			v[i] = t.priceIn(zones, cts, zoneIdx)
		}
	}
	p.priceCache[key] = v
	return v
}

// zonesOffered are the zones where some type of the pool has an offering.
func (p *poolState) zonesOffered() uint32 {
	var z uint32
	for i := range p.types {
		for ct := 0; ct < numCT; ct++ {
			z |= p.types[i].zoneByCT[ct]
		}
	}
	return z
}

// fitsLimits reports whether one more node of type t stays within the pool's limits.
func (p *poolState) fitsLimits(t *typeInfo) bool {
	if p.nodeLimit >= 0 && p.nodes+1 > p.nodeLimit || !p.fitsCost(p.cost+t.worst) {
		return false
	}
	for r := range p.limited {
		if p.limited[r] && p.usage[r]+t.it.Capacity[r] > p.limits[r] {
			return false
		}
	}
	return true
}

// fitsLimits reports whether one more node of type t keeps pool p within its limits, and every
// new NodeClaim of the pool with enough options within them for the pool's minValues.
func (s *launcher) fitsLimits(p *poolState, t *typeInfo) bool {
	return p.fitsLimits(t) && s.keepsMinValues(p, nil, t, nil)
}

// keepsMinValues reports whether the pool's new NodeClaims (but skip) keep enough options for
// its minValues when its usage changes from a node of type from (nil: none) to one of type to.
// In a pool with limits a NodeClaim only lists the types that fit the limits left by the
// others, so every node added or grown takes options away from the rest.
func (s *launcher) keepsMinValues(p *poolState, from, to *typeInfo, skip *bin) bool {
	if len(p.minValues) == 0 {
		return true
	}
	if from != nil && !p.grows(from, to) {
		return true
	}
	if from != nil {
		p.commit(from, -1)
	}
	p.commit(to, 1)
	ok := true
	var none catalog.Resources
	for _, b := range s.bins[s.existing:] {
		if b != skip && !b.dead && int(b.pool) == p.idx && len(b.pods) > 0 &&
			!s.minValuesOK(b, b.types, b.zoneMask, b.ctMask, &none, 0) {
			ok = false
			break
		}
	}
	p.commit(to, -1)
	if from != nil {
		p.commit(from, 1)
	}
	return ok
}

// fitsCost reports whether a pool whose nodes cost this much stays within its cost limit (a
// tolerance of a millionth of a dollar absorbs the float sums).
func (p *poolState) fitsCost(cost float64) bool {
	return cost <= p.costLimit+1e-6
}

// costLimited reports whether the pool has a cost limit.
func (p *poolState) costLimited() bool {
	return !math.IsInf(p.costLimit, 1)
}

// grows reports whether a node of type to has more of some limited resource than one of type
// from, or counts more against the cost limit.
func (p *poolState) grows(from, to *typeInfo) bool {
	if p.costLimited() && to.worst > from.worst {
		return true
	}
	for r := range p.limited {
		if p.limited[r] && to.it.Capacity[r] > from.it.Capacity[r] {
			return true
		}
	}
	return false
}

// hasLimits reports whether some resource or the cost of the pool is limited (the node count
// aside).
func (p *poolState) hasLimits() bool {
	if p.costLimited() {
		return true
	}
	for r := range p.limited {
		if p.limited[r] {
			return true
		}
	}
	return false
}

func (p *poolState) fitsLimitsSwap(from, to *typeInfo) bool {
	if !p.fitsCost(p.cost - from.worst + to.worst) {
		return false
	}
	for r := range p.limited {
		if p.limited[r] && p.usage[r]-from.it.Capacity[r]+to.it.Capacity[r] > p.limits[r] {
			return false
		}
	}
	return true
}

func (p *poolState) limitsReason() string {
	var parts []string
	if p.nodeLimit >= 0 && p.nodes+1 > p.nodeLimit {
		parts = append(parts, fmt.Sprintf("nodes %d/%d", p.nodes, p.nodeLimit))
	}
	for r := range p.limited {
		if p.limited[r] {
			parts = append(parts, fmt.Sprintf("%s %s/%s", catalog.ResourceNames[r],
				FormatQuantity(catalog.Resource(r), p.usage[r]), FormatQuantity(catalog.Resource(r), p.limits[r])))
		}
	}
	if p.costLimited() {
		parts = append(parts, fmt.Sprintf("%s $%.4f/h of $%.4f/h", karpoolv1alpha1.AnnotationLimitPerHour, p.cost, p.costLimit))
	}
	return fmt.Sprintf("nodepool %q limits exceeded (%s)", p.name, strings.Join(parts, ", "))
}

func (p *poolState) commit(t *typeInfo, sign int64) {
	p.nodes += sign
	addTo(&p.usage, &t.it.Capacity, sign)
	p.cost += float64(sign) * t.worst
}

// isOfferingKey, and the other key classes, decide how a requirement is evaluated against a pool.
func isTypeKeyCandidate(key string) bool {
	return key == labelInstanceType || key == corev1.LabelArchStable || key == corev1.LabelOSStable ||
		strings.HasPrefix(key, "karpenter.k8s.aws/instance-")
}

// buildPools prepares every NodePool.
func (s *poolSet) buildPools() {
	s.buildZones()
	for i := range s.in.Pools {
		s.pools = append(s.pools, s.buildPool(i))
	}
	// Highest weight first, then name.
	s.poolOrder = make([]*poolState, len(s.pools))
	copy(s.poolOrder, s.pools)
	sort.SliceStable(s.poolOrder, func(a, b int) bool {
		pa, pb := s.poolOrder[a], s.poolOrder[b]
		if pa.weight != pb.weight {
			return pa.weight > pb.weight
		}
		return pa.name < pb.name
	})
}

// buildZones indexes every zone any offering or node mentions, in name order.
func (s *poolSet) buildZones() {
	zoneSet := map[string]bool{}
	for _, p := range s.in.Pools {
		for i := range p.InstanceTypes {
			for _, o := range p.InstanceTypes[i].Offerings {
				zoneSet[o.Zone] = true
			}
		}
	}
	for _, n := range s.in.Nodes {
		if n.Node != nil {
			if z, ok := n.Node.Labels[labelZone]; ok {
				zoneSet[z] = true
			}
		}
	}
	for _, nc := range s.in.NodeClaims {
		if nc.NodeClaim != nil {
			for _, r := range nc.NodeClaim.Spec.Requirements {
				if r.Key == labelZone && r.Operator == corev1.NodeSelectorOpIn {
					for _, z := range r.Values {
						zoneSet[z] = true
					}
				}
			}
		}
	}
	for z := range zoneSet {
		s.zones = append(s.zones, z)
	}
	sort.Strings(s.zones)
	if len(s.zones) > maxZones {
		s.zones = s.zones[:maxZones]
	}
	s.zoneIdx = make(map[string]int, len(s.zones))
	for i, z := range s.zones {
		s.zoneIdx[z] = i
	}
}

// typeKeysOf returns the label keys of a list of instance types, computed once per list. The
// map is shared: it is only read.
func (s *poolSet) typeKeysOf(its []catalog.InstanceType) map[string]bool {
	if len(its) == 0 {
		return map[string]bool{}
	}
	at := typeList{&its[0], len(its)}
	if keys, ok := s.typeKeys[at]; ok {
		return keys
	}
	keys := map[string]bool{}
	for i := range its {
		for k := range its[i].Labels {
			keys[k] = true
		}
	}
	if s.typeKeys == nil {
		s.typeKeys = map[typeList]map[string]bool{}
	}
	s.typeKeys[at] = keys
	return keys
}

// typeList identifies a slice of instance types: its first element and its length.
type typeList struct {
	first *catalog.InstanceType
	n     int
}

func (s *poolSet) buildPool(idx int) *poolState {
	in := &s.in.Pools[idx]
	p := &poolState{idx: idx, nodeLimit: -1, costLimit: math.Inf(1), fixed: map[string]string{}, typeKeys: s.typeKeysOf(in.InstanceTypes)}
	np := in.NodePool
	if np == nil {
		p.invalid = "nodepool is nil"
		return p
	}
	s.poolTemplate(p, np)
	typeReqs := s.poolRequirements(p, &np.Spec.Template)
	s.poolTypes(p, in.InstanceTypes, typeReqs)
	if p.invalid == "" && len(p.types) == 0 {
		p.invalid = fmt.Sprintf("nodepool %q: no instance type satisfies its requirements and has an available offering", p.name)
	}
	return p
}

// poolTemplate takes the pool's name, weight, fixed labels, taints and limits from its spec.
func (s *poolSet) poolTemplate(p *poolState, np *karpv1.NodePool) {
	p.np, p.name = np, np.Name
	if np.Spec.Weight != nil {
		p.weight = *np.Spec.Weight
	}
	if np.Spec.Replicas != nil {
		p.invalid = fmt.Sprintf("nodepool %q is static (replicas set): it does not provision for pending pods", p.name)
	}
	tmpl := &np.Spec.Template
	for k, v := range tmpl.Labels {
		p.fixed[k] = v
	}
	p.fixed[labelNodePool] = np.Name
	if s.in.Region != "" {
		p.fixed[labelRegion] = s.in.Region
	}
	p.taints, p.preferTaints = splitTaints(tmpl.Spec.Taints)
	s.preferTaints = s.preferTaints || len(p.preferTaints) > 0
	for name, q := range np.Spec.Limits {
		if name == "nodes" {
			p.nodeLimit = q.Value()
			continue
		}
		if r, ok := ResourceIndex(name); ok {
			p.limited[r] = true
			p.limits[r] = quantityValue(r, q)
		}
	}
	if v, ok := np.Annotations[karpoolv1alpha1.AnnotationLimitPerHour]; ok {
		limit, err := karpoolv1alpha1.ParseLimitPerHour(v)
		if err != nil {
			// A limit karpool cannot read launches nothing rather than launch without one.
			p.invalid = fmt.Sprintf("nodepool %q: %v", p.name, err)
		}
		p.costLimit = limit
	}
}

// poolRequirements applies the template's requirements and labels: zone and capacity type
// masks, minValues, custom (pool-defined) keys; it returns the requirements on instance type
// labels.
func (s *poolSet) poolRequirements(p *poolState, tmpl *karpv1.NodeClaimTemplate) []req {
	p.zoneMask = uint32(1)<<uint(len(s.zones)) - 1
	if len(s.zones) == maxZones {
		p.zoneMask = math.MaxUint32
	}
	p.ctMask = 1<<numCT - 1
	var typeReqs []req
	for _, r := range tmpl.Spec.Requirements {
		rq := newReq(r.Key, r.Operator, r.Values)
		if r.MinValues != nil {
			mv := minValue{key: r.Key, min: *r.MinValues}
			if s.in.Options.MinValuesBestEffort {
				p.relaxed = append(p.relaxed, mv)
			} else {
				p.minValues = append(p.minValues, mv)
			}
		}
		switch {
		case r.Key == labelZone:
			p.zoneMask &= s.zoneFilter(&rq)
		case r.Key == labelCapacityType:
			p.ctMask &= ctFilter(&rq)
		case r.Key == labelNodePool || r.Key == labelHostname:
			// Not allowed by the CRD; ignore.
		default:
			if p.otherRequirement(r.Key, rq) {
				typeReqs = append(typeReqs, rq)
			}
		}
	}
	// Template labels constrain like requirements (Karpenter adds `key In [value]` for each): a
	// zone, capacity type or instance type label confines what the pool launches. The others
	// are fixed labels, checked against the requirements above.
	keys := make([]string, 0, len(tmpl.Labels))
	for k := range tmpl.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rq := newReq(k, corev1.NodeSelectorOpIn, []string{tmpl.Labels[k]})
		switch {
		case rq.Key == labelZone:
			p.zoneMask &= s.zoneFilter(&rq)
		case rq.Key == labelCapacityType:
			p.ctMask &= ctFilter(&rq)
		case p.typeKeys[rq.Key] || isTypeKeyCandidate(rq.Key):
			typeReqs = append(typeReqs, rq)
		}
	}
	if p.ctMask&(1<<ctReserved) != 0 && !poolAllowsExplicitly(tmpl.Spec.Requirements, karpv1.CapacityTypeReserved) &&
		tmpl.Labels[labelCapacityType] != karpv1.CapacityTypeReserved {
		// Reserved capacity is only used when asked for explicitly.
		p.ctMask &^= 1 << ctReserved
	}
	return typeReqs
}

// otherRequirement applies a requirement on a key other than zone, capacity type, pool and
// hostname: checked against a fixed label, kept as a custom domain, or (true) left to the
// instance types.
func (p *poolState) otherRequirement(key string, rq req) bool {
	if v, ok := p.fixed[key]; ok {
		if !rq.Matches(v, true) {
			p.invalid = fmt.Sprintf("nodepool %q: template label %s=%s contradicts its requirement %s", p.name, key, v, rq.String())
		}
		return false
	}
	if p.typeKeys[key] || isTypeKeyCandidate(key) {
		return true
	}
	if key == labelRegion {
		return false
	}
	if p.custom == nil {
		p.custom = map[string]*domain{}
	}
	if d, ok := p.custom[key]; ok {
		if !intersect(d, requirements.Of(rq)) {
			p.invalid = fmt.Sprintf("nodepool %q: requirements on %s contradict each other", p.name, key)
		}
	} else {
		p.custom[key] = requirements.Of(rq)
	}
	return false
}

// poolTypes sets the instance types the pool can launch: those meeting typeReqs with an
// available offering it allows and room for a pod beside its daemonsets, cheapest first, then
// by name. They are gathered in a scratch list and copied at their exact count: thousands of
// pools would otherwise each keep a half-empty doubling of the list.
func (s *poolSet) poolTypes(p *poolState, its []catalog.InstanceType, typeReqs []req) {
	daemons := s.daemonsFor(p)
	s.typeScratch = s.typeScratch[:0]
	for i := range its {
		it := &its[i]
		if !requirements.Match(typeReqs, it.Labels) {
			continue
		}
		ti := typeInfo{it: it}
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
			ct := ctIndex(o.CapacityType)
			z, ok := s.zoneIdx[o.Zone]
			if ct < 0 || !ok || p.ctMask&(1<<ct) == 0 || p.zoneMask&(1<<z) == 0 {
				continue
			}
			ti.zoneByCT[ct] |= 1 << z
		}
		if ti.zoneByCT == [numCT]uint32{} {
			continue
		}
		ti.price, ti.worst = ti.priceRange(p.zoneMask, p.ctMask, s.zoneIdx)
		for _, d := range daemons {
			if d.compatibleWith(p, it) {
				addTo(&ti.ds, &d.req, 1)
				ti.dsPortIDs = append(ti.dsPortIDs, d.ports...)
			}
		}
		ti.usable = it.Allocatable
		for r := range ti.usable {
			ti.usable[r] -= ti.ds[r]
		}
		if ti.usable[catalog.Pods] <= 0 || ti.usable[catalog.CPU] < 0 || ti.usable[catalog.Memory] < 0 {
			continue
		}
		s.typeScratch = append(s.typeScratch, ti)
	}
	p.types = slices.Clone(s.typeScratch)
	// Cheapest first, then name: target ranking and final ordering start from here.
	slices.SortStableFunc(p.types, func(a, b typeInfo) int {
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		return strings.Compare(a.it.Name, b.it.Name)
	})
	p.all = newBitset(len(p.types))
	for i := range p.types {
		p.all.set(i)
	}
}

func poolAllowsExplicitly(reqs []karpv1.NodePoolRequirement, ct string) bool {
	for _, r := range reqs {
		if r.Key == labelCapacityType && r.Operator == corev1.NodeSelectorOpIn && slices.Contains(r.Values, ct) {
			return true
		}
	}
	return false
}

// zoneFilter is the zone mask a requirement on the zone label allows.
func (s *poolSet) zoneFilter(r *req) uint32 {
	var m uint32
	for i, z := range s.zones {
		if r.Matches(z, true) {
			m |= 1 << i
		}
	}
	return m
}

func ctFilter(r *req) uint8 {
	var m uint8
	for i, n := range ctNames {
		if r.Matches(n, true) {
			m |= 1 << i
		}
	}
	return m
}

// daemon is a DaemonSet's pod as the engine sees it.
type daemon struct {
	name string
	req  catalog.Resources
	// terms are the OR-ed node selector terms (each already combined with the nodeSelector).
	terms [][]req
	tols  []corev1.Toleration
	ports []int // host ports (interned)
}

// daemonsFor lists the daemonsets that tolerate the pool's taints.
func (s *poolSet) daemonsFor(p *poolState) []*daemon {
	var out []*daemon
	for _, d := range s.allDaemons() {
		if d.toleratesAll(p.taints) {
			out = append(out, d)
		}
	}
	return out
}

// allDaemons are the input's daemonsets, parsed once.
func (s *poolSet) allDaemons() []*daemon {
	if s.daemons == nil {
		for _, ds := range s.in.DaemonSets {
			// A daemonset with ResourceClaims adds nothing to a node's overhead (Karpenter's rule:
			// its claims are not modelled).
			if ds == nil || HasResourceClaims(&ds.Spec.Template.Spec) {
				continue
			}
			pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
			r, _ := PodRequests(pod)
			d := &daemon{name: ds.Namespace + "/" + ds.Name, req: r, tols: ds.Spec.Template.Spec.Tolerations,
				ports: s.ports.intern(hostPortsOf(&ds.Spec.Template.Spec))}
			d.terms = nodeTerms(&ds.Spec.Template.Spec)
			s.daemons = append(s.daemons, d)
		}
		if s.daemons == nil {
			s.daemons = []*daemon{}
		}
	}
	return s.daemons
}

// toleratesAll reports whether the daemonset tolerates every taint.
func (d *daemon) toleratesAll(taints []corev1.Taint) bool {
	for _, t := range taints {
		if !tolerates(d.tols, t.Key, t.Value, t.Effect) {
			return false
		}
	}
	return true
}

// compatibleWith reports whether the daemonset would run on a node of the pool and type: one of
// its node selector terms is satisfiable.
func (d *daemon) compatibleWith(p *poolState, it *catalog.InstanceType) bool {
	for _, term := range d.terms {
		ok := true
		for i := range term {
			r := &term[i]
			switch {
			case r.Key == labelZone || r.Key == labelCapacityType || r.Key == labelHostname || r.Key == labelRegion:
				// Satisfiable by some offering or node: count the daemonset (conservative).
			case p.fixed[r.Key] != "" || hasKey(p.fixed, r.Key):
				ok = r.Matches(p.fixed[r.Key], true)
			case p.custom[r.Key] != nil:
				ok = narrow(p.custom[r.Key].Clone(), r)
			default:
				v, has := it.Labels[r.Key]
				ok = r.Matches(v, has)
			}
			if !ok {
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// nodeTerms returns the pod's node requirements as OR-ed terms, each combined with nodeSelector.
func nodeTerms(spec *corev1.PodSpec) [][]req {
	var base []req
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		base = append(base, newReq(k, corev1.NodeSelectorOpIn, []string{spec.NodeSelector[k]}))
	}
	var terms [][]req
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			term := slices.Clone(base)
			for _, e := range t.MatchExpressions {
				term = append(term, newReq(e.Key, e.Operator, e.Values))
			}
			terms = append(terms, term)
		}
	}
	if len(terms) == 0 {
		terms = [][]req{base}
	}
	return terms
}

// PoolType is an instance type as a pool may launch it.
type PoolType struct {
	// Type has its offerings narrowed to the zones and capacity types the pool allows.
	Type catalog.InstanceType
	// DaemonSetOverhead is what the daemonsets that would run on such a node request.
	DaemonSetOverhead catalog.Resources
	// PricePerHour is the cheapest allowed offering.
	PricePerHour float64
}

// PoolTypes gives the instance types each pool of an input may launch (its requirements
// applied), cheapest first: what the engine itself works with, for callers that compute cost
// bounds or reports. Zones are indexed once; a pool is built when asked for, so a report on the
// few pools of thousands that have pods stays small.
type PoolTypes struct{ s *poolSet }

// NewPoolTypes indexes the input for PoolTypes.Of.
func NewPoolTypes(in *Input) *PoolTypes {
	s := newPoolSet(in, &portTable{})
	s.buildZones()
	return &PoolTypes{s: &s}
}

// Of returns the types of the pool at index i of the input.
func (pt *PoolTypes) Of(i int) []PoolType {
	s := pt.s
	p := s.buildPool(i)
	out := make([]PoolType, 0, len(p.types))
	for j := range p.types {
		t := &p.types[j]
		it := *t.it
		it.Offerings = nil
		for _, o := range t.it.Offerings {
			z, ok := s.zoneIdx[o.Zone]
			ct := ctIndex(o.CapacityType)
			if o.Available && ok && ct >= 0 && t.zoneByCT[ct]&(1<<z) != 0 {
				it.Offerings = append(it.Offerings, o)
			}
		}
		out = append(out, PoolType{Type: it, DaemonSetOverhead: t.ds, PricePerHour: t.price})
	}
	return out
}

// splitTaints sorts a template's or NodeClaim's taints into those that keep pods off
// (NoSchedule, NoExecute) and the PreferNoSchedule ones; other effects are dropped.
func splitTaints(taints []karpv1.Taint) (blocking, prefer []corev1.Taint) {
	for _, t := range taints {
		switch {
		case blockingEffect(t.Effect):
			blocking = append(blocking, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		case t.Effect == corev1.TaintEffectPreferNoSchedule:
			prefer = append(prefer, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	return blocking, prefer
}
