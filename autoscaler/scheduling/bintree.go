package scheduling

import "github.com/karpool/karpool/autoscaler/catalog"

// binTree answers "first bin at or after i with at least this much free cpu, memory and pods"
// in O(log n): a segment tree holding, per range of bins, the largest free amount of each of the
// three resources (a range is skipped when one of them is short everywhere in it). It lets
// first-fit skip the many full nodes of a large solve instead of testing them one by one.
type binTree struct {
	size int        // leaves, a power of two
	max  [][3]int64 // 1-based heap layout
}

var treeRes = [3]catalog.Resource{catalog.CPU, catalog.Memory, catalog.Pods}

const closedRoom = -1

func (t *binTree) grow(n int) {
	if n <= t.size {
		return
	}
	size := max(64, t.size)
	for size < n {
		size *= 2
	}
	old, oldSize := t.max, t.size
	t.size = size
	t.max = make([][3]int64, 2*size)
	for i := range t.max {
		t.max[i] = [3]int64{closedRoom, closedRoom, closedRoom}
	}
	for i := 0; i < oldSize; i++ {
		t.max[size+i] = old[oldSize+i]
	}
	for i := size - 1; i >= 1; i-- {
		t.pull(i)
	}
}

func (t *binTree) pull(i int) {
	l, r := &t.max[2*i], &t.max[2*i+1]
	for k := 0; k < 3; k++ {
		t.max[i][k] = max(l[k], r[k])
	}
}

// set records the free room of bin i.
func (t *binTree) set(i int, room [3]int64) {
	t.grow(i + 1)
	j := t.size + i
	t.max[j] = room
	for j >>= 1; j >= 1; j >>= 1 {
		t.pull(j)
	}
}

// first returns the first bin index >= from whose room covers req, or -1.
func (t *binTree) first(from int, req [3]int64) int {
	if from >= t.size {
		return -1
	}
	return t.search(1, 0, t.size, from, &req)
}

func (t *binTree) covers(i int, req *[3]int64) bool {
	m := &t.max[i]
	return m[0] >= req[0] && m[1] >= req[1] && m[2] >= req[2]
}

func (t *binTree) search(node, lo, hi, from int, req *[3]int64) int {
	if hi <= from || !t.covers(node, req) {
		return -1
	}
	if hi-lo == 1 {
		return lo
	}
	mid := (lo + hi) / 2
	if r := t.search(2*node, lo, mid, from, req); r >= 0 {
		return r
	}
	return t.search(2*node+1, mid, hi, from, req)
}

// treeUpdate refreshes a bin's entry after its room changed.
func (s *binSet) treeUpdate(b *bin) {
	var room [3]int64
	if b.dead || b.closed {
		room = [3]int64{closedRoom, closedRoom, closedRoom}
	} else {
		for k, r := range treeRes {
			room[k] = b.alloc[r] - b.used[r]
		}
	}
	s.tree.set(int(b.id), room)
}

func treeReq(r *catalog.Resources) [3]int64 {
	return [3]int64{r[catalog.CPU], r[catalog.Memory], r[catalog.Pods]}
}
