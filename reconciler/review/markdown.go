package review

import (
	"fmt"
	"math"
	"strings"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/reconciler/validate"
)

// Marker starts every comment karpool writes, so that the one sticky comment of a pull
// request can be found again and updated; the path tells apart the comments of two PoolSyncs
// that watch different paths of one repository.
func Marker(path string) string {
	return fmt.Sprintf("<!-- karpool-plan path=%q -->", cleanPath(path))
}

// MaxComment is the longest comment written: GitHub refuses bodies of 65,536 characters and
// more, Gitea accepts them; the margin leaves room for the truncation note.
const MaxComment = 65_000

// Markdown renders the plan as a pull-request comment: the headline with the monthly delta, a
// Previous | New | Diff table per pool, pods that would not fit, nodes that would be replaced,
// validation errors with file:line, the rendered manifest diff and the assumptions, in at most
// MaxComment characters.
func (p *Plan) Markdown(version string) string {
	var b strings.Builder
	b.WriteString(Marker(p.Path) + "\n")
	fmt.Fprintf(&b, "### karpool plan for `%s`\n\n", cleanPath(p.Path))
	b.WriteString(p.Headline() + "\n\n")
	fmt.Fprintf(&b, "Base `%s` → head `%s`; %s.\n\n", p.Base.Revision, p.Head.Revision, p.workloadWords())
	p.errorsSection(&b)
	p.poolTable(&b)
	p.unschedulableSection(&b)
	p.fittingSection(&b)
	p.replacedSection(&b)
	p.worstCaseSection(&b)
	p.awsSection(&b)
	tail := p.assumptions(version)
	diff := p.diffSection(MaxComment - b.Len() - len(tail))
	b.WriteString(diff)
	b.WriteString(tail)
	return capLength(b.String(), MaxComment)
}

// Headline is the one line a reviewer reads first (Markdown).
func (p *Plan) Headline() string {
	switch {
	case p.Failed():
		return "**❌ The head revision does not validate: PoolSync would apply nothing.**"
	case !p.Base.Planned():
		return fmt.Sprintf("**Estimated node cost: %s per month** (the base revision could not be planned: %s)", monthly(p.Head.PerHour), oneLine(p.Base.Error, p.Base.Findings))
	}
	before, after := p.Base.PerHour*catalog.HoursPerMonth, p.Head.PerHour*catalog.HoursPerMonth
	if math.Abs(after-before) < 0.005 {
		return fmt.Sprintf("**Estimated node cost: %s per month, unchanged.**", dollars(after))
	}
	rel := ""
	if before > 0 {
		rel = strings.Replace(fmt.Sprintf(", %+.1f %%", 100*(after-before)/before), "-", "−", 1)
	}
	return fmt.Sprintf("**Estimated node cost: %s → %s per month (%s%s)**", dollars(before), dollars(after), signed(after-before), rel)
}

func (p *Plan) workloadWords() string {
	n := p.Head.Pods
	if !p.Head.Planned() {
		n = p.Base.Pods
	}
	src := "the workload objects under the path"
	if p.WorkloadAt != "" {
		src = p.WorkloadAt + " and the workload objects under the path"
	}
	return fmt.Sprintf("%d pods from %s, priced in %s", n, src, p.Region)
}

func (p *Plan) errorsSection(b *strings.Builder) {
	if !p.Failed() {
		return
	}
	b.WriteString("#### Validation errors\n\n")
	if p.Head.Error != "" {
		for _, e := range strings.Split(p.Head.Error, "; ") {
			fmt.Fprintf(b, "- %s\n", mdEscape(e))
		}
	}
	for _, f := range p.Head.Findings {
		where := f.File
		if f.Line > 0 {
			where = fmt.Sprintf("%s:%d:%d", f.File, f.Line, f.Column)
		}
		field := ""
		if f.Path != "" {
			field = " `" + f.Path + "`"
		}
		fmt.Fprintf(b, "- `%s` %s%s: %s\n", where, f.Object, field, mdEscape(f.Message))
	}
	b.WriteString("\n")
}

// poolTable compares the pools; it is left out when the head was not planned, since nothing of
// it would be applied.
func (p *Plan) poolTable(b *strings.Builder) {
	if len(p.Pools) == 0 || !p.Head.Planned() {
		return
	}
	b.WriteString("| NodePool | | Previous | New | Diff |\n|---|---|---|---|---|\n")
	for _, c := range p.Pools {
		for i, r := range poolRows(c) {
			name := ""
			if i == 0 {
				name = "**" + c.Name + "**"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", name, r[0], r[1], r[2], r[3])
		}
	}
	b.WriteString("\n")
}

func (p *Plan) unschedulableSection(b *strings.Builder) {
	podSection(b, "⚠️ Pods that would no longer fit", "", p.Unschedulable)
}

// fittingSection names the pods the base leaves Pending and the head places.
func (p *Plan) fittingSection(b *strings.Builder) {
	podSection(b, "Pods that would fit again", ", Pending under the base", p.Fitting)
}

// podSection lists pods grouped by reason under a heading.
func podSection(b *strings.Builder, title, note string, pods []simulate.Unschedulable) {
	if len(pods) == 0 {
		return
	}
	fmt.Fprintf(b, "#### %s (%d)\n\n", title, len(pods))
	for _, g := range byReason(pods) {
		fmt.Fprintf(b, "- %s%s: %s\n", podList(g.pods), note, mdEscape(g.reason))
	}
	b.WriteString("\n")
}

func (p *Plan) replacedSection(b *strings.Builder) {
	if len(p.Replaced) == 0 {
		return
	}
	total := 0
	for _, r := range p.Replaced {
		total += r.Nodes
	}
	fmt.Fprintf(b, "#### Nodes that would be replaced (%d)\n\n", total)
	for _, r := range p.Replaced {
		fmt.Fprintf(b, "- **%s**: %d %s (%s): %s", r.Pool, r.Nodes, plural(r.Nodes, "node"), r.Reason, mdEscape(r.Message))
		if r.Reason != "NodePoolRemoved" {
			fmt.Fprintf(b, "; the Drifted budget lets %d go at a time", r.AtATime)
		}
		b.WriteString(".\n")
	}
	b.WriteString("\n")
}

// worstCaseSection shows the head with every HPA at maxReplicas: whether the pools' limits
// stop the scale-up, and what it costs.
func (p *Plan) worstCaseSection(b *strings.Builder) {
	wc := p.WorstCase
	if wc == nil {
		return
	}
	b.WriteString("#### Worst case: every HorizontalPodAutoscaler at its maxReplicas\n\n")
	var scaled []string
	for _, h := range wc.HPAs {
		from := "not in the workload"
		if h.Replicas >= 0 {
			from = fmt.Sprint(h.Replicas)
		}
		scaled = append(scaled, fmt.Sprintf("`%s` %s → %d", h.Target, from, h.Max))
	}
	fmt.Fprintf(b, "%s.\n\n", strings.Join(scaled, ", "))
	if wc.Error != "" {
		fmt.Fprintf(b, "Not planned: %s.\n\n", mdEscape(wc.Error))
		return
	}
	fmt.Fprintf(b, "**%s per month** at the peak.\n\n| NodePool | nodes | $/month | limit headroom |\n|---|---|---|---|\n", monthly(wc.PerHour))
	for i := range wc.Pools {
		ps := &wc.Pools[i]
		fmt.Fprintf(b, "| **%s** | %s | %s | %s |\n", ps.Name, nodesCell(ps), costCell(ps), headroom(ps))
	}
	b.WriteString("\n")
	if len(wc.Pending) == 0 {
		b.WriteString("The pools' limits leave room for the whole peak.\n\n")
		return
	}
	fmt.Fprintf(b, "⚠️ %d %s would stay Pending at the peak:\n\n", len(wc.Pending), plural(len(wc.Pending), "pod"))
	for _, g := range byReason(wc.Pending) {
		fmt.Fprintf(b, "- %s: %s\n", podList(g.pods), mdEscape(g.reason))
	}
	b.WriteString("\n")
}

// awsSection lists what the head's AWS resources change in the account, and who makes the
// changes (the controller on merge, or a person).
func (p *Plan) awsSection(b *strings.Builder) {
	a := p.AWS
	if a == nil {
		return
	}
	fmt.Fprintf(b, "#### AWS resources (spec.aws mode %s)\n\n", a.Mode)
	switch {
	case a.Error != "":
		fmt.Fprintf(b, "⚠️ Not planned against the account: %s\n\n", mdEscape(a.Error))
		return
	case len(a.Changes) == 0:
		b.WriteString("The account already holds every AWS resource the head revision needs.\n\n")
		return
	case a.Mode == "apply":
		fmt.Fprintf(b, "On merge, karpool makes these changes in the account before it applies the pools (%s):\n\n", a.Summary)
	default:
		fmt.Fprintf(b, "The head revision needs these changes in the account (%s); spec.aws.mode is plan, so someone runs `karpool apply --aws` or sets it to apply:\n\n", a.Summary)
	}
	fmt.Fprintf(b, "```\n%s\n```\n\n", strings.Join(a.Changes, "\n"))
}

// diffSection is the rendered manifest diff in a <details> block, cut to fit room characters.
func (p *Plan) diffSection(room int) string {
	if len(p.Objects) == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, o := range p.Objects {
		counts[o.Change]++
	}
	var parts []string
	for _, c := range []string{"change", "add", "remove"} {
		if counts[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[c], map[string]string{"change": "changed", "add": "added", "remove": "removed"}[c]))
		}
	}
	head := fmt.Sprintf("<details><summary>Rendered manifests: %s</summary>\n\n```diff\n", strings.Join(parts, ", "))
	foot := "```\n\n</details>\n\n"
	var body strings.Builder
	for _, o := range p.Objects {
		body.WriteString(strings.ReplaceAll(o.Diff, "```", "'''"))
	}
	room -= len(head) + len(foot)
	text := body.String()
	if len(text) > room {
		note := "… diff cut to fit the comment: run `karpool plan --output text` for all of it\n"
		text = cutAtLine(text, room-len(note)) + note
	}
	return head + text + foot
}

func (p *Plan) assumptions(version string) string {
	var b strings.Builder
	b.WriteString("<details><summary>Assumptions</summary>\n\n")
	fmt.Fprintf(&b, "- Prices: karpool's embedded EC2 catalog for %s (on-demand list prices; spot prices are a snapshot), each node with its EBS volumes; %d hours a month.\n", p.Region, int(catalog.HoursPerMonth))
	b.WriteString("- Sizing follows the pods' resource requests, not their usage; each revision places the whole workload on new nodes with karpool's scheduling engine.\n")
	b.WriteString("- Replacements apply karpool's drift rules to the nodes the base revision would run.\n")
	b.WriteString("\n</details>\n\n")
	fmt.Fprintf(&b, "<sub>karpool plan %s</sub>\n", version)
	return b.String()
}

// capLength cuts s to at most max characters at a line boundary, with a note.
func capLength(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := "\n\n… the comment was cut at " + fmt.Sprint(max) + " characters: run `karpool plan` for the whole plan.\n"
	return cutAtLine(s, max-len(note)) + note
}

func cutAtLine(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return ""
}

type reasonGroup struct {
	reason string
	pods   []string
}

func byReason(us []simulate.Unschedulable) []reasonGroup {
	idx := map[string]int{}
	var out []reasonGroup
	for _, u := range us {
		i, ok := idx[u.Reason]
		if !ok {
			i = len(out)
			idx[u.Reason] = i
			out = append(out, reasonGroup{reason: shortReason(u.Reason)})
		}
		out[i].pods = append(out[i].pods, u.Pod)
	}
	return out
}

// shortReason keeps the first reasons of a pod that fits no pool: with many pools, the engine
// gives one per pool.
func shortReason(r string) string {
	const shown = 4
	parts := strings.Split(r, "; ")
	if len(parts) <= shown {
		return r
	}
	return strings.Join(parts[:shown], "; ") + fmt.Sprintf("; and %d more reasons", len(parts)-shown)
}

func podList(pods []string) string {
	shown := pods
	if len(shown) > 5 {
		shown = shown[:5]
	}
	s := "`" + strings.Join(shown, "`, `") + "`"
	if len(pods) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(pods)-len(shown))
	}
	return s
}

func oneLine(err string, fs []validate.Finding) string {
	if err != "" {
		return err
	}
	if len(fs) > 0 {
		return fs[0].String()
	}
	return ""
}

func cleanPath(p string) string {
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		return "./"
	}
	return p + "/"
}

// mdEscape keeps a message from breaking a table or list: pipes and newlines.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
