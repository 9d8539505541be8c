package review

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
)

// The table's cells. A nil summary is a pool absent from that revision.

type resource int

const (
	cpu resource = iota
	memory
)

// poolRows are a pool's rows of the comparison: what, previous, new, difference; text puts
// the instance and capacity types in the cells.
func poolRows(c PoolChange, text func(string) string) [][4]string {
	return [][4]string{
		{"nodes", nodesCell(c.Base, text), nodesCell(c.Head, text), countDiff(c.Base, c.Head)},
		{"$/month", costCell(c.Base), costCell(c.Head), costDiff(c.Base, c.Head)},
		{"cpu requested / allocatable", usage(c.Base, cpu), usage(c.Head, cpu), ""},
		{"memory requested / allocatable", usage(c.Base, memory), usage(c.Head, memory), ""},
		{"limit headroom", headroom(c.Base), headroom(c.Head), ""},
		{"cost / lower bound", ratio(c.Base), ratio(c.Head), ""},
	}
}

// nodesCell is "3 × t3.small on-demand", one line per instance type and capacity type, which
// come from the pool's requirements and are put in the cell by text.
func nodesCell(s *simulate.PoolSummary, text func(string) string) string {
	if s == nil {
		return "—"
	}
	if s.Nodes == 0 {
		return "none"
	}
	type key struct{ it, ct string }
	counts := map[key]int{}
	var order []key
	for _, g := range s.Groups {
		k := key{g.InstanceType, g.CapacityType}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k] += g.Count
	}
	sort.SliceStable(order, func(i, j int) bool { return counts[order[i]] > counts[order[j]] })
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d × %s %s", counts[k], text(k.it), text(k.ct))
	}
	return strings.Join(parts, "<br>")
}

func countDiff(base, head *simulate.PoolSummary) string {
	b, h := 0, 0
	if base != nil {
		b = base.Nodes
	}
	if head != nil {
		h = head.Nodes
	}
	if b == h {
		return ""
	}
	sign := "+"
	if h < b {
		sign = "−"
	}
	return fmt.Sprintf("%s%d %s", sign, abs(h-b), plural(abs(h-b), "node"))
}

func costCell(s *simulate.PoolSummary) string {
	if s == nil {
		return "—"
	}
	return monthly(s.PerHour)
}

func costDiff(base, head *simulate.PoolSummary) string {
	var b, h float64
	if base != nil {
		b = base.PerHour
	}
	if head != nil {
		h = head.PerHour
	}
	d := (h - b) * catalog.HoursPerMonth
	if math.Abs(d) < 0.005 {
		return ""
	}
	return signed(d)
}

// usage is "3.9 of 5.8 (67 %)": the pods' and daemonsets' requests against allocatable.
func usage(s *simulate.PoolSummary, r resource) string {
	if s == nil || s.Nodes == 0 {
		return "—"
	}
	if r == cpu {
		return fmt.Sprintf("%s of %s (%s)", cores(s.ReqCPU+s.DaemonCPU), cores(s.AllocCPU), percent(s.ReqCPU+s.DaemonCPU, s.AllocCPU))
	}
	return fmt.Sprintf("%s of %s (%s)", gib(s.ReqMem+s.DaemonMem), gib(s.AllocMem), percent(s.ReqMem+s.DaemonMem, s.AllocMem))
}

// headroom is what the pool's limits leave once its nodes are counted (Karpenter counts
// capacity against limits).
func headroom(s *simulate.PoolSummary) string {
	if s == nil {
		return "—"
	}
	var parts []string
	if s.LimitCPU >= 0 {
		parts = append(parts, fmt.Sprintf("cpu %s of %s", cores(s.LimitCPU-s.CapCPU), cores(s.LimitCPU)))
	}
	if s.LimitMem >= 0 {
		parts = append(parts, fmt.Sprintf("memory %s of %s", gib(s.LimitMem-s.CapMem), gib(s.LimitMem)))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, "<br>")
}

func ratio(s *simulate.PoolSummary) string {
	if s == nil || s.Bound <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f ×", s.PerHour/s.Bound)
}

func monthly(perHour float64) string { return dollars(perHour * catalog.HoursPerMonth) }

// dollars is "$1,234.56".
func dollars(v float64) string {
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

func signed(v float64) string {
	if v >= 0 {
		return "+" + dollars(v)
	}
	return "−" + dollars(-v)
}

// cores renders millicores as cores: "500m", "3.9", "976".
func cores(m int64) string {
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

func gib(v int64) string {
	g := float64(v) / (1 << 30)
	if g == math.Trunc(g) {
		return fmt.Sprintf("%.0fGi", g)
	}
	return fmt.Sprintf("%.1fGi", g)
}

func percent(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(a)/float64(b))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
