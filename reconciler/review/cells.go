package review

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/fleet"
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
	return fleet.Monthly(s.PerHour)
}

func costDiff(base, head *simulate.PoolSummary) string {
	var b, h float64
	if base != nil {
		b = base.PerHour
	}
	if head != nil {
		h = head.PerHour
	}
	d := (h - b) * fleet.HoursPerMonth
	if math.Abs(d) < 0.005 {
		return ""
	}
	return fleet.Signed(d)
}

// usage is "3.9 of 5.8 (67 %)": the pods' and daemonsets' requests against allocatable.
func usage(s *simulate.PoolSummary, r resource) string {
	if s == nil || s.Nodes == 0 {
		return "—"
	}
	if r == cpu {
		return fmt.Sprintf("%s of %s (%s)", fleet.Cores(s.ReqCPU+s.DaemonCPU), fleet.Cores(s.AllocCPU), fleet.Percent(s.ReqCPU+s.DaemonCPU, s.AllocCPU))
	}
	return fmt.Sprintf("%s of %s (%s)", fleet.GiB(s.ReqMem+s.DaemonMem), fleet.GiB(s.AllocMem), fleet.Percent(s.ReqMem+s.DaemonMem, s.AllocMem))
}

// headroom is what the pool's limits leave once its nodes are counted (Karpenter counts
// capacity against limits).
func headroom(s *simulate.PoolSummary) string {
	if s == nil {
		return "—"
	}
	var parts []string
	if s.LimitCPU >= 0 {
		parts = append(parts, fmt.Sprintf("cpu %s of %s", fleet.Cores(s.LimitCPU-s.CapCPU), fleet.Cores(s.LimitCPU)))
	}
	if s.LimitMem >= 0 {
		parts = append(parts, fmt.Sprintf("memory %s of %s", fleet.GiB(s.LimitMem-s.CapMem), fleet.GiB(s.LimitMem)))
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

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
