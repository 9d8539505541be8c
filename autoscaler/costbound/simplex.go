package costbound

// A small dense simplex for
//
//	maximize c·y  subject to  A y ≤ b,  y ≥ 0,  with b ≥ 0,
//
// in dictionary form (Chvátal): the n basic variables are written in terms of the m non-basic
// ones, so the tableau is n × m and a pivot costs O(n·m). With b ≥ 0 the all-slack basis is
// feasible, so no phase one is needed. This is the shape of the dual of the covering LP
// (few resources, many instance types): m is ~3–12, n a few hundred.
//
// Pivoting uses Dantzig's rule (largest reduced cost) and switches to Bland's rule (smallest
// index), which cannot cycle, after a run of degenerate pivots.

import "math"

const (
	costEps  = 1e-9  // reduced costs above this are improving
	pivotEps = 1e-11 // smaller pivot elements are treated as zero
)

type lpStatus int

const (
	lpOptimal lpStatus = iota
	lpUnbounded
	lpIterationLimit
)

type dictionary struct {
	n, m     int
	a        []float64 // n × m, row-major
	b        []float64 // n
	c        []float64 // m
	z        float64
	basic    []int // label of the basic variable of each row: j < m structural, m+i slack of row i
	nonbasic []int // label of the non-basic variable of each column
	pivots   int
}

func newDictionary(n, m int) *dictionary {
	d := &dictionary{
		n: n, m: m,
		a:        make([]float64, n*m),
		b:        make([]float64, n),
		c:        make([]float64, m),
		basic:    make([]int, n),
		nonbasic: make([]int, m),
	}
	for j := range d.nonbasic {
		d.nonbasic[j] = j
	}
	for i := range d.basic {
		d.basic[i] = m + i
	}
	return d
}

func (d *dictionary) solve(maxPivots int) lpStatus {
	bland := false
	degenerate := 0
	for d.pivots < maxPivots {
		e := d.entering(bland)
		if e < 0 {
			return lpOptimal
		}
		l := d.leaving(e, bland)
		if l < 0 {
			return lpUnbounded
		}
		if d.b[l] <= 1e-12 {
			degenerate++
			if degenerate > d.m+2 {
				bland = true
			}
		} else {
			degenerate = 0
		}
		d.pivot(l, e)
	}
	return lpIterationLimit
}

func (d *dictionary) entering(bland bool) int {
	e := -1
	best := costEps
	for j, cj := range d.c {
		if cj <= costEps {
			continue
		}
		if bland {
			if e < 0 || d.nonbasic[j] < d.nonbasic[e] {
				e = j
			}
		} else if cj > best {
			best, e = cj, j
		}
	}
	return e
}

// leaving runs the ratio test on column e. Ties (within a relative 1e-12) go to the larger
// pivot element under Dantzig's rule and to the smaller label under Bland's.
func (d *dictionary) leaving(e int, bland bool) int {
	l := -1
	var best float64
	m := d.m
	for i := 0; i < d.n; i++ {
		aie := d.a[i*m+e]
		if aie <= pivotEps {
			continue
		}
		r := d.b[i] / aie
		if l < 0 {
			l, best = i, r
			continue
		}
		tol := 1e-12 * math.Max(1, math.Abs(best))
		switch {
		case r < best-tol:
			l, best = i, r
		case r <= best+tol:
			if bland {
				if d.basic[i] < d.basic[l] {
					l, best = i, math.Min(r, best)
				}
			} else if aie > d.a[l*m+e] {
				l, best = i, math.Min(r, best)
			}
		}
	}
	return l
}

func (d *dictionary) pivot(l, e int) {
	m := d.m
	rowL := d.a[l*m : (l+1)*m]
	inv := 1 / rowL[e]
	for j := range rowL {
		rowL[j] *= inv
	}
	rowL[e] = inv
	d.b[l] *= inv
	bl := d.b[l]
	for i := 0; i < d.n; i++ {
		if i == l {
			continue
		}
		row := d.a[i*m : (i+1)*m]
		f := row[e]
		if f == 0 {
			continue
		}
		for j, v := range rowL {
			row[j] -= f * v
		}
		row[e] = -f * inv
		d.b[i] -= f * bl
		if d.b[i] < 0 && d.b[i] > -1e-12 {
			d.b[i] = 0 // round-off
		}
	}
	f := d.c[e]
	for j, v := range rowL {
		d.c[j] -= f * v
	}
	d.c[e] = -f * inv
	d.z += f * bl
	d.basic[l], d.nonbasic[e] = d.nonbasic[e], d.basic[l]
	d.pivots++
}

// primal returns the values of the structural variables y.
func (d *dictionary) primal() []float64 {
	y := make([]float64, d.m)
	for i, v := range d.basic {
		if v < d.m {
			y[v] = math.Max(d.b[i], 0)
		}
	}
	return y
}

// dual returns the multipliers of the n constraints (the covering LP's solution x).
func (d *dictionary) dual() []float64 {
	x := make([]float64, d.n)
	for j, v := range d.nonbasic {
		if v >= d.m {
			x[v-d.m] = math.Max(-d.c[j], 0)
		}
	}
	return x
}
