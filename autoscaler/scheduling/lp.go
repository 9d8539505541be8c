package scheduling

import "math"

// coverLP solves   min Σ c_j x_j   s.t.   Σ_j a_jr x_j ≥ b_r for every row r,  x ≥ 0
// with a revised simplex (the number of rows is small: one per resource). cols[j] holds a_j.
// It returns the optimal x, the dual prices y (per unit of each row) and the objective; ok is
// false when some row cannot be covered.
func coverLP(cols [][]float64, c []float64, b []float64) (x, y []float64, obj float64, ok bool) {
	m, n := len(b), len(cols)
	y = make([]float64, m)
	x = make([]float64, n)
	if m == 0 || n == 0 {
		return x, y, 0, m == 0
	}
	// Scale rows to b = 1 and costs to at most 1.
	cmax := 0.0
	for _, v := range c {
		cmax = max(cmax, v)
	}
	if cmax <= 0 {
		cmax = 1
	}
	rowScale := make([]float64, m)
	for r := range b {
		if b[r] <= 0 {
			rowScale[r] = 1
		} else {
			rowScale[r] = 1 / b[r]
		}
	}
	col := func(j int, out []float64) {
		for r := 0; r < m; r++ {
			out[r] = cols[j][r] * rowScale[r]
		}
	}
	const bigM = 1e6
	cost := func(j int) float64 { // j < n: structural; n..n+m-1: surplus; n+m..: artificial
		switch {
		case j < n:
			return c[j] / cmax
		case j < n+m:
			return 0
		}
		return bigM
	}
	basis := make([]int, m)
	inBasis := make([]bool, n+2*m)
	binv := make([]float64, m*m)
	xb := make([]float64, m)
	for r := 0; r < m; r++ {
		basis[r] = n + m + r
		inBasis[n+m+r] = true
		binv[r*m+r] = 1
		if b[r] > 0 {
			xb[r] = 1
		} else {
			xb[r] = 0 // b <= 0: the row starts satisfied (b < 0 is treated as 0)
		}
	}
	a := make([]float64, m)
	u := make([]float64, m)
	yy := make([]float64, m)
	degenerate := 0
	for iter := 0; iter < 10000; iter++ {
		// y = c_B B^-1
		for r := 0; r < m; r++ {
			s := 0.0
			for i := 0; i < m; i++ {
				s += cost(basis[i]) * binv[i*m+r]
			}
			yy[r] = s
		}
		bland := degenerate > 50
		enter, best := -1, -1e-9
		for j := 0; j < n+2*m; j++ {
			if inBasis[j] {
				continue
			}
			var d float64
			switch {
			case j < n:
				col(j, a)
				d = cost(j)
				for r := 0; r < m; r++ {
					d -= yy[r] * a[r]
				}
			case j < n+m:
				d = yy[j-n]
			default:
				d = bigM - yy[j-n-m]
			}
			if d < best {
				enter, best = j, d
				if bland {
					break
				}
			}
		}
		if enter < 0 {
			break
		}
		// u = B^-1 a_enter
		switch {
		case enter < n:
			col(enter, a)
		case enter < n+m:
			clear(a)
			a[enter-n] = -1
		default:
			clear(a)
			a[enter-n-m] = 1
		}
		for i := 0; i < m; i++ {
			s := 0.0
			for r := 0; r < m; r++ {
				s += binv[i*m+r] * a[r]
			}
			u[i] = s
		}
		leave, theta := -1, math.Inf(1)
		for i := 0; i < m; i++ {
			if u[i] > 1e-12 {
				t := xb[i] / u[i]
				if t < theta-1e-15 || (t <= theta+1e-15 && leave >= 0 && basis[i] < basis[leave]) {
					leave, theta = i, t
				}
			}
		}
		if leave < 0 {
			return x, y, 0, false // unbounded: cannot happen with non-negative costs
		}
		if theta < 1e-15 {
			degenerate++
		} else {
			degenerate = 0
		}
		// Pivot.
		pv := u[leave]
		for r := 0; r < m; r++ {
			binv[leave*m+r] /= pv
		}
		xb[leave] /= pv
		for i := 0; i < m; i++ {
			if i == leave || u[i] == 0 {
				continue
			}
			f := u[i]
			for r := 0; r < m; r++ {
				binv[i*m+r] -= f * binv[leave*m+r]
			}
			xb[i] -= f * xb[leave]
		}
		inBasis[basis[leave]] = false
		basis[leave] = enter
		inBasis[enter] = true
	}
	ok = true
	for i := 0; i < m; i++ {
		j := basis[i]
		switch {
		case j < n:
			x[j] = xb[i]
			obj += c[j] * xb[i]
		case j >= n+m && xb[i] > 1e-9:
			ok = false
		}
	}
	for r := 0; r < m; r++ {
		y[r] = yy[r] * cmax * rowScale[r]
	}
	return x, y, obj, ok
}
