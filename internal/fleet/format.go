package fleet

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dollars is "$1,234.56".
func Dollars(v float64) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', 2, 64)
	whole, frac, _ := strings.Cut(s, ".")
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	sign := ""
	if v < 0 {
		sign = "-"
	}
	return sign + "$" + whole + "." + frac
}

// Monthly is an hourly price as dollars a month.
func Monthly(perHour float64) string { return Dollars(perHour * HoursPerMonth) }

// Hourly is an hourly price with the precision small prices need: "$0.0960", "$12.34".
func Hourly(v float64) string {
	if math.Abs(v) >= 10 {
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.4f", v)
}

// Signed is a difference in dollars with its sign: "+$12.00", "−$3.50".
func Signed(v float64) string {
	if v >= 0 {
		return "+" + Dollars(v)
	}
	return "−" + Dollars(-v)
}

// Cores writes millicores as cores: "0", "500m", "2", "3.9", "976".
func Cores(m int64) string {
	switch {
	case m == 0:
		return "0"
	case m < 1000 && m > -1000:
		return fmt.Sprintf("%dm", m)
	case m%1000 == 0:
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatFloat(float64(m)/1000, 'f', 1, 64)
}

// GiB writes bytes in GiB: "4Gi", "6.7Gi".
func GiB(v int64) string {
	g := float64(v) / (1 << 30)
	if g == math.Trunc(g) {
		return fmt.Sprintf("%.0fGi", g)
	}
	return fmt.Sprintf("%.1fGi", g)
}

// Percent is a of b, "-" when b is not positive.
func Percent(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(a)/float64(b))
}
