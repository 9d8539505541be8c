package scheduling

import (
	"math"
	"math/bits"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/internal/requirements"
)

// binSet holds the bins: existing nodes and in-flight NodeClaims first, then new NodeClaims.
type binSet struct {
	*poolSet
	reqs *requestCache

	bins         []*bin
	existing     int             // bins[:existing] are existing nodes and in-flight NodeClaims
	existingPods [][]*corev1.Pod // pods bound to each existing bin
	newBins      int

	tree binTree // free room per bin, for first-fit

	// claimBins are the bins of the result's NodeClaims, in order.
	claimBins []*bin
}

// launcher decides how new NodeClaims launch: their target (cheapest fitting) type within the
// pool limits and the other NodeClaims' minValues, and their zone.
type launcher struct {
	*binSet
	topo *topology
	cls  *classSet
}

const (
	binExisting = iota
	binInFlight
	binNew
)

// bin is a node pods can be placed on: an existing node, an in-flight NodeClaim or a new NodeClaim.
type bin struct {
	id   int32
	kind uint8
	name string
	pool int32 // -1: not a pool's node
	// labels of existing nodes and in-flight NodeClaims.
	labels map[string]string
	taints []corev1.Taint
	closed bool // cordoned or otherwise not accepting pods
	// preferTaints are PreferNoSchedule taints (existing nodes and in-flight NodeClaims).
	preferTaints []corev1.Taint
	// zone is the zone index; -1 means undecided (new) or no zone label (existing).
	zone  int32
	alloc catalog.Resources // what pods may use (new: the target type's usable resources)
	used  catalog.Resources
	// New NodeClaims only.
	types    bitset
	allTypes bool
	zoneMask uint32
	ctMask   uint8
	custom   map[string]*domain
	target   int32
	// pods placed by this solve, in binding order (indexes into Input.Pods).
	pods []int32
	// uncounted are free pods placed while the zone was undecided; they are added to zone
	// counters when the zone is settled.
	uncounted []int32
	dead      bool
	// sides record counts made on the assumption that the node launches inside (or outside)
	// a set of types; the target must stay on that side.
	sides []side
	// ports are the host ports the bin's pods use (a new NodeClaim's daemonsets aside: they
	// depend on its type, see typeInfo.dsPorts); portIDs collects them while building.
	ports   bitset
	portIDs []int
}

type side struct {
	elig bitset
	in   bool
}

func (b *bin) sideOK(t int) bool {
	for _, sd := range b.sides {
		if sd.elig.has(t) != sd.in {
			return false
		}
	}
	return true
}

// holds reports whether the NodeClaim already records that side.
func (b *bin) holds(elig bitset, in bool) bool {
	for _, sd := range b.sides {
		if sd.in == in && sd.elig.equal(elig) {
			return true
		}
	}
	return false
}

func (b *bin) room() catalog.Resources {
	var r catalog.Resources
	for i := range r {
		r[i] = b.alloc[i] - b.used[i]
	}
	return r
}

// acceptsSig evaluates a signature against an existing node or in-flight NodeClaim.
func (b *bin) acceptsSig(sig *nodeSig) bool {
	if b.closed {
		return false
	}
	if !requirements.Match(sig.reqs, b.labels) {
		return false
	}
	for _, t := range b.taints {
		if !tolerates(sig.tols, t.Key, t.Value, t.Effect) {
			return false
		}
	}
	if sig.avoid {
		for _, t := range b.preferTaints {
			if !tolerates(sig.tols, t.Key, t.Value, t.Effect) {
				return false
			}
		}
	}
	return true
}

// ephemeralTaints do not keep pods away from a node that is still starting.
var ephemeralTaints = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	karpv1.TaintKeyUnregistered:                      true,
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (s *poolSet) poolIndex(name string) int32 {
	for _, p := range s.pools {
		if p.name == name && name != "" {
			return int32(p.idx)
		}
	}
	return -1
}

// buildExisting turns nodes and in-flight NodeClaims into bins.
func (s *binSet) buildExisting() {
	for i := range s.in.Nodes {
		if n := s.in.Nodes[i].Node; n != nil {
			s.addExisting(n, s.in.Nodes[i].Pods)
		}
	}
	for i := range s.in.NodeClaims {
		if nc := s.in.NodeClaims[i].NodeClaim; nc != nil {
			s.addInFlight(nc, s.in.NodeClaims[i].Pods)
		}
	}
	s.existing = len(s.bins)
	for _, b := range s.bins {
		s.treeUpdate(b)
	}
	for _, p := range s.pools {
		if slack := s.in.Options.CostLimitSlack[p.name]; slack > 0 && p.costLimited() {
			p.costLimit = max(p.costLimit, p.cost+slack)
		}
	}
}

// addExisting adds the bin of an existing node and its bound pods.
func (s *binSet) addExisting(n *corev1.Node, pods []*corev1.Pod) {
	b := &bin{id: int32(len(s.bins)), kind: binExisting, name: n.Name, zone: -1, labels: n.Labels}
	if _, ok := b.labels[labelHostname]; !ok {
		b.labels = copyLabels(n.Labels)
		b.labels[labelHostname] = n.Name
	}
	b.pool = s.poolIndex(n.Labels[labelNodePool])
	if z, ok := s.zoneIdx[n.Labels[labelZone]]; ok {
		b.zone = int32(z)
	}
	b.closed = n.Spec.Unschedulable
	initialized := n.Labels[karpv1.LabelNodeInitialized] == "true"
	var startup []karpv1.Taint
	if b.pool >= 0 && s.pools[b.pool].np != nil {
		startup = s.pools[b.pool].np.Spec.Template.Spec.StartupTaints
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			b.preferTaints = append(b.preferTaints, t)
			s.preferTaints = true
		}
		if !blockingEffect(t.Effect) {
			continue
		}
		if b.pool >= 0 && !initialized && (ephemeralTaints[t.Key] || isStartupTaint(startup, t)) {
			continue
		}
		b.taints = append(b.taints, t)
	}
	b.alloc, _ = ToResources(n.Status.Allocatable)
	s.addBoundPods(b, pods)
	if b.pool >= 0 {
		p := s.pools[b.pool]
		capacity, _ := ToResources(n.Status.Capacity)
		addTo(&p.usage, &capacity, 1)
		p.nodes++
		p.cost += s.launchedCost(p, n.Labels, nil)
	}
	s.bins = append(s.bins, b)
	s.existingPods = append(s.existingPods, pods)
}

// addBoundPods counts the requests and host ports of the pods bound or nominated to b.
func (s *binSet) addBoundPods(b *bin, pods []*corev1.Pod) {
	for _, p := range pods {
		if p == nil || isTerminal(p) {
			continue
		}
		r, _ := s.reqs.podRequests(p)
		addTo(&b.used, &r, 1)
		b.portIDs = append(b.portIDs, s.ports.intern(hostPortsOf(&p.Spec))...)
	}
}

// addInFlight adds the bin of an in-flight NodeClaim and its nominated pods.
func (s *binSet) addInFlight(nc *karpv1.NodeClaim, pods []*corev1.Pod) {
	b := &bin{id: int32(len(s.bins)), kind: binInFlight, name: nc.Name, zone: -1}
	b.labels = inFlightLabels(nc)
	b.pool = s.poolIndex(b.labels[labelNodePool])
	if z, ok := s.zoneIdx[b.labels[labelZone]]; ok {
		b.zone = int32(z)
	}
	b.taints, b.preferTaints = splitTaints(nc.Spec.Taints)
	s.preferTaints = s.preferTaints || len(b.preferTaints) > 0
	var ti *typeInfo
	if b.pool >= 0 {
		p := s.pools[b.pool]
		for j := range p.types {
			if p.types[j].it.Name == b.labels[labelInstanceType] {
				ti = &p.types[j]
				break
			}
		}
	}
	capacity := s.inFlightRoom(b, nc, ti)
	s.addBoundPods(b, pods)
	if b.pool >= 0 {
		p := s.pools[b.pool]
		if capacity == (catalog.Resources{}) && ti != nil {
			capacity = ti.it.Capacity
		}
		addTo(&p.usage, &capacity, 1)
		p.nodes++
		p.cost += s.launchedCost(p, b.labels, ti)
		if ti == nil && b.labels[labelInstanceType] == "" {
			p.cost += s.unlaunchedCost(p, nc)
		}
	}
	s.bins = append(s.bins, b)
	s.existingPods = append(s.existingPods, pods)
}

// launchedCost is what a node, or a NodeClaim whose type is known, counts against its pool's
// cost limit: the price of the offering its labels name (instance type, zone, capacity type,
// reservation), else the dearest offering of its type (ti, or found by its label), else 0 (a
// type the pool no longer offers has no price to count).
func (s *binSet) launchedCost(p *poolState, labels map[string]string, ti *typeInfo) float64 {
	if !p.costLimited() {
		return 0
	}
	if o, ok := catalog.OfferingOf(s.in.Pools[p.idx].InstanceTypes, labels); ok {
		return o.PricePerHour
	}
	for j := range p.types {
		if ti == nil && p.types[j].it.Name == labels[labelInstanceType] {
			ti = &p.types[j]
		}
	}
	if ti == nil {
		return 0
	}
	return ti.worst
}

// unlaunchedCost is what a NodeClaim that may still become any type of its requirement counts
// against its pool's cost limit: the dearest offering among the options the pool knows.
func (s *binSet) unlaunchedCost(p *poolState, nc *karpv1.NodeClaim) float64 {
	if !p.costLimited() {
		return 0
	}
	worst := 0.0
	for _, r := range nc.Spec.Requirements {
		if r.Key != labelInstanceType || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for j := range p.types {
			if slices.Contains(r.Values, p.types[j].it.Name) {
				worst = max(worst, p.types[j].worst)
			}
		}
	}
	return worst
}

// inFlightLabels are the labels an in-flight NodeClaim's node will have: its own, the
// single-valued In requirements, and the hostname (its node's name, else its own).
func inFlightLabels(nc *karpv1.NodeClaim) map[string]string {
	labels := copyLabels(nc.Labels)
	for _, r := range nc.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			if _, ok := labels[r.Key]; !ok {
				labels[r.Key] = r.Values[0]
			}
		}
	}
	if _, ok := labels[labelHostname]; !ok {
		name := nc.Status.NodeName
		if name == "" {
			name = nc.Name
		}
		labels[labelHostname] = name
	}
	return labels
}

// inFlightRoom sets the allocatable of an in-flight NodeClaim's bin (ti: its instance type in
// the pool, if known) and returns its capacity: a launched one's from its status (and the
// daemonsets its labels select are reserved), one with a known type that type's, else the
// room its smallest option leaves (unlaunchedRoom); a NodeClaim of unknown size is closed.
func (s *binSet) inFlightRoom(b *bin, nc *karpv1.NodeClaim, ti *typeInfo) catalog.Resources {
	var capacity catalog.Resources
	switch {
	case len(nc.Status.Allocatable) > 0:
		b.alloc, _ = ToResources(nc.Status.Allocatable)
		capacity, _ = ToResources(nc.Status.Capacity)
		// Its labels are known: the daemonsets that will run on it, exactly (its type may
		// no longer be one the pool allows, so ti may be nil).
		s.reserveDaemons(b)
	case ti != nil:
		b.alloc = ti.usable
		capacity = ti.it.Capacity
		b.portIDs = append(b.portIDs, ti.dsPortIDs...)
	default:
		var ok bool
		if capacity, ok = s.unlaunchedRoom(b, nc); !ok {
			// Unknown size: the NodeClaim counts for topology but takes no new pods.
			b.closed = true
		}
	}
	return capacity
}

// reserveDaemons reserves on an in-flight NodeClaim with known labels the requests and host
// ports of the daemonsets whose node selection its labels satisfy and whose tolerations cover
// its taints.
func (s *binSet) reserveDaemons(b *bin) {
	for _, d := range s.allDaemons() {
		if !d.toleratesAll(b.taints) {
			continue
		}
		for _, term := range d.terms {
			if requirements.Match(term, b.labels) {
				addTo(&b.used, &d.req, 1)
				b.portIDs = append(b.portIDs, d.ports...)
				break
			}
		}
	}
}

// unlaunchedRoom sizes an in-flight NodeClaim that has not launched yet and may still become
// any of the instance types its requirement lists: pods may use what the smallest option
// offers in each resource (whichever type launches has that room), and its daemonsets' host
// ports on any option are taken; it counts against the pool's limits as the largest option
// (returned). Later batches fill it before opening new NodeClaims, as Karpenter's in-flight
// NodeClaims take the pods of the next round. False when some option is not one of the pool's
// types (its size is unknown) or none is listed.
func (s *binSet) unlaunchedRoom(b *bin, nc *karpv1.NodeClaim) (catalog.Resources, bool) {
	var capacity catalog.Resources
	if b.pool < 0 {
		return capacity, false
	}
	options := map[string]bool{}
	for _, r := range nc.Spec.Requirements {
		if r.Key == labelInstanceType && r.Operator == corev1.NodeSelectorOpIn {
			for _, v := range r.Values {
				options[v] = true
			}
		}
	}
	p := s.pools[b.pool]
	known := 0
	for j := range p.types {
		t := &p.types[j]
		if !options[t.it.Name] {
			continue
		}
		delete(options, t.it.Name)
		for r := range capacity {
			capacity[r] = max(capacity[r], t.it.Capacity[r])
			if known == 0 || t.usable[r] < b.alloc[r] {
				b.alloc[r] = t.usable[r]
			}
		}
		b.portIDs = append(b.portIDs, t.dsPortIDs...)
		known++
	}
	// An option the pool cannot launch (any more) has a size we do not know.
	return capacity, known > 0 && len(options) == 0
}

func isStartupTaint(startup []karpv1.Taint, t corev1.Taint) bool {
	for _, st := range startup {
		if st.Key == t.Key && st.Effect == t.Effect && (st.Value == "" || st.Value == t.Value) {
			return true
		}
	}
	return false
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// newBin opens a new NodeClaim of pool p with the compatibility of the first class placed on it.
func (s *binSet) newBin(p *poolState, c *sigCompat, zones uint32, target int) *bin {
	b := &bin{id: int32(len(s.bins)), kind: binNew, pool: int32(p.idx), zone: -1, target: int32(target)}
	b.ctMask = c.ctMask
	b.zoneMask = zones
	if c.all && zones == c.zoneMask {
		b.types, b.allTypes = p.all, true
	} else {
		b.types = c.types.clone()
		if zones != c.zoneMask {
			b.types.each(func(i int) bool {
				if !p.types[i].offers(zones, b.ctMask) {
					b.types.clear(i)
				}
				return true
			})
		}
	}
	if bits.OnesCount32(zones) == 1 {
		b.zone = int32(bits.TrailingZeros32(zones))
	}
	// Labels the pool defines: the NodeClaim takes one of the values its pods allow (the pods'
	// narrowing where they have one).
	if c.custom != nil || p.custom != nil {
		b.custom = make(map[string]*domain, len(p.custom))
		for k, d := range p.custom {
			b.custom[k] = d.Clone()
		}
		for k, d := range c.custom {
			b.custom[k] = d.Clone()
		}
	}
	t := &p.types[target]
	b.alloc = t.usable
	p.commit(t, 1)
	s.bins = append(s.bins, b)
	s.newBins++
	s.treeUpdate(b)
	return b
}

// dropBin discards an empty new NodeClaim.
func (s *binSet) dropBin(b *bin) {
	if b.dead || len(b.pods) > 0 {
		return
	}
	b.dead = true
	s.pools[b.pool].commit(&s.pools[b.pool].types[b.target], -1)
	s.treeUpdate(b)
	if int(b.id) == len(s.bins)-1 {
		s.bins = s.bins[:len(s.bins)-1]
		s.newBins--
	}
}

// bestType is the cheapest type of a new NodeClaim's set that fits its pods and keeps the pool
// within its limits in place of the current target (-1 if none).
func (s *launcher) bestType(b *bin) int {
	p := s.pools[b.pool]
	cur := &p.types[b.target]
	prices := p.prices(s.zoneIdx, b.zoneMask, b.ctMask)
	best, bestPrice := -1, math.Inf(1)
	b.types.each(func(i int) bool {
		t := &p.types[i]
		if prices[i] >= bestPrice || !fits(&b.used, &t.usable) || math.IsInf(prices[i], 1) || !b.sideOK(i) || !s.launchOK(b, i, b.zoneMask, b.ctMask) {
			return true
		}
		if i != int(b.target) && (!p.fitsLimitsSwap(cur, t) || !s.keepsMinValues(p, cur, t, b)) {
			return true
		}
		best, bestPrice = i, prices[i]
		return true
	})
	return best
}

// shrink retargets every new NodeClaim to the cheapest type that fits what it holds (repeating
// while that frees pool limits another NodeClaim can use).
func (s *launcher) shrink() {
	for i := 0; i < 5 && s.shrinkOnce(); i++ {
	}
}

func (s *launcher) shrinkOnce() bool {
	changed := false
	for _, b := range s.bins[s.existing:] {
		if b.dead {
			continue
		}
		if len(b.pods) == 0 {
			s.dropBin(b)
			continue
		}
		if t := s.bestType(b); t >= 0 && t != int(b.target) {
			s.retarget(b, t)
			changed = true
		}
	}
	return changed
}

// retarget changes a new NodeClaim's target instance type.
func (s *launcher) retarget(b *bin, target int) {
	p := s.pools[b.pool]
	p.commit(&p.types[b.target], -1)
	b.target = int32(target)
	t := &p.types[target]
	p.commit(t, 1)
	b.alloc = t.usable
	s.treeUpdate(b)
}

// narrowZone fixes an undecided new NodeClaim's zone and counts the pods that waited for it.
func (s *launcher) narrowZone(b *bin, z int32) {
	if b.zone == z && b.zoneMask == 1<<z {
		return
	}
	b.zoneMask = 1 << z
	p := s.pools[b.pool]
	if b.allTypes {
		b.types, b.allTypes = p.all.clone(), false
	}
	b.types.each(func(i int) bool {
		if !p.types[i].offers(b.zoneMask, b.ctMask) {
			b.types.clear(i)
		}
		return true
	})
	s.launchIn(b, z)
}

// launchIn decides the zone a new NodeClaim launches in and counts the pods that waited for it.
func (s *launcher) launchIn(b *bin, z int32) {
	b.zone = z
	if len(b.uncounted) > 0 {
		for _, pi := range b.uncounted {
			s.topo.countPod(s.cls.podClass[pi], b, 1, true)
		}
		b.uncounted = b.uncounted[:0]
	}
}

// launchWide reports whether a new NodeClaim launches in a decided zone (b.zone) while it lists
// more: its pool's minValues needs types no single zone offers (see launchZone).
func (b *bin) launchWide() bool { return b.zone >= 0 && b.zoneMask != 1<<uint(b.zone) }

// launchOK reports whether type t, as the cheapest option of the NodeClaim narrowed to zones
// and cts, launches it in its decided zone: t's cheapest offering there is in that zone.
func (s *launcher) launchOK(b *bin, t int, zones uint32, cts uint8) bool {
	if b.zone < 0 || zones == 1<<uint(b.zone) {
		return true
	}
	p := s.pools[b.pool]
	return p.prices(s.zoneIdx, 1<<uint(b.zone), cts)[t] == p.prices(s.zoneIdx, zones, cts)[t]
}

// launchZone decides where a new NodeClaim launches whose zone must stay open because no
// single zone keeps its pool's minValues (-1 if no zone will do). It still launches in one
// zone, the zone of its cheapest offering, and pods counted per zone must be counted there when
// they are placed, not when (if ever) the zone is settled: the NodeClaim keeps listing every
// zone, b.zone records the launch zone, and its cheapest option must be a type offered
// cheapest there (launchOK; bestType, floorType and finalizeBin see to it). A zone qualifies
// when, with k more pods of size req, a type that fits launches there and the options priced
// at or above it keep the minValues (minValuesOK); the cheapest such type wins, then the zone
// where the class's counted pods are fewest (c may be nil), then the lowest index.
func (s *launcher) launchZone(b *bin, c *class, req *catalog.Resources, k int) int32 {
	need := b.used
	addTo(&need, req, int64(k))
	best, bestCount, bestPrice := int32(-1), int32(0), 0.0
	for m := b.zoneMask; m != 0; m &= m - 1 {
		z := int32(bits.TrailingZeros32(m))
		b.zone = z
		_, price := s.floorType(b, b.types, b.zoneMask, b.ctMask, &need)
		ok := !math.IsInf(price, 1) && s.minValuesOK(b, b.types, b.zoneMask, b.ctMask, req, k)
		b.zone = -1
		if !ok {
			continue
		}
		var cnt int32
		if c != nil {
			for _, id := range c.countedBy {
				if ctr := s.topo.counters[id]; ctr.kind == keyZone {
					cnt += ctr.zone[z]
				}
			}
		}
		if best < 0 || price < bestPrice || price == bestPrice && cnt < bestCount {
			best, bestCount, bestPrice = z, cnt, price
		}
	}
	return best
}

// minValuesZones are the zones of the mask that keep the pool's minValues satisfied for the
// NodeClaim narrowed to types (the whole mask when the pool has none).
func (s *launcher) minValuesZones(b *bin, types bitset, m uint32, req *catalog.Resources, k int) uint32 {
	p := s.pools[b.pool]
	if len(p.minValues) == 0 {
		return m
	}
	var ok uint32
	for mm := m; mm != 0; mm &= mm - 1 {
		z := bits.TrailingZeros32(mm)
		if s.minValuesOK(b, types, 1<<z, b.ctMask, req, k) {
			ok |= 1 << z
		}
	}
	return ok
}

// zoneFor picks a zone for an undecided new NodeClaim: the allowed zone where the target type is
// cheapest, ties to the lowest index.
func (s *launcher) zoneFor(b *bin, allowed uint32) int32 {
	p := s.pools[b.pool]
	t := &p.types[b.target]
	best, bestPrice := int32(-1), 0.0
	m := b.zoneMask & allowed
	var none catalog.Resources
	if m = s.minValuesZones(b, b.types, m, &none, 0); m == 0 {
		return -1 // no single zone keeps the pool's minValues: leave the zone open
	}
	for m != 0 {
		z := int32(bits.TrailingZeros32(m))
		m &= m - 1
		if !t.offers(1<<z, b.ctMask) {
			continue
		}
		price := t.priceIn(1<<z, b.ctMask, s.zoneIdx)
		if best < 0 || price < bestPrice {
			best, bestPrice = z, price
		}
	}
	return best
}
