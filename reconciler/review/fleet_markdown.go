package review

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/internal/mdsafe"
)

// FleetMarker starts every comment karpool writes for a fleet, as Marker does for one path.
func FleetMarker(name string) string {
	quoted := strings.NewReplacer("<", `\u003c`, ">", `\u003e`).Replace(strconv.Quote(name))
	return "<!-- karpool-plan fleet=" + quoted + " -->"
}

// Markdown renders the fleet's comment in at most MaxComment characters: a headline with the
// monthly delta of the clusters the change touches, a summary table of them, the unchanged
// ones in one line, then each touched cluster's plan in a collapsible block, as many as fit (a
// note says how many did not). Every string a branch controls goes through mdsafe.
func (fp *FleetPlan) Markdown(name, version string) string {
	var b strings.Builder
	b.WriteString(FleetMarker(name) + "\n")
	fmt.Fprintf(&b, "### karpool plan for the fleet %s (%d clusters)\n\n", mdsafe.Code(name), len(fp.Clusters))
	b.WriteString(fp.headline() + "\n\n")
	fmt.Fprintf(&b, "Base %s → head %s.\n\n", mdsafe.Code(fp.Base), mdsafe.Code(fp.Head))
	fp.summary(&b)
	tail := fmt.Sprintf("<sub>karpool plan %s</sub>\n", mdsafe.Text(version))
	cut := 0
	for _, c := range fp.Clusters {
		if c.Plan == nil {
			continue
		}
		block := c.details()
		if cut > 0 || b.Len()+len(block)+len(tail)+len(fleetCutNote) > MaxComment {
			cut++
			continue
		}
		b.WriteString(block)
	}
	if cut > 0 {
		fmt.Fprintf(&b, fleetCutNote, cut)
	}
	b.WriteString(tail)
	return b.String()
}

// fleetCutNote says how many clusters' details did not fit.
const fleetCutNote = "… the details of %d more clusters were cut to fit in one comment: run `karpool plan --fleet` for them.\n\n"

// headline sums the clusters the change touches and were planned.
func (fp *FleetPlan) headline() string {
	before, after, planned := 0.0, 0.0, 0
	for _, c := range fp.Clusters {
		if c.Plan != nil && c.Plan.Base.Planned() && c.Plan.Head.Planned() {
			before, after, planned = before+c.Plan.Base.PerHour, after+c.Plan.Head.PerHour, planned+1
		}
	}
	switch {
	case fp.Failed():
		return "**❌ The head revision does not validate for some clusters: their PoolSyncs would apply nothing.**"
	case fp.Changed() == 0:
		return "**No cluster's pools change.**"
	}
	return fmt.Sprintf("**Estimated node cost of the %d clusters the change touches: %s → %s per month (%s)**",
		planned, fleet.Monthly(before), fleet.Monthly(after), fleet.Signed((after-before)*fleet.HoursPerMonth))
}

// summary is one row per touched cluster and one line for the others.
func (fp *FleetPlan) summary(b *strings.Builder) {
	var unchanged []string
	rows := 0
	for _, c := range fp.Clusters {
		if c.Unchanged {
			unchanged = append(unchanged, mdsafe.Code(c.Name))
			continue
		}
		if rows == 0 {
			b.WriteString("| Cluster | Cost per month | Pods no longer fitting | Nodes replaced | Guardrails |\n| --- | --- | --- | --- | --- |\n")
		}
		rows++
		fmt.Fprintf(b, "| %s | %s |\n", mdsafe.Text(c.Name), c.cells())
	}
	if rows > 0 {
		b.WriteString("\n")
	}
	if len(unchanged) > 0 {
		fmt.Fprintf(b, "Unchanged (%d): %s.\n\n", len(unchanged), strings.Join(unchanged, ", "))
	}
}

// cells are a touched cluster's summary cells after its name.
func (c ClusterPlan) cells() string {
	p := c.Plan
	switch {
	case c.Error != "":
		return "not planned: " + mdsafe.Text(clip(c.Error, 200)) + " | | | "
	case p.Failed():
		return "❌ does not validate | | | "
	case !p.Base.Planned():
		return fleet.Monthly(p.Head.PerHour) + " (no base plan) | | | " + p.guardrailsCell()
	}
	replaced := 0
	for _, r := range p.Replaced {
		replaced += r.Nodes
	}
	cost := fmt.Sprintf("%s → %s (%s)", fleet.Monthly(p.Base.PerHour), fleet.Monthly(p.Head.PerHour), fleet.Signed((p.Head.PerHour-p.Base.PerHour)*fleet.HoursPerMonth))
	return fmt.Sprintf("%s | %d | %d | %s", mdsafe.Text(cost), len(p.Unschedulable), replaced, p.guardrailsCell())
}

// guardrailsCell sums up the policy's verdict on the plan.
func (p *Plan) guardrailsCell() string {
	g := p.Guardrails
	switch {
	case g == nil:
		return "—"
	case g.Error != "":
		return "⚠️ policy unreadable"
	}
	var failed []string
	for _, v := range p.Failing() {
		failed = append(failed, mdsafe.Text(v.Rule))
	}
	switch {
	case len(failed) > 0 && g.Overridden:
		return "overridden: " + strings.Join(failed, ", ")
	case len(failed) > 0:
		return "❌ " + strings.Join(failed, ", ")
	}
	return "✅"
}

// details is a touched cluster's plan in a collapsible block.
func (c ClusterPlan) details() string {
	var pg page
	p := c.Plan
	p.sections(&pg)
	return fmt.Sprintf("<details><summary>%s (%s): %s</summary>\n\n%s\n%s</details>\n\n", mdsafe.Text(c.Name), mdsafe.Code(cleanPath(c.Path)),
		strings.Trim(p.Headline(), "*"), p.workloadWords(mdsafe.Text)+".\n", pg.upTo(pg.size))
}
