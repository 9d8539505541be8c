package lp

import "math"

// Cover solves   min Σ c_j x_j   s.t.   Σ_j a_jr x_j ≥ b_r for every row r,  x ≥ 0
// with a revised simplex on the m × m basis inverse (the number of rows is small: one per
// resource), big-M artificials for phase one. cols[j] holds a_j. It returns the optimal x, the
// dual prices y (per unit of each row) and the objective; ok is false when some row cannot be
// covered.
//
// Cover stays its own algorithm beside Dictionary (which solves the same LP through its dual,
// as package costbound does): on degenerate LPs the two return different, equally optimal dual
// prices, and the scheduling engine's plans follow the prices (29 of its random sweep's first
// 5,000 plans change when Cover is written on Dictionary).
func Cover(cols [][]float64, c []float64, b []float64) (x, y []float64, obj float64, ok bool) {
	m, n := len(b), len(cols)
	y = make([]float64, m)
	x = make([]float64, n)
	if m == 0 || n == 0 {
		return x, y, 0, m == 0
	}
	var r revised
	r.init(cols, c, b)
	degenerate := 0
	for iter := 0; iter < 10000; iter++ {
		r.prices()
		enter := r.entering(degenerate > 50)
		if enter < 0 {
			break
		}
		r.direction(enter)
		leave, theta := r.ratio()
		if leave < 0 {
			return x, y, 0, false // unbounded: cannot happen with non-negative costs
		}
		if theta < 1e-15 {
			degenerate++
		} else {
			degenerate = 0
		}
		r.pivot(leave, enter)
	}
	ok = true
	for i := 0; i < m; i++ {
		j := r.basis[i]
		switch {
		case j < n:
			x[j] = r.xb[i]
			obj += c[j] * r.xb[i]
		case j >= n+m && r.xb[i] > 1e-9:
			ok = false
		}
	}
	for k := 0; k < m; k++ {
		y[k] = r.yy[k] * r.cmax * r.rowScale[k]
	}
	return x, y, obj, ok
}

// bigM is the cost of an artificial variable.
const bigM = 1e6

// revised is Cover's state: rows scaled to b = 1 and costs to at most 1; variables j < n are
// structural, n..n+m-1 surplus, n+m.. artificial.
type revised struct {
	m, n     int
	cols     [][]float64
	c        []float64
	cmax     float64
	rowScale []float64
	basis    []int
	inBasis  []bool
	binv     []float64 // m × m basis inverse, row-major
	xb       []float64 // basic values
	a, u, yy []float64 // scratch: a column, B⁻¹ times it, the simplex multipliers
}

// init scales the LP and starts from the all-artificial basis.
func (r *revised) init(cols [][]float64, c []float64, b []float64) {
	m, n := len(b), len(cols)
	*r = revised{m: m, n: n, cols: cols, c: c}
	for _, v := range c {
		r.cmax = max(r.cmax, v)
	}
	if r.cmax <= 0 {
		r.cmax = 1
	}
	r.rowScale = make([]float64, m)
	for k := range b {
		if b[k] <= 0 {
			r.rowScale[k] = 1
		} else {
			r.rowScale[k] = 1 / b[k]
		}
	}
	r.basis = make([]int, m)
	r.inBasis = make([]bool, n+2*m)
	r.binv = make([]float64, m*m)
	r.xb = make([]float64, m)
	for k := 0; k < m; k++ {
		r.basis[k] = n + m + k
		r.inBasis[n+m+k] = true
		r.binv[k*m+k] = 1
		if b[k] > 0 {
			r.xb[k] = 1
		} else {
			r.xb[k] = 0 // b <= 0: the row starts satisfied (b < 0 is treated as 0)
		}
	}
	r.a = make([]float64, m)
	r.u = make([]float64, m)
	r.yy = make([]float64, m)
}

// col writes structural column j, scaled, to out.
func (r *revised) col(j int, out []float64) {
	for k := 0; k < r.m; k++ {
		out[k] = r.cols[j][k] * r.rowScale[k]
	}
}

// cost is variable j's scaled cost.
func (r *revised) cost(j int) float64 {
	switch {
	case j < r.n:
		return r.c[j] / r.cmax
	case j < r.n+r.m:
		return 0
	}
	return bigM
}

// prices computes the simplex multipliers y = c_B B⁻¹.
func (r *revised) prices() {
	m := r.m
	for k := 0; k < m; k++ {
		s := 0.0
		for i := 0; i < m; i++ {
			s += r.cost(r.basis[i]) * r.binv[i*m+k]
		}
		r.yy[k] = s
	}
}

// entering picks the non-basic variable of most negative reduced cost (below -1e-9), or under
// Bland's rule the first one; -1 when none improves.
func (r *revised) entering(bland bool) int {
	m, n := r.m, r.n
	enter, best := -1, -1e-9
	for j := 0; j < n+2*m; j++ {
		if r.inBasis[j] {
			continue
		}
		var d float64
		switch {
		case j < n:
			r.col(j, r.a)
			d = r.cost(j)
			for k := 0; k < m; k++ {
				d -= r.yy[k] * r.a[k]
			}
		case j < n+m:
			d = r.yy[j-n]
		default:
			d = bigM - r.yy[j-n-m]
		}
		if d < best {
			enter, best = j, d
			if bland {
				break
			}
		}
	}
	return enter
}

// direction computes u = B⁻¹ a_enter.
func (r *revised) direction(enter int) {
	m, n, a := r.m, r.n, r.a
	switch {
	case enter < n:
		r.col(enter, a)
	case enter < n+m:
		clear(a)
		a[enter-n] = -1
	default:
		clear(a)
		a[enter-n-m] = 1
	}
	for i := 0; i < m; i++ {
		s := 0.0
		for k := 0; k < m; k++ {
			s += r.binv[i*m+k] * a[k]
		}
		r.u[i] = s
	}
}

// ratio is the ratio test: the leaving row (ties to the smaller basic label) and the step; -1
// when the direction is unbounded.
func (r *revised) ratio() (int, float64) {
	leave, theta := -1, math.Inf(1)
	for i := 0; i < r.m; i++ {
		if r.u[i] > 1e-12 {
			t := r.xb[i] / r.u[i]
			if t < theta-1e-15 || (t <= theta+1e-15 && leave >= 0 && r.basis[i] < r.basis[leave]) {
				leave, theta = i, t
			}
		}
	}
	return leave, theta
}

// pivot updates the basis inverse and the basic values.
func (r *revised) pivot(leave, enter int) {
	m, binv, u := r.m, r.binv, r.u
	pv := u[leave]
	for k := 0; k < m; k++ {
		binv[leave*m+k] /= pv
	}
	r.xb[leave] /= pv
	for i := 0; i < m; i++ {
		if i == leave || u[i] == 0 {
			continue
		}
		f := u[i]
		for k := 0; k < m; k++ {
			binv[i*m+k] -= f * binv[leave*m+k]
		}
		r.xb[i] -= f * r.xb[leave]
	}
	r.inBasis[r.basis[leave]] = false
	r.basis[leave] = enter
	r.inBasis[enter] = true
}
