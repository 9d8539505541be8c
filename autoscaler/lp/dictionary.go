// Package lp is the one simplex of karpool: the cost bound (package costbound) and the
// scheduling engine's dual prices both solve their linear programs with it.
//
// Dictionary is a small dense simplex for
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
package lp

import "math"

const (
	costEps  = 1e-9  // reduced costs above this are improving
	pivotEps = 1e-11 // smaller pivot elements are treated as zero
)

// Status is how Solve ended.
type Status int

const (
	// Optimal: no improving column is left.
	Optimal Status = iota
	// Unbounded: an improving column has no leaving row.
	Unbounded
	// IterationLimit: Solve stopped after maxPivots pivots.
	IterationLimit
)

// Dictionary is the LP   maximize C·y + Z  subject to  A y ≤ B,  y ≥ 0,  with B ≥ 0, in
// dictionary form. Fill A, B and C after NewDictionary, then Solve; Z is the optimum.
type Dictionary struct {
	N, M     int       // rows (constraints) and columns (structural variables)
	A        []float64 // N × M, row-major
	B        []float64 // N
	C        []float64 // M
	Z        float64
	Pivots   int   // pivots made
	basic    []int // label of the basic variable of each row: j < M structural, M+i slack of row i
	nonbasic []int // label of the non-basic variable of each column
}

// NewDictionary returns the all-slack dictionary of n constraints over m variables, all zero.
func NewDictionary(n, m int) *Dictionary {
	d := &Dictionary{
		N: n, M: m,
		A:        make([]float64, n*m),
		B:        make([]float64, n),
		C:        make([]float64, m),
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

// Solve pivots to the optimum, at most maxPivots times.
func (d *Dictionary) Solve(maxPivots int) Status {
	bland := false
	degenerate := 0
	for d.Pivots < maxPivots {
		e := d.entering(bland)
		if e < 0 {
			return Optimal
		}
		l := d.leaving(e, bland)
		if l < 0 {
			return Unbounded
		}
		if d.B[l] <= 1e-12 {
			degenerate++
			if degenerate > d.M+2 {
				bland = true
			}
		} else {
			degenerate = 0
		}
		d.pivot(l, e)
	}
	return IterationLimit
}

func (d *Dictionary) entering(bland bool) int {
	e := -1
	best := costEps
	for j, cj := range d.C {
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
func (d *Dictionary) leaving(e int, bland bool) int {
	l := -1
	var best float64
	m := d.M
	for i := 0; i < d.N; i++ {
		aie := d.A[i*m+e]
		if aie <= pivotEps {
			continue
		}
		r := d.B[i] / aie
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
			} else if aie > d.A[l*m+e] {
				l, best = i, math.Min(r, best)
			}
		}
	}
	return l
}

func (d *Dictionary) pivot(l, e int) {
	m := d.M
	rowL := d.A[l*m : (l+1)*m]
	inv := 1 / rowL[e]
	for j := range rowL {
		rowL[j] *= inv
	}
	rowL[e] = inv
	d.B[l] *= inv
	bl := d.B[l]
	for i := 0; i < d.N; i++ {
		if i == l {
			continue
		}
		row := d.A[i*m : (i+1)*m]
		f := row[e]
		if f == 0 {
			continue
		}
		for j, v := range rowL {
			row[j] -= f * v
		}
		row[e] = -f * inv
		d.B[i] -= f * bl
		if d.B[i] < 0 && d.B[i] > -1e-12 {
			d.B[i] = 0 // round-off
		}
	}
	f := d.C[e]
	for j, v := range rowL {
		d.C[j] -= f * v
	}
	d.C[e] = -f * inv
	d.Z += f * bl
	d.basic[l], d.nonbasic[e] = d.nonbasic[e], d.basic[l]
	d.Pivots++
}

// Primal returns the values of the structural variables y.
func (d *Dictionary) Primal() []float64 {
	y := make([]float64, d.M)
	for i, v := range d.basic {
		if v < d.M {
			y[v] = math.Max(d.B[i], 0)
		}
	}
	return y
}

// Dual returns the multipliers of the n constraints (the covering LP's solution x).
func (d *Dictionary) Dual() []float64 {
	x := make([]float64, d.N)
	for j, v := range d.nonbasic {
		if v >= d.M {
			x[v-d.M] = math.Max(-d.C[j], 0)
		}
	}
	return x
}
