package scheduling

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/lp"
)

// packer packs the free classes for cost.
type packer struct {
	*solver
	// split enables splitByRatio; splitUsed records that it placed pods, splitDoubt that it
	// did so where the general packer may do better.
	split, splitUsed, splitDoubt bool

	fillBuf []fillItem // scratch for fill
	// scratch for computeDuals
	lpCols  [][]float64
	lpCosts []float64
	lpFlat  []float64
}

// ensureRank computes, once per pool, the LP dual prices of the pool's pending demand and ranks
// its instance types as targets for new NodeClaims: most efficient first (in 2 % steps), then
// cheapest, so that a new node is as small as it can be without wasting money on overhead.
func (s *packer) ensureRank(p *poolState) {
	if p.rank != nil {
		return
	}
	var demand catalog.Resources
	for _, c := range s.classes {
		if s.compatWith(c.variants[0].sig, p).ok {
			addTo(&demand, &c.req, int64(len(c.pods)))
		}
	}
	s.computeDuals(p, &demand, p.all)
	for i := range p.types {
		p.types[i].eff = p.efficiency(&p.types[i])
	}
	p.rank = make([]int, len(p.types))
	for i := range p.rank {
		p.rank[i] = i
	}
	sort.SliceStable(p.rank, func(a, b int) bool {
		ta, tb := &p.types[p.rank[a]], &p.types[p.rank[b]]
		ea, eb := math.Floor(ta.eff*50), math.Floor(tb.eff*50)
		if ea != eb {
			return ea > eb
		}
		return p.rank[a] < p.rank[b] // types are sorted by price
	})
	// When pods that must sit on separate nodes force at least F nodes, size the nodes to share
	// the pool's demand among them rather than fill a few and leave the rest nearly empty: the
	// cheapest efficient types holding demand/F go first.
	if f := s.forcedNodes(p); f > 1 {
		best := 0.0
		for i := range p.types {
			best = max(best, p.types[i].eff)
		}
		var hint catalog.Resources
		for r := range hint {
			hint[r] = demand[r] / int64(f)
		}
		hint[catalog.Pods] = 0
		var first []int
		for i := range p.types {
			if p.types[i].eff >= 0.9*best && fits(&hint, &p.types[i].usable) {
				first = append(first, i)
			}
		}
		if len(first) > 0 {
			rest := make([]int, 0, len(p.rank))
			in := map[int]bool{}
			for _, t := range first {
				in[t] = true
			}
			for _, t := range p.rank {
				if !in[t] {
					rest = append(rest, t)
				}
			}
			p.rank = append(first, rest...)
		}
	}
}

// forcedNodes is the largest number of the pool's pending pods that must each get a node of
// their own (self-selecting required anti-affinity, or hostname spread with maxSkew 1, on
// hostname; or the same host port).
func (s *packer) forcedNodes(p *poolState) int {
	count := map[int32]int{}
	ports := map[int]int{} // pods per host port
	best := 0
	for _, c := range s.classes {
		if !s.compatWith(c.variants[0].sig, p).ok {
			continue
		}
		v := c.variants[0]
		for _, a := range v.antis {
			if s.counters[a.ctr].kind == keyHost && a.self {
				count[a.ctr] += len(c.pods)
				best = max(best, count[a.ctr])
			}
		}
		for _, sp := range v.spreads {
			if s.counters[sp.ctr].kind == keyHost && sp.self && sp.maxSkew == 1 {
				count[sp.ctr] += len(c.pods)
				best = max(best, count[sp.ctr])
			}
		}
		for _, id := range c.ports {
			ports[id] += len(c.pods)
			best = max(best, ports[id])
		}
	}
	return best
}

func (p *poolState) efficiency(t *typeInfo) float64 {
	if t.price <= 0 {
		return 0
	}
	v := 0.0
	for r := range p.duals {
		v += p.duals[r] * float64(t.usable[r])
	}
	return v / t.price
}

// computeDuals solves the covering LP of a demand over the allowed types and stores the dual
// prices in p.duals. Resources no allowed type offers are left out.
func (s *packer) computeDuals(p *poolState, demand *catalog.Resources, allowed bitset) bool {
	var rows []catalog.Resource
	for r := catalog.Resource(0); r < catalog.NumResources; r++ {
		if demand[r] <= 0 {
			continue
		}
		supplied := false
		allowed.each(func(i int) bool {
			if p.types[i].usable[r] > 0 {
				supplied = true
				return false
			}
			return true
		})
		if supplied {
			rows = append(rows, r)
		}
	}
	p.duals = [catalog.NumResources]float64{}
	if len(rows) == 0 {
		return false
	}
	// Reuse the column buffers between calls (packGroup re-prices often).
	cols, costs := s.lpCols[:0], s.lpCosts[:0]
	flat := s.lpFlat[:0]
	allowed.each(func(i int) bool {
		t := &p.types[i]
		for _, r := range rows {
			flat = append(flat, float64(max(0, t.usable[r])))
		}
		costs = append(costs, t.price)
		return true
	})
	for k := 0; k < len(costs); k++ {
		cols = append(cols, flat[k*len(rows):(k+1)*len(rows)])
	}
	s.lpCols, s.lpCosts, s.lpFlat = cols, costs, flat
	b := make([]float64, len(rows))
	for k, r := range rows {
		b[k] = float64(demand[r])
	}
	_, y, _, ok := lp.Cover(cols, costs, b)
	for k, r := range rows {
		p.duals[r] = y[k]
	}
	return ok
}

// packFree places the classes without topology constraints: first on existing capacity and in
// the room left on new NodeClaims (free), then on new NodeClaims chosen for cost (packGroup).
func (s *packer) packFree(free []*class) {
	sort.SliceStable(free, func(i, j int) bool {
		a, b := free[i], free[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return largerFirst(a, b)
	})
	// Existing capacity and room on NodeClaims already open cost nothing.
	var rest []*class
	for _, c := range free {
		if c.blocked != "" {
			c.reason = c.blocked
			continue
		}
		c.v = s.freeVariant(c)
		s.resetCursors(c)
		s.fillOpen(c)
		if c.remaining() > 0 {
			rest = append(rest, c)
		}
	}
	// Group the rest by pool and node requirements; most restrictive groups first, so that the
	// less restrictive ones can fill the room they leave.
	type group struct {
		p       *poolState
		cp      *sigCompat
		classes []*class
		n       int
	}
	var groups []*group
	index := map[string]*group{}
	var fallback []*class
	for _, c := range rest {
		v := c.variants[c.v]
		p := s.poolFor(c, v)
		if p == nil {
			fallback = append(fallback, c)
			continue
		}
		cp := s.compatWith(v.sig, p)
		key := fmt.Sprintf("%d/%x/%d/%d/%p", p.idx, []uint64(cp.types), cp.zoneMask, cp.ctMask, cp.custom)
		if cp.custom == nil {
			key = fmt.Sprintf("%d/%x/%d/%d", p.idx, []uint64(cp.types), cp.zoneMask, cp.ctMask)
		}
		g := index[key]
		if g == nil {
			g = &group{p: p, cp: cp, n: cp.types.count()}
			index[key] = g
			groups = append(groups, g)
		}
		g.classes = append(g.classes, c)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].n < groups[j].n })
	for gi, g := range groups {
		if gi > 0 {
			for _, c := range g.classes {
				s.fillOpen(c)
			}
		}
		s.packGroup(g.p, g.cp, g.classes)
		for _, c := range g.classes {
			if c.remaining() > 0 {
				fallback = append(fallback, c)
			}
		}
	}
	// Whatever is left (limits reached, or no pool fits) goes through the general path, which
	// tries every pool in weight order and every relaxation.
	for _, c := range fallback {
		s.placeClass(c)
	}
}

// freeVariant is the first relaxation level some pool or node can serve.
func (s *packer) freeVariant(c *class) int {
	for i, v := range c.variants {
		if s.anyPool(v.sig) {
			return i
		}
		for _, b := range s.bins[:s.existing] {
			if s.sigOnBin(v.sig, b) {
				return i
			}
		}
	}
	return 0
}

// fillOpen places pods of the class on existing nodes and open NodeClaims with room.
func (s *packer) fillOpen(c *class) {
	v := c.variants[c.v]
	for c.remaining() > 0 {
		b, k := s.findBin(c, v, -1)
		if b == nil {
			return
		}
		s.place(c, v, b, -1, k)
	}
}

// poolFor picks the pool new NodeClaims for a free class come from: the highest weight that can
// take a pod (within limits), the cheapest per pod among equal weights.
func (s *packer) poolFor(c *class, v *variant) *poolState {
	for i := 0; i < len(s.poolOrder); {
		j := i
		var best *poolState
		bestScore := math.Inf(1)
		for ; j < len(s.poolOrder) && s.poolOrder[j].weight == s.poolOrder[i].weight; j++ {
			p := s.poolOrder[j]
			cp := s.compatWith(v.sig, p)
			if !cp.ok {
				continue
			}
			t, _ := s.pickTarget(p, cp, cp.zoneMask, c)
			if t < 0 {
				continue
			}
			ti := &p.types[t]
			score := ti.price / float64(max(1, fitCount(&c.req, &ti.usable, c.remaining())))
			if score < bestScore {
				best, bestScore = p, score
			}
		}
		if best != nil {
			return best
		}
		i = j
	}
	return nil
}

// packItem is a class in the cost packer.
type packItem struct {
	c   *class
	rem int
	val float64
}

// packGroup opens new NodeClaims for free classes that share a pool and node requirements:
// first each instance family's share of the pods by memory:cpu ratio (splitByRatio), then the
// rest over every allowed type (packItems).
func (s *packer) packGroup(p *poolState, cp *sigCompat, classes []*class) {
	items := make([]*packItem, 0, len(classes))
	for _, c := range classes {
		if c.remaining() > 0 {
			items = append(items, &packItem{c: c, rem: c.remaining()})
		}
	}
	allowed := cp.types
	if cp.all {
		allowed = p.all
	}
	prices := p.prices(s.zoneIdx, cp.zoneMask, cp.ctMask)
	for round := 0; round < splitRounds && s.splitByRatio(p, cp, items, allowed, prices); round++ {
	}
	k := 0
	for _, it := range items {
		if it.rem > 0 {
			items[k] = it
			k++
		}
	}
	s.packItems(p, cp, items[:k], allowed, prices, 0)
}

// packItems opens new NodeClaims of the allowed types for the items. Repeatedly: price the
// remaining demand with the LP duals, try a few of the most efficient instance types, fill each
// greedily (dot product of pod size and room left), keep the type whose fill carries the most
// demand per dollar, and open as many NodeClaims with that fill as the remaining pods allow.
// It lowers each item's rem by what it placed.
func (s *packer) packItems(p *poolState, cp *sigCompat, items []*packItem, allowed bitset, prices []float64, minScore float64) {
	items = slices.Clone(items)
	var duals [catalog.NumResources]float64
	var priced catalog.Resources // the demand the duals were computed for
	pattern := make([]int, len(items))
	best := make([]int, len(items))
	for guard := 0; len(items) > 0 && guard < 100000; guard++ {
		var demand catalog.Resources
		largest := items[0]
		for _, it := range items {
			addTo(&demand, &it.c.req, int64(it.rem))
			if it.c.size > largest.c.size {
				largest = it
			}
		}
		// Re-price when the remaining demand moved by more than 5 % in some resource.
		moved := guard == 0
		for r := range demand {
			if float64(priced[r]-demand[r]) > 0.05*float64(priced[r]) {
				moved = true
			}
		}
		if moved {
			s.groupDuals(p, &demand, allowed, &duals)
			priced = demand
		}
		for _, it := range items {
			it.val = 0
			for r := range duals {
				it.val += duals[r] * float64(it.c.req[r])
			}
		}
		cands := s.candidates(p, allowed, prices, &duals, &largest.c.req, cp)
		bestT, bestScore, bestPrice := -1, 0.0, 0.0
		for _, t := range cands {
			value := s.fill(&p.types[t], items, pattern)
			if value <= 0 {
				continue
			}
			// Equal scores go to the larger node: fewer nodes for the same money.
			score := value / prices[t]
			if bestT < 0 || score > bestScore*(1+1e-9) || (score >= bestScore*(1-1e-9) && prices[t] > bestPrice) {
				bestT, bestScore, bestPrice = t, score, prices[t]
				copy(best, pattern)
			}
		}
		if bestT < 0 || bestScore < minScore {
			return // nothing fits any candidate (well enough): leave it to the general path
		}
		if len(p.minValues) > 0 && !s.trimForMinValues(p, cp, bestT, items, best) {
			return
		}
		reps := math.MaxInt
		for i, n := range best[:len(items)] {
			if n > 0 {
				reps = min(reps, items[i].rem/n)
			}
		}
		reps = max(1, (reps+1)/2)
		for r := 0; r < reps; r++ {
			if !s.fitsLimits(p, &p.types[bestT]) {
				return
			}
			b := s.newBin(p, cp, cp.zoneMask, bestT)
			if len(p.minValues) > 0 {
				// Each NodeClaim opened takes room under the limits from the next.
				var need catalog.Resources
				for i, n := range best[:len(items)] {
					addTo(&need, &items[i].c.req, int64(n))
				}
				if !s.minValuesOK(b, b.types, b.zoneMask, b.ctMask, &need, 1) {
					s.dropBin(b)
					return
				}
			}
			for i, n := range best[:len(items)] {
				if n > 0 {
					it := items[i]
					s.place(it.c, it.c.variants[it.c.v], b, -1, n)
					it.rem -= n
				}
			}
		}
		// Drop exhausted items.
		k := 0
		for _, it := range items {
			if it.rem > 0 {
				items[k] = it
				k++
			}
		}
		items = items[:k]
	}
}

// trimForMinValues removes pods from a pattern (largest first) until a node with it still fits
// enough distinct values for the pool's minValues requirements; false if nothing is left.
func (s *packer) trimForMinValues(p *poolState, cp *sigCompat, t int, items []*packItem, pattern []int) bool {
	allowed := cp.types
	if cp.all {
		allowed = p.all
	}
	probe := &bin{pool: int32(p.idx), target: int32(t), zoneMask: cp.zoneMask, ctMask: cp.ctMask, types: allowed}
	// Count the probe against the pool's limits, as the NodeClaim will be.
	p.commit(&p.types[t], 1)
	defer p.commit(&p.types[t], -1)
	for {
		var need catalog.Resources
		total := 0
		for i, n := range pattern[:len(items)] {
			addTo(&need, &items[i].c.req, int64(n))
			total += n
		}
		if total == 0 {
			return false
		}
		probe.used = need
		var none catalog.Resources
		if s.minValuesOK(probe, allowed, cp.zoneMask, cp.ctMask, &none, 0) {
			return true
		}
		bi := -1
		for i, n := range pattern[:len(items)] {
			if n > 0 && (bi < 0 || items[i].c.size > items[bi].c.size) {
				bi = i
			}
		}
		pattern[bi]--
	}
}

// groupDuals solves the covering LP of a demand over the allowed types and returns its dual
// prices; when the LP cannot be solved it falls back to prices proportional to the cheapest
// cost per unit of each resource.
func (s *packer) groupDuals(p *poolState, demand *catalog.Resources, allowed bitset, out *[catalog.NumResources]float64) {
	saved := p.duals
	s.computeDuals(p, demand, allowed)
	*out = p.duals
	p.duals = saved
	zero := true
	for r := range out {
		if out[r] > 0 {
			zero = false
		}
	}
	if !zero {
		return
	}
	for r := range out {
		if demand[r] <= 0 {
			continue
		}
		best := math.Inf(1)
		allowed.each(func(i int) bool {
			t := &p.types[i]
			if t.usable[r] > 0 {
				best = min(best, t.price/float64(t.usable[r]))
			}
			return true
		})
		if !math.IsInf(best, 1) {
			out[r] = best
		}
	}
}

const (
	packChunk       = 4
	packCandidates  = 16
	perFamilyLimit  = 2
	labelFamilyName = "karpenter.k8s.aws/instance-family"
)

// candidates are the allowed types with the best value per dollar at the dual prices (at most
// two sizes per instance family, so that families the LP does not use but that pack real pods
// well are tried too), plus the cheapest type that fits the largest remaining pod.
func (s *packer) candidates(p *poolState, allowed bitset, prices []float64, duals *[catalog.NumResources]float64, largest *catalog.Resources, cp *sigCompat) []int {
	type sc struct {
		t   int
		eff float64
	}
	var all []sc
	cheapFit, cheapPrice := -1, math.Inf(1)
	allowed.each(func(i int) bool {
		t := &p.types[i]
		pr := prices[i]
		if math.IsInf(pr, 1) || pr <= 0 || !s.fitsLimits(p, t) {
			return true
		}
		v := 0.0
		for r := range duals {
			v += duals[r] * float64(t.usable[r])
		}
		if fits(largest, &t.usable) && pr < cheapPrice {
			cheapFit, cheapPrice = i, pr
		}
		all = append(all, sc{i, v / pr})
		return true
	})
	slices.SortFunc(all, func(a, b sc) int {
		switch {
		case a.eff > b.eff:
			return -1
		case a.eff < b.eff:
			return 1
		}
		return a.t - b.t
	})
	perFamily := map[string]int{}
	out := make([]int, 0, packCandidates+1)
	for _, x := range all {
		fam := p.types[x.t].it.Labels[labelFamilyName]
		if fam == "" {
			fam = p.types[x.t].it.Name
		}
		if perFamily[fam] >= perFamilyLimit {
			continue
		}
		perFamily[fam]++
		out = append(out, x.t)
		if len(out) == packCandidates {
			break
		}
	}
	if cheapFit >= 0 {
		found := false
		for _, t := range out {
			found = found || t == cheapFit
		}
		if !found {
			out = append(out, cheapFit)
		}
	}
	return out
}

// fill packs items into one node of type t, greedily by the dot product of the pod's size and
// the room left (both relative to the node's size); pattern receives the count per item. It
// returns the dual value packed.
//
// It is the cost packer's inner loop (and repack's): it works on a compact copy of the items
// that fit, over only the resources some item requests.
func (s *packer) fill(t *typeInfo, items []*packItem, pattern []int) float64 {
	// Only the resources some item requests matter.
	var active [catalog.NumResources]int
	var inv [catalog.NumResources]float64
	var room [catalog.NumResources]int64 // per active resource
	na := 0
	for r := catalog.Resource(0); r < catalog.NumResources; r++ {
		for _, it := range items {
			if it.c.req[r] > 0 {
				active[na] = int(r)
				room[na] = t.usable[r]
				if t.usable[r] > 0 {
					inv[na] = 1 / float64(t.usable[r])
				}
				na++
				break
			}
		}
	}
	live := s.fillBuf[:0]
	for i, it := range items {
		pattern[i] = 0
		f := fillItem{idx: int32(i), rem: it.rem}
		fitsNode := true
		for a := 0; a < na; a++ {
			f.req[a] = it.c.req[active[a]]
			f.q[a] = float64(f.req[a]) * inv[a]
			fitsNode = fitsNode && f.req[a] <= room[a]
		}
		if fitsNode {
			live = append(live, f)
		}
	}
	value := 0.0
	for len(live) > 0 {
		bi, bestDot := -1, -1.0
		k := 0
		for j := range live {
			f := &live[j]
			if pattern[f.idx] >= f.rem {
				continue // all placed: drop it
			}
			dot := 0.0
			ok := true
			for a := 0; a < na; a++ {
				if f.req[a] > room[a] {
					ok = false
					break
				}
				dot += f.q[a] * float64(room[a]) * inv[a]
			}
			if !ok {
				continue // never fits again in this node: drop it
			}
			live[k] = *f
			if dot > bestDot {
				bi, bestDot = k, dot
			}
			k++
		}
		live = live[:k]
		if bi < 0 {
			break
		}
		f := &live[bi]
		// Take a few at once when many fit.
		n := f.rem
		for a := 0; a < na; a++ {
			if f.req[a] > 0 {
				n = min(n, int(room[a]/f.req[a]))
			}
		}
		n = max(1, min(f.rem-pattern[f.idx], n/packChunk))
		pattern[f.idx] += n
		value += float64(n) * items[f.idx].val
		for a := 0; a < na; a++ {
			room[a] -= f.req[a] * int64(n)
		}
	}
	s.fillBuf = live
	return value
}

// fillItem is an item as fill sees it: its requests and their share of the node per active
// resource (q = request / node size), its pods left and its index in the items.
type fillItem struct {
	req [catalog.NumResources]int64
	q   [catalog.NumResources]float64
	idx int32
	rem int
}
