package nodeview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/karpool/karpool/internal/fleet"
)

// barWidth is the width of the cpu and memory bars, in cells.
const barWidth = 10

// Render writes the view as a table, one node per line, then the totals.
func Render(w io.Writer, v *View) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOOL\tTYPE\tCAPACITY\tZONE\t$/H\tCPU\tMEMORY\tPODS\tAGE\tSTATE")
	for _, n := range v.Nodes {
		price := "?"
		switch {
		case n.Priced && n.Estimated:
			price = "~" + fleet.Hourly(n.PerHour)
		case n.Priced:
			price = fleet.Hourly(n.PerHour)
		case n.InstanceType == "":
			price = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", n.Name, dash(n.NodePool), dash(n.InstanceType),
			dash(n.CapacityType), dash(n.Zone), price, bar(n.CPURequested, n.CPUAllocatable), bar(n.MemRequested, n.MemAllocatable),
			n.Pods, n.PodsAllocatable, age(time.Duration(n.AgeSeconds)*time.Second), n.State)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var volumes float64
	for _, n := range v.Nodes {
		volumes += n.VolumesPerHour
	}
	total := fmt.Sprintf("%d node%s  %s/h  %s/month (%d h)", len(v.Nodes), plural(len(v.Nodes)), fleet.Hourly(v.PerHour), fleet.Dollars(v.PerMonth), fleet.HoursPerMonth)
	if volumes > 0 {
		total += fmt.Sprintf(", EBS volumes %s/h of it", fleet.Hourly(volumes))
	}
	for _, n := range v.Nodes {
		if n.Estimated {
			total += "; ~ marks estimated prices (the catalog's spot prices)"
			break
		}
	}
	if v.Unpriced > 0 {
		total += fmt.Sprintf("; %d node%s not priced (offering not in the catalog)", v.Unpriced, plural(v.Unpriced))
	}
	if v.Pending > 0 {
		total += fmt.Sprintf("; %d pod%s pending", v.Pending, plural(v.Pending))
	}
	_, err := fmt.Fprintf(w, "\n%s\n", total)
	return err
}

// bar draws used against total in barWidth cells, with the percentage.
func bar(used, total int64) string {
	if total <= 0 {
		return strings.Repeat("░", barWidth) + "   -"
	}
	frac := min(float64(used)/float64(total), 1)
	full := int(frac*barWidth + 0.5)
	return strings.Repeat("█", full) + strings.Repeat("░", barWidth-full) + fmt.Sprintf(" %3.0f%%", 100*float64(used)/float64(total))
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
