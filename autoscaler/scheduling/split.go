package scheduling

import (
	"math"
	"slices"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/lp"
)

// Splitting free pods among instance families by their memory:cpu ratio.
//
// The covering LP behind the dual prices treats cpu and memory as divisible: with every family
// allowed it may cover cpu with a family that is cheap per vCPU but short of memory (a1) and
// memory with another (r6g), a split pods that carry both in a fixed ratio cannot make. Packing
// by those prices then drifts towards one balanced family for everything. The whole-pod
// relaxation keeps each pod's ratio instead: pods, grouped into ratio buckets, are assigned
// fractionally to node types, and a node holds only what fits its cpu and memory. The extreme
// ways to fill one node are one bucket alone, or two buckets on either side of the type's own
// ratio in the proportion that uses up both resources; the covering LP over those columns says
// which share of every bucket each family should carry. Each family then packs its share on
// its own types, lowest ratios on the lowest-ratio family; what does not fit goes back to the
// general packer.

// splitBuckets is the number of ratio buckets: the LP has one row per bucket and about
// types × buckets²/4 columns.
const splitBuckets = 24

// A family packs its share while its nodes carry at least splitMinScore of their price in
// demand (at the share's own dual prices); the rest is split again, up to splitRounds times,
// and whatever remains goes to the general packer.
const (
	splitMinScore = 0.9
	splitRounds   = 6
)

// splitDecisive: when whole pods cost at least this factor more than divisible cpu and memory
// in the LP, the split packing is taken without trying the general one.
const splitDecisive = 1.02

// splitType is a type of the whole-pod LP: a node's cpu (millicores), memory (bytes), pod slots
// and price; fam indexes splitByRatio's families.
type splitType struct {
	cpu, mem, pods, price float64
	fam                   int
}

// splitByRatio packs the share of the items each instance family should carry (see above) on
// that family's types, lowering the items' rem by what it placed, and reports whether it placed
// any. It does nothing when the cheapest types per unit of cpu and of memory are of one family
// (then one family is best for every ratio), or for items that request resources other than
// cpu, memory and ephemeral storage.
func (s *packer) splitByRatio(p *poolState, cp *sigCompat, items []*packItem, allowed bitset, prices []float64) bool {
	if !s.split {
		return false
	}
	types, fams := s.splitTypes(p, allowed, prices)
	if len(fams) < 2 {
		return false
	}
	elig := splitEligible(items, types)
	if len(elig) == 0 {
		return false
	}
	bk := bucketize(elig)
	cols := splitColumns(types, bk.rho)
	x, whole, ok := coverBuckets(types, cols, bk.demand)
	if !ok {
		return false
	}
	// The same LP with cpu and memory divisible (what the dual prices of the general packer
	// come from): when whole pods cost clearly more, those prices mislead and the split is the
	// better packing; otherwise it may not be (see Solve).
	if splitInDoubt(types, bk, whole) {
		s.splitDoubt = true
	}
	parts := bk.cut(elig, familyShares(types, cols, x, bk.demand, len(fams)), len(fams))
	// Pack each family's part on the family's types; what is left stays with the item.
	left := make(map[*class]int, len(elig))
	for f, part := range parts {
		if len(part) == 0 {
			continue
		}
		s.packItems(p, cp, part, fams[f], prices, splitMinScore)
		for _, pi := range part {
			left[pi.c] += pi.rem
		}
	}
	placed := false
	for _, it := range elig {
		placed = placed || left[it.c] < it.rem
		it.rem = left[it.c]
	}
	s.splitUsed = s.splitUsed || placed
	// The rest (pods that fit no family's share, pods too small to split) first fill the room
	// left on the NodeClaims just opened.
	if placed {
		for _, it := range items {
			if it.rem > 0 {
				s.fillOpen(it.c)
				it.rem = it.c.remaining()
			}
		}
	}
	return placed
}

// itemRatio is an item's memory per millicore.
func itemRatio(it *packItem) float64 {
	return max(float64(it.c.req[catalog.Memory]), 1) / float64(it.c.req[catalog.CPU])
}

// splitEligible are the items with pods left whose requests the whole-pod LP models
// (splittable), by ratio, then class.
func splitEligible(items []*packItem, types []splitType) []*packItem {
	var elig []*packItem
	for _, it := range items {
		if it.rem > 0 && splittable(&it.c.req, types) {
			elig = append(elig, it)
		}
	}
	slices.SortStableFunc(elig, func(a, b *packItem) int {
		switch ra, rb := itemRatio(a), itemRatio(b); {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return a.c.id - b.c.id
	})
	return elig
}

// ratioBuckets group the eligible items by ratio: bucketOf[i] is item i's bucket, row[k] the
// LP row of bucket k (-1 when empty); the rows' cpu demand and mean ratio.
type ratioBuckets struct {
	bucketOf, row []int
	demand, rho   []float64
}

// bucketize puts the items (sorted by ratio) into buckets of geometric width between the
// lowest and the highest ratio.
func bucketize(elig []*packItem) ratioBuckets {
	lo, hi := itemRatio(elig[0]), itemRatio(elig[len(elig)-1])
	nb := 1
	if hi > lo*1.01 {
		nb = splitBuckets
	}
	bk := ratioBuckets{bucketOf: make([]int, len(elig)), row: make([]int, nb)}
	cpuOf := make([]float64, nb)
	memOf := make([]float64, nb)
	for i, it := range elig {
		k := 0
		if nb > 1 {
			k = min(nb-1, int(float64(nb)*math.Log(itemRatio(it)/lo)/math.Log(hi/lo)))
		}
		bk.bucketOf[i] = k
		cpuOf[k] += float64(it.c.req[catalog.CPU]) * float64(it.rem)
		memOf[k] += float64(it.c.req[catalog.Memory]) * float64(it.rem)
	}
	// Rows: the non-empty buckets, with their cpu demand and mean ratio.
	for k := range nb {
		bk.row[k] = -1
		if cpuOf[k] > 0 {
			bk.row[k] = len(bk.demand)
			bk.demand = append(bk.demand, cpuOf[k])
			bk.rho = append(bk.rho, memOf[k]/cpuOf[k])
		}
	}
	return bk
}

// splitColumn is a way to fill one node of type t: how much cpu of row a (and of row b, b < 0
// for a single bucket) it holds.
type splitColumn struct {
	t    int
	a, b int
	qa   float64
	qb   float64
}

// splitColumns are every type's fillings: each bucket alone, and each pair of buckets on
// either side of the type's ratio in the proportion that uses up both resources.
func splitColumns(types []splitType, rho []float64) []splitColumn {
	m := len(rho)
	var cols []splitColumn
	for ti, t := range types {
		r := t.mem / t.cpu
		for a := range m {
			cols = append(cols, splitColumn{t: ti, a: a, b: -1, qa: min(t.cpu, t.mem/rho[a])})
			if rho[a] >= r {
				continue
			}
			for b := a + 1; b < m; b++ {
				if rho[b] <= r {
					continue
				}
				qb := (t.mem - t.cpu*rho[a]) / (rho[b] - rho[a])
				cols = append(cols, splitColumn{t: ti, a: a, b: b, qa: t.cpu - qb, qb: qb})
			}
		}
	}
	return cols
}

// coverBuckets solves the whole-pod LP: nodes of each filling covering every row's demand at
// least cost. It returns the nodes per column and the cost.
func coverBuckets(types []splitType, cols []splitColumn, demand []float64) ([]float64, float64, bool) {
	m := len(demand)
	flat := make([]float64, len(cols)*m)
	vecs := make([][]float64, len(cols))
	costs := make([]float64, len(cols))
	for j, c := range cols {
		v := flat[j*m : (j+1)*m]
		v[c.a] = c.qa
		if c.b >= 0 {
			v[c.b] = c.qb
		}
		vecs[j], costs[j] = v, types[c.t].price
	}
	x, _, whole, ok := lp.Cover(vecs, costs, demand)
	return x, whole, ok
}

// splitInDoubt reports whether whole pods cost less than splitDecisive times the same demand
// with cpu and memory divisible (or that LP fails).
func splitInDoubt(types []splitType, bk ratioBuckets, whole float64) bool {
	var total [2]float64
	for k := range bk.demand {
		total[0] += bk.demand[k]
		total[1] += bk.demand[k] * bk.rho[k]
	}
	pair := make([][]float64, len(types))
	tcost := make([]float64, len(types))
	for i, t := range types {
		pair[i], tcost[i] = []float64{t.cpu, t.mem}, t.price
	}
	_, _, divisible, ok := lp.Cover(pair, tcost, total[:])
	return !ok || whole < divisible*splitDecisive
}

// familyShares are, per row and family, the fraction of the bucket's cpu the family carries in
// the LP's solution x.
func familyShares(types []splitType, cols []splitColumn, x, demand []float64, nfam int) [][]float64 {
	share := make([][]float64, len(demand))
	for k := range share {
		share[k] = make([]float64, nfam)
	}
	for j, c := range cols {
		if x[j] <= 0 {
			continue
		}
		f := types[c.t].fam
		share[c.a][f] += x[j] * c.qa / demand[c.a]
		if c.b >= 0 {
			share[c.b][f] += x[j] * c.qb / demand[c.b]
		}
	}
	return share
}

// cut cuts every bucket, in ratio order, into consecutive runs of pods per family (families in
// ratio order): a pod goes to the family whose cumulative cpu share holds its midpoint.
func (bk ratioBuckets) cut(elig []*packItem, share [][]float64, nfam int) [][]*packItem {
	parts := make([][]*packItem, nfam)
	pos := make([]float64, len(bk.demand)) // cpu of the bucket assigned so far
	for i, it := range elig {
		k := bk.row[bk.bucketOf[i]]
		c := float64(it.c.req[catalog.CPU])
		n := it.rem
		start := pos[k]
		pos[k] += c * float64(n)
		// Pods j = 0..n-1 have midpoints start + (j+0.5)c; count those below each boundary.
		below := func(boundary float64) int {
			return max(0, min(n, int(math.Ceil((boundary-start)/c-0.5))))
		}
		edge, prev := 0.0, 0
		for f := range nfam {
			edge += share[k][f] * bk.demand[k]
			upto := below(edge)
			if f == nfam-1 {
				upto = n
			}
			if upto > prev {
				parts[f] = append(parts[f], &packItem{c: it.c, rem: upto - prev})
				prev = upto
			}
		}
	}
	return parts
}

// splittable reports whether a request is only cpu (some), memory, ephemeral storage and the
// pod slot (the whole-pod LP models cpu and memory; ephemeral storage rarely binds), and not so
// small that the pod slot is what it uses up first on every type of the LP: such pods fill the
// room the others leave, wherever it is.
func splittable(r *catalog.Resources, types []splitType) bool {
	if r[catalog.CPU] <= 0 {
		return false
	}
	filler := true
	for _, t := range types {
		if float64(r[catalog.CPU])*t.pods > t.cpu || float64(r[catalog.Memory])*t.pods > t.mem {
			filler = false
			break
		}
	}
	if filler {
		return false
	}
	for k, v := range r {
		switch catalog.Resource(k) {
		case catalog.CPU, catalog.Memory, catalog.EphemeralStorage, catalog.Pods:
		default:
			if v != 0 {
				return false
			}
		}
	}
	return true
}

// splitTypes returns the allowed types no other type beats on both price per millicore and price
// per byte (in the whole-pod LP a dominated type is never needed), and the families they
// belong to as sets of allowed types, in increasing order of memory per cpu.
func (s *packer) splitTypes(p *poolState, allowed bitset, prices []float64) ([]splitType, []bitset) {
	type cand struct {
		t            int
		perCPU, perB float64
	}
	var cs []cand
	allowed.each(func(i int) bool {
		t := &p.types[i]
		pr := prices[i]
		if pr > 0 && !math.IsInf(pr, 1) && t.usable[catalog.CPU] > 0 && t.usable[catalog.Memory] > 0 {
			cs = append(cs, cand{i, pr / float64(t.usable[catalog.CPU]), pr / float64(t.usable[catalog.Memory])})
		}
		return true
	})
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.perCPU != b.perCPU:
			if a.perCPU < b.perCPU {
				return -1
			}
			return 1
		case a.perB != b.perB:
			if a.perB < b.perB {
				return -1
			}
			return 1
		}
		return a.t - b.t
	})
	var front []cand
	for _, c := range cs {
		if len(front) == 0 || c.perB < front[len(front)-1].perB {
			front = append(front, c)
		}
	}
	// Families of the front, by ratio (the front is sorted by price per cpu, so by increasing
	// memory per cpu).
	famIdx := map[string]int{}
	var names []string
	var types []splitType
	for _, c := range front {
		t := &p.types[c.t]
		name := familyOf(t.it)
		f, ok := famIdx[name]
		if !ok {
			f = len(names)
			famIdx[name] = f
			names = append(names, name)
		}
		types = append(types, splitType{
			cpu: float64(t.usable[catalog.CPU]), mem: float64(t.usable[catalog.Memory]), pods: float64(t.usable[catalog.Pods]),
			price: prices[c.t], fam: f,
		})
	}
	fams := make([]bitset, len(names))
	for f := range fams {
		fams[f] = newBitset(len(p.types))
	}
	allowed.each(func(i int) bool {
		if f, ok := famIdx[familyOf(p.types[i].it)]; ok {
			fams[f].set(i)
		}
		return true
	})
	return types, fams
}

// familyOf is the instance family of a type (its name when it has no family label).
func familyOf(it *catalog.InstanceType) string {
	if f := it.Labels[labelFamilyName]; f != "" {
		return f
	}
	return it.Name
}
