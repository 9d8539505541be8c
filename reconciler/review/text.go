package review

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/internal/mdsafe"
	"github.com/karpool/karpool/internal/unimplemented"
)

// WriteJSON writes the plan for machines.
func (p *Plan) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Failed  bool `json:"failed"`
		Changed bool `json:"changed"`
		*Plan
	}{p.Failed(), p.Changed(), p})
}

// Text renders the plan for a terminal: the comment's content without Markdown, the whole
// manifest diff included, with what a branch could use to steer a terminal (escape sequences,
// bidirectional controls) made visible.
func (p *Plan) Text() string { return mdsafe.Visible(p.text()) }

func (p *Plan) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "karpool plan for %s: base %s → head %s\n", cleanPath(p.Path), p.Base.Revision, p.Head.Revision)
	fmt.Fprintf(&b, "%s\n%s.\n", strings.Trim(p.headline(asIs), "*"), capitalize(p.workloadWords(asIs)))
	if p.Failed() {
		b.WriteString("\nValidation errors:\n")
		if p.Head.Error != "" {
			for _, e := range strings.Split(p.Head.Error, "; ") {
				fmt.Fprintf(&b, "  %s\n", e)
			}
		}
		for _, f := range p.Head.Findings {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	for _, c := range p.Pools {
		if !p.Head.Planned() {
			break
		}
		fmt.Fprintf(&b, "\nNodePool %s\n", c.Name)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  \tprevious\tnew\tdiff\n")
		for _, r := range poolRows(c, asIs) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r[0], plain(r[1]), plain(r[2]), r[3])
		}
		tw.Flush()
	}
	if len(p.Unschedulable) > 0 {
		fmt.Fprintf(&b, "\nPods that would no longer fit (%d):\n", len(p.Unschedulable))
		for _, g := range byReason(p.Unschedulable) {
			fmt.Fprintf(&b, "  %s: %s\n", podList(g.pods, asIs), g.reason)
		}
	}
	if len(p.Fitting) > 0 {
		fmt.Fprintf(&b, "\nPods that would fit again (%d):\n", len(p.Fitting))
		for _, g := range byReason(p.Fitting) {
			fmt.Fprintf(&b, "  %s, Pending under the base: %s\n", podList(g.pods, asIs), g.reason)
		}
	}
	if len(p.Replaced) > 0 {
		b.WriteString("\nNodes that would be replaced:\n")
		for _, r := range p.Replaced {
			fmt.Fprintf(&b, "  %s: %d %s (%s): %s; %d at a time\n", r.Pool, r.Nodes, plural(r.Nodes, "node"), r.Reason, r.Message, r.AtATime)
		}
	}
	if wc := p.WorstCase; wc != nil {
		b.WriteString("\nWorst case, every HPA at maxReplicas:")
		for _, h := range wc.HPAs {
			fmt.Fprintf(&b, " %s → %d", h.Target, h.Max)
		}
		b.WriteString("\n")
		if wc.Error != "" {
			fmt.Fprintf(&b, "  not planned: %s\n", wc.Error)
		} else {
			fmt.Fprintf(&b, "  %s per month\n", fleet.Monthly(wc.PerHour))
			for i := range wc.Pools {
				ps := &wc.Pools[i]
				fmt.Fprintf(&b, "  %s: %s, %s, headroom %s\n", ps.Name, plain(nodesCell(ps, asIs)), costCell(ps), plain(headroom(ps)))
			}
			for _, g := range byReason(wc.Pending) {
				fmt.Fprintf(&b, "  pending: %s: %s\n", podList(g.pods, asIs), g.reason)
			}
		}
	}
	p.guardrailsText(&b)
	if len(p.Unhonored) > 0 {
		fmt.Fprintf(&b, "\nNot done by karpool, accepted with %s:\n", unimplemented.OptOutAnnotation)
		for _, u := range p.Unhonored {
			fmt.Fprintf(&b, "  %s %s: Karpenter %s\n", u.Object, u.Field, u.Karpenter)
		}
	}
	if len(p.Overlays) > 0 {
		b.WriteString("\nNodeOverlays not applied:\n")
		for _, o := range p.Overlays {
			fmt.Fprintf(&b, "  %s\n", o)
		}
	}
	if len(p.Objects) > 0 {
		fmt.Fprintf(&b, "\nRendered manifests: %d %s changed:\n", len(p.Objects), plural(len(p.Objects), "object"))
		for _, o := range p.Objects {
			b.WriteString(o.Diff)
		}
	} else {
		b.WriteString("\nNo change to the rendered manifests.\n")
	}
	return b.String()
}

func plain(cell string) string { return strings.ReplaceAll(cell, "<br>", ", ") }

// asIs puts a string in the text as it is: a terminal renders no Markdown.
func asIs(s string) string { return s }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
