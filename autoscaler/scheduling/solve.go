package scheduling

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// solver is one solve: the input, each pod's placement, and the parts that hold the rest of
// the state, each a type with a small surface (the way Karpenter's scheduler splits into its
// Scheduler, NodeClaims, ExistingNodes, Topology and Queue):
//   - poolSet (pools.go, sigs.go, labels.go): pools with their instance types and offerings,
//     zones, daemonsets, node signatures and their compatibility with each pool, label
//     choices. It sees only the input and the host port table.
//   - binSet (bins.go, bintree.go): the bins — existing nodes, in-flight NodeClaims, new
//     NodeClaims — and the first-fit tree of their room. It sees the poolSet.
//   - launcher (bins.go, place.go): the target type and zone of new NodeClaims within pool
//     limits and minValues. It sees the binSet, the topology and the classes.
//   - topology (topology.go): spread and pod (anti-)affinity counters per domain. It sees the
//     launcher and the classes.
//   - classSet (classes.go): pod equivalence classes and their relaxation variants. It sees
//     the poolSet and the topology.
//   - requestCache (resources.go): pod requests per resource specification; portRules
//     (ports.go): host ports; volumeIndex (volumes.go): volume topology.
//   - the steps, which embed the solver: placer (place.go) places classes in batches, packer
//     (pack.go, split.go) packs free classes for cost, folder (fold.go) and repacker
//     (repack.go) improve the plan. The solver itself runs the rounds and writes the Result
//     (solve.go).
type solver struct {
	in *Input

	poolSet
	binSet
	launcher
	classSet
	topology
	portRules
	requestCache
	placer
	packer
	folder
	repacker

	// podBin and podSeq are each pod's bin and placement sequence number (-1: not placed).
	podBin []int32
	podSeq []int32
	seq    int32
}

// newSolver wires a solver and its parts.
func newSolver(in *Input, split bool) *solver {
	s := &solver{in: in}
	s.poolSet = newPoolSet(in, &s.portTab)
	s.binSet = binSet{poolSet: &s.poolSet, reqs: &s.requestCache}
	s.launcher = launcher{binSet: &s.binSet, topo: &s.topology, cls: &s.classSet}
	s.classSet = classSet{poolSet: &s.poolSet, topo: &s.topology, reqs: &s.requestCache}
	s.topology = topology{launcher: &s.launcher, cls: &s.classSet, counterIdx: map[string]int32{}, labelSetMatch: map[string][]int32{}}
	s.placer = placer{s}
	s.packer = packer{solver: s, split: split}
	s.folder = folder{s}
	s.repacker = repacker{s}
	return s
}

// Solve computes a scheduling plan. It does no I/O and is deterministic.
//
// Neither packing of free pods wins everywhere: splitting them among instance families by
// memory:cpu ratio (splitByRatio) is far ahead when the cheapest cpu and the cheapest memory
// come from families the pods' own ratios cannot combine, and can be slightly behind the
// general packer when the LP's prices are realizable as they are. In that second case the plan
// without the split is computed too, and the better one is kept: fewer unschedulable pods,
// then the lower price. Its most wasteful NodeClaims are then solved again (repack), and
// capacity reservations are handed out (reserve).
func Solve(in *Input) *Result {
	res, s := solveBest(in)
	return reserve(in, s.repack(res))
}

// solveBest is Solve without the final re-packing (see repack).
func solveBest(in *Input) (*Result, *solver) {
	res, s := solve(in, true)
	if !s.splitUsed || !s.splitDoubt {
		return res, s
	}
	alt, as := solve(in, false)
	if len(alt.Unschedulable) < len(res.Unschedulable) ||
		len(alt.Unschedulable) == len(res.Unschedulable) && alt.TotalPricePerHour() < res.TotalPricePerHour() {
		return alt, as
	}
	return res, s
}

func solve(in *Input, split bool) (*Result, *solver) {
	s := newSolver(in, split)
	s.podBin = make([]int32, len(in.Pods))
	s.podSeq = make([]int32, len(in.Pods))
	for i := range s.podBin {
		s.podBin[i] = -1
	}
	s.buildPools()
	s.buildExisting()
	s.buildClasses()
	s.preparePorts(s.classes, s.bins, s.pools)
	s.prepareTopology()

	// Constrained classes first: highest priority, then the targets of pod affinity, then the
	// largest; free classes are packed afterwards, for cost.
	var constrained, free []*class
	for _, c := range s.classes {
		c.size = classSize(&c.req)
		if c.free {
			free = append(free, c)
		} else {
			constrained = append(constrained, c)
		}
	}
	sort.SliceStable(constrained, func(i, j int) bool {
		a, b := constrained[i], constrained[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if a.affTarget != b.affTarget {
			return a.affTarget
		}
		return largerFirst(a, b)
	})
	for _, c := range constrained {
		s.placeClass(c)
	}
	// Shrink the NodeClaims opened so far to what they hold: the room left on their cheapest
	// fitting type is free for the pods that follow.
	s.shrink()
	s.packFree(free)

	// Shrink every new NodeClaim to the cheapest type that fits it, then give the pods that
	// found no room another chance (the smaller nodes free pool limits, and a cheaper type may
	// have room where the target had none).
	all := append(constrained, free...)
	s.retryRounds(all, 4)
	s.retryRounds(all, 8)
	// Folding frees room under the pool limits and grows NodeClaims: pods left over may fit now.
	if s.fold() {
		s.retryRounds(all, 4)
	}
	return s.result(), s
}

// retryRounds shrinks the new NodeClaims and retries the classes with pods left, while that
// makes progress; it always ends with the NodeClaims shrunk.
func (s *solver) retryRounds(all []*class, rounds int) {
	for round := 0; ; round++ {
		s.shrink()
		if round == rounds {
			return
		}
		retry := false
		for _, c := range all {
			if c.remaining() > 0 && c.blocked == "" {
				retry = true
			}
		}
		if !retry {
			return
		}
		s.settleZones()
		progress := false
		for _, c := range all {
			if c.remaining() > 0 && c.blocked == "" {
				before := c.placed
				c.v = 0
				s.placeClass(c)
				progress = progress || c.placed > before
			}
		}
		if !progress {
			return
		}
	}
}

func classSize(r *catalog.Resources) float64 {
	return float64(r[catalog.CPU])/1000 + float64(r[catalog.Memory])/(4<<30) +
		float64(r[catalog.NvidiaGPU]+r[catalog.AMDGPU]+r[catalog.Neuron]+r[catalog.HabanaGaudi])*8
}

// largerFirst orders classes by cpu, then memory, then the rest, then id.
func largerFirst(a, b *class) bool {
	if a.req[catalog.CPU] != b.req[catalog.CPU] {
		return a.req[catalog.CPU] > b.req[catalog.CPU]
	}
	if a.req[catalog.Memory] != b.req[catalog.Memory] {
		return a.req[catalog.Memory] > b.req[catalog.Memory]
	}
	for r := range a.req {
		if a.req[r] != b.req[r] {
			return a.req[r] > b.req[r]
		}
	}
	return a.id < b.id
}

// settleZones decides the zone of every new NodeClaim holding pods that are counted per zone
// but were placed while the zone was open.
func (s *launcher) settleZones() {
	for _, b := range s.bins[s.existing:] {
		if b.dead || len(b.uncounted) == 0 || b.zone >= 0 {
			continue
		}
		var none catalog.Resources
		if z := s.zoneFor(b, b.zoneMask); z >= 0 {
			s.narrowZone(b, z)
		} else if z := s.launchZone(b, nil, &none, 0); z >= 0 {
			s.launchIn(b, z)
		}
	}
}

// result assembles the Result.
func (s *solver) result() *Result {
	res := &Result{}
	maxTypes := s.in.Options.MaxInstanceTypes
	if maxTypes <= 0 {
		maxTypes = 60
	}
	claimOf := make([]int, len(s.bins))
	perPool := map[string]int{}
	for i := range claimOf {
		claimOf[i] = -1
	}
	defer s.keepCosts()()
	for _, b := range s.bins[s.existing:] {
		if b.dead || len(b.pods) == 0 {
			continue
		}
		p := s.pools[b.pool]
		perPool[p.name]++
		nc := s.finalizeBin(b, maxTypes)
		nc.Name = fmt.Sprintf("%s-%05d", p.name, perPool[p.name])
		nc.Labels[labelHostname] = nc.Name
		claimOf[b.id] = len(res.NodeClaims)
		res.NodeClaims = append(res.NodeClaims, nc)
		s.claimBins = append(s.claimBins, b)
	}
	// Bindings in placement order (sequence numbers are unique; unbound ones are dropped).
	bySeq := make([]int32, s.seq)
	for i := range bySeq {
		bySeq[i] = -1
	}
	for i, b := range s.podBin {
		if b >= 0 {
			bySeq[s.podSeq[i]] = int32(i)
		}
	}
	order := bySeq[:0]
	for _, pi := range bySeq {
		if pi >= 0 {
			order = append(order, pi)
		}
	}
	res.Bindings = make([]Binding, len(order))
	for i, pi := range order {
		b := s.bins[s.podBin[pi]]
		bd := Binding{Pod: s.in.Pods[pi], NodeClaim: claimOf[b.id], Node: b.name}
		if bd.NodeClaim >= 0 {
			nc := &res.NodeClaims[bd.NodeClaim]
			bd.Node = nc.Name
			nc.Pods = append(nc.Pods, s.in.Pods[pi])
		}
		res.Bindings[i] = bd
	}
	for _, c := range s.classes {
		reason := c.reason
		if reason == "" {
			reason = "no node can take the pod"
		}
		for _, pi := range c.pods[c.placed:] {
			res.Unschedulable = append(res.Unschedulable, Unschedulable{Pod: s.in.Pods[pi], Reason: reason})
		}
	}
	sort.SliceStable(res.Unschedulable, func(i, j int) bool {
		a, b := res.Unschedulable[i].Pod, res.Unschedulable[j].Pod
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return res
}

// finalizeBin turns a new bin into a NodeClaim: every allowed instance type that fits, cheapest
// first; in a pool with limits only types that keep the pool within them.
func (s *solver) finalizeBin(b *bin, maxTypes int) NodeClaim {
	p := s.pools[b.pool]
	nc := NodeClaim{Pool: p.name, PodRequests: b.used}
	opts := s.claimOptions(b, p, maxTypes)
	if p.costLimited() {
		// The NodeClaim counted as its target; it may launch as any option, so it counts as
		// the dearest from here on, and the next NodeClaims list options within what is left.
		worst := 0.0
		for _, o := range opts {
			worst = max(worst, p.types[o.t].worst)
		}
		p.cost += worst - p.types[b.target].worst
	}
	names := s.claimInstanceTypes(&nc, b, p, opts)
	nc.Taints = p.np.Spec.Template.Spec.Taints
	nc.StartupTaints = p.np.Spec.Template.Spec.StartupTaints
	keys := s.claimLabels(&nc, b, p, opts)
	claimRequirements(&nc, b, p, opts, names, keys)
	return nc
}

// keepCosts saves every pool's cost and returns the function that restores it: finalizeBin
// raises them while the NodeClaims are listed.
func (s *solver) keepCosts() func() {
	costs := make([]float64, len(s.pools))
	for i, p := range s.pools {
		costs[i] = p.cost
	}
	return func() {
		for i, p := range s.pools {
			p.cost = costs[i]
		}
	}
}

// claimOptions are the bin's instance type options, cheapest first, the target first among
// equal prices.
func (s *solver) claimOptions(b *bin, p *poolState, maxTypes int) []opt {
	prices, order := p.sorted(s.zoneIdx, b.zoneMask, b.ctMask)
	opts := fittingOptions(b, p, prices, order, maxTypes)
	if len(b.sides) > 0 || b.launchWide() {
		opts = s.keepCounted(b, p, opts, prices)
	}
	sort.SliceStable(opts, func(i, j int) bool {
		if opts[i].price != opts[j].price {
			return opts[i].price < opts[j].price
		}
		if (opts[i].t == int(b.target)) != (opts[j].t == int(b.target)) {
			return opts[i].t == int(b.target)
		}
		return p.types[opts[i].t].it.Name < p.types[opts[j].t].it.Name
	})
	return opts
}

// fittingOptions are the types of the bin that fit its pods and are offered, the target first,
// then by price (order), at most maxTypes; in a pool with limits only those within the limits
// the others leave.
func fittingOptions(b *bin, p *poolState, prices []float64, order []int, maxTypes int) []opt {
	limited := p.costLimited()
	allowedCost := p.costLimit - (p.cost - p.types[b.target].worst)
	var allowed catalog.Resources
	for r := range p.limited {
		if p.limited[r] {
			limited = true
			allowed[r] = p.limits[r] - (p.usage[r] - p.types[b.target].it.Capacity[r])
		}
	}
	var opts []opt
	// The target (the cheapest type that fits, see shrink) leads among equal prices.
	if t := int(b.target); b.types.has(t) && fits(&b.used, &p.types[t].usable) && !math.IsInf(prices[t], 1) {
		opts = append(opts, opt{t, prices[t]})
	}
	for _, i := range order {
		if len(opts) == maxTypes {
			break
		}
		t := &p.types[i]
		if i == int(b.target) || !b.types.has(i) || math.IsInf(prices[i], 1) || !fits(&b.used, &t.usable) {
			continue
		}
		if limited {
			// Within the limits the others leave, and not cheaper than the target: that is the
			// cheapest type bestType found within the limits and the other NodeClaims'
			// minValues, and the NodeClaim counts against the limits as its cheapest option.
			ok := prices[i] >= prices[b.target] && t.worst <= allowedCost+1e-6
			for r := range p.limited {
				if p.limited[r] && t.it.Capacity[r] > allowed[r] {
					ok = false
				}
			}
			if !ok {
				continue
			}
		}
		opts = append(opts, opt{i, prices[i]})
	}
	return opts
}

// keepCounted drops the options cheaper than the target that leave the side the pods were
// counted on (bin.sides) or the zone they were counted in (launchOK), unless that breaks
// minValues. Placements keep enough options at or above the target's price for minValues
// (minValuesOK), so this is a last resort that prefers minValues.
func (s *solver) keepCounted(b *bin, p *poolState, opts []opt, prices []float64) []opt {
	kept := make([]opt, 0, len(opts))
	for _, o := range opts {
		if o.price >= prices[b.target] || b.sideOK(o.t) && s.launchOK(b, o.t, b.zoneMask, b.ctMask) {
			kept = append(kept, o)
		}
	}
	for _, mv := range p.minValues {
		if distinctValues(p, kept, mv.key) < mv.min {
			return opts
		}
	}
	return kept
}

// claimInstanceTypes fills the NodeClaim's instance types with their offerings, zones and
// capacity types; it returns the types' names.
func (s *solver) claimInstanceTypes(nc *NodeClaim, b *bin, p *poolState, opts []opt) []string {
	var zones uint32
	var cts uint8
	names := make([]string, 0, len(opts))
	nc.InstanceTypes = make([]InstanceTypeOption, 0, len(opts))
	for _, o := range opts {
		t := &p.types[o.t]
		offs, z, ct := p.offerings(s.zoneIdx, o.t, b.zoneMask, b.ctMask)
		zones |= z
		cts |= ct
		nc.InstanceTypes = append(nc.InstanceTypes, InstanceTypeOption{Type: t.it, PricePerHour: o.price, Offerings: offs})
		names = append(names, t.it.Name)
	}
	for m := zones; m != 0; m &= m - 1 {
		nc.Zones = append(nc.Zones, s.zones[bits.TrailingZeros32(m)])
	}
	for ct := 0; ct < numCT; ct++ {
		if cts&(1<<ct) != 0 {
			nc.CapacityTypes = append(nc.CapacityTypes, ctNames[ct])
		}
	}
	sort.Strings(nc.CapacityTypes)
	return names
}

// claimLabels sets the labels of the node as the cheapest option: the pool's fixed labels, the
// type's, zone and capacity type (a template per pool, type and offering, copied), then
// pool-defined labels the bin decided. It returns those pool-defined keys, sorted.
func (s *solver) claimLabels(nc *NodeClaim, b *bin, p *poolState, opts []opt) []string {
	if len(opts) > 0 {
		t := &p.types[opts[0].t]
		nc.DaemonSetRequests = t.ds
		tmpl := s.labelTemplate(nc, b, p, opts[0].t)
		nc.Labels = make(map[string]string, len(tmpl)+len(b.custom)+1)
		for k, v := range tmpl {
			nc.Labels[k] = v
		}
	} else {
		nc.Labels = map[string]string{}
		for k, v := range p.fixed {
			nc.Labels[k] = v
		}
	}
	keys := make([]string, 0, len(b.custom))
	for k := range b.custom {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if vals := finiteOf(b.custom[k]); len(vals) > 0 {
			nc.Labels[k] = vals[0]
		}
	}
	return keys
}

// labelTemplate is the labels of type t of the pool in the zone and capacity type of the
// NodeClaim's cheapest offering (shared: copy before changing).
func (s *solver) labelTemplate(nc *NodeClaim, b *bin, p *poolState, ti int) map[string]string {
	t := &p.types[ti]
	of := nc.InstanceTypes[0].Offerings[0]
	zone := of.Zone
	if b.zone >= 0 {
		zone = s.zones[b.zone]
		// A NodeClaim listing more zones than the one it launches in (launchZone): its
		// cheapest offering there.
		for _, o := range nc.InstanceTypes[0].Offerings {
			if o.Zone == zone && o.PricePerHour == nc.InstanceTypes[0].PricePerHour {
				of = o
				break
			}
		}
	}
	key := labelsKey{pool: p.idx, t: ti, zone: zone, ct: of.CapacityType}
	tmpl, ok := s.labelTemplates[key]
	if !ok {
		tmpl = make(map[string]string, len(p.fixed)+len(t.it.Labels)+2)
		for k, v := range p.fixed {
			tmpl[k] = v
		}
		for k, v := range t.it.Labels {
			tmpl[k] = v
		}
		tmpl[labelZone] = zone
		tmpl[labelCapacityType] = of.CapacityType
		if s.labelTemplates == nil {
			s.labelTemplates = map[labelsKey]map[string]string{}
		}
		s.labelTemplates[key] = tmpl
	}
	return tmpl
}

// claimRequirements sets the NodeClaim's requirements: pool, instance types, zones, capacity
// types, the pool-defined labels the bin decided (keys), and the values of each minValues key
// among the options. A relaxed minValues (best effort) is lowered to the values the options
// have, and the NodeClaim says so.
func claimRequirements(nc *NodeClaim, b *bin, p *poolState, opts []opt, names, keys []string) {
	all := append(slices.Clip(p.minValues), p.relaxed...)
	minOf := func(key string) *int {
		for _, mv := range all {
			if mv.key == key {
				v := mv.min
				if slices.ContainsFunc(p.relaxed, func(r minValue) bool { return r.key == key }) {
					if n := distinctValues(p, opts, key); n < v {
						v, nc.MinValuesRelaxed = n, true
					}
				}
				return &v
			}
		}
		return nil
	}
	add := func(key string, op corev1.NodeSelectorOperator, vals []string) {
		nc.Requirements = append(nc.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals, MinValues: minOf(key)})
	}
	add(labelNodePool, corev1.NodeSelectorOpIn, []string{p.name})
	add(labelInstanceType, corev1.NodeSelectorOpIn, names)
	add(labelZone, corev1.NodeSelectorOpIn, slices.Clone(nc.Zones))
	add(labelCapacityType, corev1.NodeSelectorOpIn, slices.Clone(nc.CapacityTypes))
	for _, k := range keys {
		for _, r := range b.custom[k].Requirements(k) {
			add(r.Key, r.Operator, r.Values)
		}
	}
	for _, mv := range all {
		if mv.key == labelInstanceType || hasKey(b.customKeys(), mv.key) {
			continue
		}
		seen := map[string]bool{}
		var vals []string
		for _, o := range opts {
			if v, ok := p.types[o.t].it.Labels[mv.key]; ok && !seen[v] {
				seen[v] = true
				vals = append(vals, v)
			}
		}
		sort.Strings(vals)
		add(mv.key, corev1.NodeSelectorOpIn, vals)
	}
}

type labelsKey struct {
	pool, t  int
	zone, ct string
}

type opt struct {
	t     int
	price float64
}

// distinctValues counts the values the options' types have for the label key.
func distinctValues(p *poolState, opts []opt, key string) int {
	seen := map[string]bool{}
	for _, o := range opts {
		if v, ok := p.types[o.t].it.Labels[key]; ok {
			seen[v] = true
		}
	}
	return len(seen)
}

func (b *bin) customKeys() map[string]string {
	out := map[string]string{}
	for k := range b.custom {
		out[k] = ""
	}
	return out
}

// binPrice is the price of the cheapest instance type the bin's pods fit in (and its index).
func (s *poolSet) binPrice(b *bin) (float64, int) {
	p := s.pools[b.pool]
	best, bi := math.Inf(1), -1
	b.types.each(func(i int) bool {
		t := &p.types[i]
		if fits(&b.used, &t.usable) && t.offers(b.zoneMask, b.ctMask) {
			pr := t.price
			if b.zone >= 0 || b.zoneMask != p.zoneMask || b.ctMask != p.ctMask {
				pr = t.priceIn(b.zoneMask, b.ctMask, s.zoneIdx)
			}
			if pr < best {
				best, bi = pr, i
			}
		}
		return true
	})
	return best, bi
}
