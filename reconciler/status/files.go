package status

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/internal/mdsafe"
)

// File names on the status branch, under Dir.
const (
	PageFile     = "status.md"
	ReportFile   = "status.json"
	WorkloadFile = "workload.yaml"
)

// Files are the report's files, by path on the status branch.
func Files(in Input, w Workload) map[string][]byte {
	r := Build(in)
	dir := Dir(in.PoolSync)
	data, _ := json.MarshalIndent(r, "", "  ")
	header := fmt.Sprintf("Workload snapshot of PoolSync %s at %s: the pods on its pools' nodes and the pending ones,\n"+
		"one object per owner and pod shape, without images, commands, environment or volumes.\n"+
		"Read it with: karpool plan --status-branch BRANCH (or --workload this file).", r.PoolSync, r.AppliedRevision)
	return map[string][]byte{
		dir + "/" + PageFile:     []byte(r.Markdown()),
		dir + "/" + ReportFile:   append(data, '\n'),
		dir + "/" + WorkloadFile: Snapshot(header, r.pods, w),
	}
}

// Markdown is the page for people: applied revision, health, and per pool the nodes, what
// they hold, what the limits leave, cost, rollout and what blocks consolidation. Names,
// revisions, labels and messages come from the repository and the cluster, so they go through
// mdsafe: the forge renders them as text.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# karpool status: PoolSync %s\n\n", mdsafe.Text(r.PoolSync))
	fmt.Fprintf(&b, "- Path: %s\n- Applied revision: %s\n", mdsafe.Code(r.Path), mdsafe.Code(orNone(r.AppliedRevision)))
	if r.AttemptedRevision != "" && r.AttemptedRevision != r.AppliedRevision {
		fmt.Fprintf(&b, "- Last attempted revision: %s\n", mdsafe.Code(r.AttemptedRevision))
	}
	fmt.Fprintf(&b, "- Ready: %s\n", mdsafe.Text(r.Ready))
	if r.Ready != "True" && r.Message != "" {
		fmt.Fprintf(&b, "\n## Last errors\n\n%s", mdsafe.Fence("", r.Message))
	}
	fmt.Fprintf(&b, "\n**%d %s, %s per hour (%s per month)**; %d pending %s.\n", r.Nodes, plural(r.Nodes, "node"),
		fleet.Dollars(r.PerHour), fleet.Monthly(r.PerHour), r.PendingPods, plural(r.PendingPods, "pod"))
	r.awsMarkdown(&b)
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "\n## NodePool %s\n\n", mdsafe.Text(p.Name))
		if p.Nodes == 0 {
			b.WriteString("No nodes.\n")
		} else {
			b.WriteString("| Instance type | Capacity type | Zone | Nodes | $/hour |\n|---|---|---|---|---|\n")
			for _, g := range p.Groups {
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %s |\n", mdsafe.Text(g.InstanceType), mdsafe.Text(g.CapacityType), mdsafe.Text(g.Zone), g.Count, fleet.Dollars(g.PerHour))
			}
			fmt.Fprintf(&b, "\n- %d pods; cpu %s requested of %s allocatable, memory %s of %s\n", p.Pods,
				p.Requested.CPU, p.Allocatable.CPU, p.Requested.Memory, p.Allocatable.Memory)
			fmt.Fprintf(&b, "- %s per hour, %s per month", fleet.Dollars(p.PerHour), fleet.Monthly(p.PerHour))
			if p.Unpriced > 0 {
				fmt.Fprintf(&b, " (%d %s of unknown price not counted)", p.Unpriced, plural(p.Unpriced, "node"))
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "- Limit headroom: %s\n", headroom(&p))
		if p.Rollout != "" {
			fmt.Fprintf(&b, "- Rollout: %s\n", mdsafe.Text(p.Rollout))
		}
		if p.Drifted > 0 {
			fmt.Fprintf(&b, "- Drifted: %d %s to be replaced\n", p.Drifted, plural(p.Drifted, "node"))
		}
		if len(p.Blocked) > 0 {
			reasons := make([]string, 0, len(p.Blocked))
			for reason, n := range p.Blocked {
				reasons = append(reasons, fmt.Sprintf("%s (%d)", mdsafe.Text(reason), n))
			}
			sort.Strings(reasons)
			fmt.Fprintf(&b, "- Not consolidatable: %s\n", strings.Join(reasons, ", "))
		}
	}
	return b.String()
}

// awsMarkdown is the AWS section: what spec.aws found or did, with the changes as the plan
// prints them.
func (r *Report) awsMarkdown(b *strings.Builder) {
	if r.AWS == nil {
		return
	}
	fmt.Fprintf(b, "\n## AWS resources (spec.aws mode %s, revision %s)\n\n- AWSReady: %s", mdsafe.Text(string(r.AWS.Mode)), mdsafe.Code(r.AWS.Revision), mdsafe.Text(r.AWS.Ready))
	if r.AWS.Message != "" {
		fmt.Fprintf(b, " (%s)", mdsafe.Text(r.AWS.Message))
	}
	b.WriteString("\n")
	if len(r.AWS.Changes) > 0 {
		fmt.Fprintf(b, "\n%s%s.\n", mdsafe.Fence("", strings.Join(r.AWS.Changes, "\n")), mdsafe.Text(r.AWS.Summary))
	}
}

func headroom(p *PoolStatus) string {
	var parts []string
	if p.LimitCPU >= 0 {
		parts = append(parts, fmt.Sprintf("cpu %s of %s", scheduling.FormatQuantity(catalog.CPU, p.LimitCPU-p.CapCPU), p.Limits.CPU))
	}
	if p.LimitMem >= 0 {
		parts = append(parts, fmt.Sprintf("memory %s of %s", scheduling.FormatQuantity(catalog.Memory, p.LimitMem-p.CapMem), p.Limits.Memory))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
