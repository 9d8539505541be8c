package lp

import (
	"math"
	"testing"
)

// A covering LP both simplexes solve: two resources, three types.
//
//	min 1·x0 + 1.5·x1 + 2.5·x2   s.t.   4x0 + 2x1 + 8x2 ≥ 16,   2x0 + 8x1 + 4x2 ≥ 16
//
// Optimum: x0 = 24/7, x1 = 8/7 (both rows tight), cost 36/7; dual prices y = (5/28, 1/7).
var (
	testCols  = [][]float64{{4, 2}, {2, 8}, {8, 4}}
	testCosts = []float64{1, 1.5, 2.5}
	testB     = []float64{16, 16}
)

func TestCover(t *testing.T) {
	x, y, obj, ok := Cover(testCols, testCosts, testB)
	if !ok {
		t.Fatal("not ok")
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(obj, 36.0/7) || !near(x[0], 24.0/7) || !near(x[1], 8.0/7) || !near(x[2], 0) {
		t.Errorf("x = %v, cost %v; want [24/7 8/7 0], 36/7", x, obj)
	}
	if !near(y[0], 5.0/28) || !near(y[1], 1.0/7) {
		t.Errorf("y = %v, want [5/28 1/7]", y)
	}
	// A row nothing covers.
	if _, _, _, ok := Cover([][]float64{{1, 0}}, []float64{1}, []float64{1, 1}); ok {
		t.Error("uncoverable row: ok")
	}
}

// TestDictionaryDual solves the same LP through its dual, as package costbound does.
func TestDictionaryDual(t *testing.T) {
	d := NewDictionary(len(testCols), len(testB))
	for r, b := range testB {
		d.C[r] = b
	}
	for j, col := range testCols {
		d.B[j] = testCosts[j]
		copy(d.A[j*d.M:(j+1)*d.M], col)
	}
	if st := d.Solve(100); st != Optimal {
		t.Fatalf("status %v", st)
	}
	if math.Abs(d.Z-36.0/7) > 1e-9 {
		t.Errorf("optimum %v, want 36/7", d.Z)
	}
	x := d.Dual()
	if math.Abs(x[0]-24.0/7) > 1e-9 || math.Abs(x[1]-8.0/7) > 1e-9 || math.Abs(x[2]) > 1e-9 {
		t.Errorf("covering solution %v, want [24/7 8/7 0]", x)
	}
	// Unbounded: a variable no row limits.
	u := NewDictionary(1, 2)
	u.C[0], u.C[1] = 1, 1
	u.A[0], u.B[0] = 1, 1
	if st := u.Solve(100); st != Unbounded {
		t.Errorf("status %v, want Unbounded", st)
	}
}
