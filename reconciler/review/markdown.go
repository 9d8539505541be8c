package review

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/internal/mdsafe"
	"github.com/karpool/karpool/internal/unimplemented"
	"github.com/karpool/karpool/manifests/validate"
)

// Marker starts every comment karpool writes, so that the one sticky comment of a pull
// request can be found again and updated; the path tells apart the comments of two PoolSyncs
// that watch different paths of one repository. The path is Go-quoted with "<" and ">" as
// \u escapes too, which Go reads back the same: without a ">", it cannot end the comment.
func Marker(path string) string {
	quoted := strings.NewReplacer("<", `\u003c`, ">", `\u003e`).Replace(strconv.Quote(cleanPath(path)))
	return "<!-- karpool-plan path=" + quoted + " -->"
}

// MaxComment is the longest comment written: GitHub refuses bodies of 65,536 characters and
// more, Gitea accepts them; the margin leaves room for the truncation note.
const MaxComment = 65_000

// Markdown renders the plan as a pull-request comment: the headline with the monthly delta, a
// Previous | New | Diff table per pool, pods that would not fit, nodes that would be replaced,
// validation errors with file:line, the rendered manifest diff and the assumptions, in at most
// MaxComment characters. Every string that the branch controls (names, messages, paths,
// revisions, the diff) goes through mdsafe, so that it adds nothing to the comment but text.
func (p *Plan) Markdown(version string) string {
	var pg page
	pg.block(Marker(p.Path) + "\n")
	pg.blockf("### karpool plan for %s\n\n", mdsafe.Code(cleanPath(p.Path)))
	pg.block(p.Headline() + "\n\n")
	pg.blockf("Base %s → head %s; %s.\n\n", mdsafe.Code(p.Base.Revision), mdsafe.Code(p.Head.Revision), p.workloadWords(mdsafe.Text))
	p.sections(&pg)
	tail := p.assumptions(version)
	room := MaxComment - len(tail)
	if pg.size > room {
		return pg.upTo(room-len(cutNote)) + cutNote + tail
	}
	return pg.upTo(room) + p.diffSection(room-pg.size) + tail
}

// sections are the plan's sections after its headline, the manifest diff aside: a fleet's
// comment shows them per cluster.
func (p *Plan) sections(pg *page) {
	p.errorsSection(pg)
	p.guardrailsSection(pg)
	p.poolTable(pg)
	p.unschedulableSection(pg)
	p.fittingSection(pg)
	p.replacedSection(pg)
	p.worstCaseSection(pg)
	p.awsSection(pg)
	p.unhonoredSection(pg)
	p.overlaysSection(pg)
}

// cutNote ends the sections kept when they do not all fit in a comment.
var cutNote = fmt.Sprintf("\n… the comment was cut to fit in %d characters: run `karpool plan` for the whole plan.\n\n", MaxComment)

// page is the comment's sections as blocks: a line of a list or a table, a paragraph, a
// heading, a whole fenced block. A block is kept whole or left out when the sections do not
// fit in a comment, so that a cut leaves no fence open.
type page struct {
	blocks []string
	size   int
}

func (pg *page) block(s string) {
	pg.blocks = append(pg.blocks, s)
	pg.size += len(s)
}

func (pg *page) blockf(format string, args ...any) { pg.block(fmt.Sprintf(format, args...)) }

// upTo is the blocks that fit in n characters, up to the first that does not.
func (pg *page) upTo(n int) string {
	var b strings.Builder
	for _, s := range pg.blocks {
		if b.Len()+len(s) > n {
			break
		}
		b.WriteString(s)
	}
	return b.String()
}

// Headline is the one line a reviewer reads first (Markdown). forge.Description makes the
// commit status of it by dropping "*" and "`": the base's error is in a code span, which needs
// no escapes that would show there.
func (p *Plan) Headline() string { return p.headline(mdsafe.Code) }

// headline is Headline with the base's error put in the text by code.
func (p *Plan) headline(code func(string) string) string {
	switch {
	case p.Failed():
		return "**❌ The head revision does not validate: PoolSync would apply nothing.**"
	case !p.Base.Planned():
		return fmt.Sprintf("**Estimated node cost: %s per month** (the base revision could not be planned: %s)", fleet.Monthly(p.Head.PerHour), code(clip(oneLine(p.Base.Error, p.Base.Findings), 200)))
	}
	before, after := p.Base.PerHour*fleet.HoursPerMonth, p.Head.PerHour*fleet.HoursPerMonth
	if math.Abs(after-before) < 0.005 {
		return fmt.Sprintf("**Estimated node cost: %s per month, unchanged.**", fleet.Dollars(after))
	}
	rel := ""
	if before > 0 {
		rel = strings.Replace(fmt.Sprintf(", %+.1f %%", 100*(after-before)/before), "-", "−", 1)
	}
	return fmt.Sprintf("**Estimated node cost: %s → %s per month (%s%s)**", fleet.Dollars(before), fleet.Dollars(after), fleet.Signed(after-before), rel)
}

// workloadWords says where the pods came from; text puts the workload's source and the
// region in the words.
func (p *Plan) workloadWords(text func(string) string) string {
	n := p.Head.Pods
	if !p.Head.Planned() {
		n = p.Base.Pods
	}
	src := "the workload objects under the path"
	if p.WorkloadAt != "" {
		src = text(p.WorkloadAt) + " and the workload objects under the path"
	}
	return fmt.Sprintf("%d pods from %s, priced in %s", n, src, text(p.Region))
}

func (p *Plan) errorsSection(pg *page) {
	if !p.Failed() {
		return
	}
	pg.block("#### Validation errors\n\n")
	if p.Head.Error != "" {
		for _, e := range strings.Split(p.Head.Error, "; ") {
			pg.blockf("- %s\n", mdsafe.Text(e))
		}
	}
	for _, f := range p.Head.Findings {
		where := f.File
		if f.Line > 0 {
			where = fmt.Sprintf("%s:%d:%d", f.File, f.Line, f.Column)
		}
		field := ""
		if f.Path != "" {
			field = " " + mdsafe.Code(f.Path)
		}
		pg.blockf("- %s %s%s: %s\n", mdsafe.Code(where), mdsafe.Text(f.Object), field, mdsafe.Text(f.Message))
	}
	pg.block("\n")
}

// poolTable compares the pools; it is left out when the head was not planned, since nothing of
// it would be applied.
func (p *Plan) poolTable(pg *page) {
	if len(p.Pools) == 0 || !p.Head.Planned() {
		return
	}
	pg.block("| NodePool | | Previous | New | Diff |\n|---|---|---|---|---|\n")
	for _, c := range p.Pools {
		for i, r := range poolRows(c, mdsafe.Text) {
			name := ""
			if i == 0 {
				name = "**" + mdsafe.Text(c.Name) + "**"
			}
			pg.blockf("| %s | %s | %s | %s | %s |\n", name, r[0], r[1], r[2], r[3])
		}
	}
	pg.block("\n")
}

// overlaysSection lists the head's NodeOverlays that the plan does not apply, or not fully.
func (p *Plan) overlaysSection(pg *page) {
	if len(p.Overlays) == 0 {
		return
	}
	pg.blockf("#### NodeOverlays not applied (%d)\n\n", len(p.Overlays))
	for _, o := range p.Overlays {
		pg.blockf("- %s\n", mdsafe.Text(o))
	}
	pg.block("\n")
}

// unhonoredSection names the fields the head's objects set and karpool does not act on, which
// the objects accept in Git: the plan above is made without them.
func (p *Plan) unhonoredSection(pg *page) {
	if len(p.Unhonored) == 0 {
		return
	}
	pg.blockf("#### Not done by karpool, accepted with %s (%d)\n\n", mdsafe.Code(unimplemented.OptOutAnnotation), len(p.Unhonored))
	for _, u := range p.Unhonored {
		pg.blockf("- %s %s: Karpenter %s.\n", mdsafe.Code(u.Object), mdsafe.Code(u.Field), mdsafe.Text(u.Karpenter))
	}
	pg.block("\n")
}

func (p *Plan) unschedulableSection(pg *page) {
	podSection(pg, "⚠️ Pods that would no longer fit", "", p.Unschedulable)
}

// fittingSection names the pods the base leaves Pending and the head places.
func (p *Plan) fittingSection(pg *page) {
	podSection(pg, "Pods that would fit again", ", Pending under the base", p.Fitting)
}

// podSection lists pods grouped by reason under a heading.
func podSection(pg *page, title, note string, pods []simulate.Unschedulable) {
	if len(pods) == 0 {
		return
	}
	pg.blockf("#### %s (%d)\n\n", title, len(pods))
	for _, g := range byReason(pods) {
		pg.blockf("- %s%s: %s\n", podList(g.pods, mdsafe.Code), note, mdsafe.Text(g.reason))
	}
	pg.block("\n")
}

func (p *Plan) replacedSection(pg *page) {
	if len(p.Replaced) == 0 {
		return
	}
	total := 0
	for _, r := range p.Replaced {
		total += r.Nodes
	}
	pg.blockf("#### Nodes that would be replaced (%d)\n\n", total)
	for _, r := range p.Replaced {
		budget := ""
		if r.Reason != "NodePoolRemoved" {
			budget = fmt.Sprintf("; the Drifted budget lets %d go at a time", r.AtATime)
		}
		pg.blockf("- **%s**: %d %s (%s): %s%s.\n", mdsafe.Text(r.Pool), r.Nodes, plural(r.Nodes, "node"), mdsafe.Text(r.Reason), mdsafe.Text(r.Message), budget)
	}
	pg.block("\n")
}

// worstCaseSection shows the head with every HPA at maxReplicas: whether the pools' limits
// stop the scale-up, and what it costs.
func (p *Plan) worstCaseSection(pg *page) {
	wc := p.WorstCase
	if wc == nil {
		return
	}
	pg.block("#### Worst case: every HorizontalPodAutoscaler at its maxReplicas\n\n")
	var scaled []string
	for _, h := range wc.HPAs {
		from := "not in the workload"
		if h.Replicas >= 0 {
			from = fmt.Sprint(h.Replicas)
		}
		scaled = append(scaled, fmt.Sprintf("%s %s → %d", mdsafe.Code(h.Target), from, h.Max))
	}
	pg.blockf("%s.\n\n", strings.Join(scaled, ", "))
	if wc.Error != "" {
		pg.blockf("Not planned: %s.\n\n", mdsafe.Text(wc.Error))
		return
	}
	pg.blockf("**%s per month** at the peak.\n\n", fleet.Monthly(wc.PerHour))
	pg.block("| NodePool | nodes | $/month | limit headroom |\n|---|---|---|---|\n")
	for i := range wc.Pools {
		ps := &wc.Pools[i]
		pg.blockf("| **%s** | %s | %s | %s |\n", mdsafe.Text(ps.Name), nodesCell(ps, mdsafe.Text), costCell(ps), headroom(ps))
	}
	pg.block("\n")
	if len(wc.Pending) == 0 {
		pg.block("The pools' limits leave room for the whole peak.\n\n")
		return
	}
	pg.blockf("⚠️ %d %s would stay Pending at the peak:\n\n", len(wc.Pending), plural(len(wc.Pending), "pod"))
	for _, g := range byReason(wc.Pending) {
		pg.blockf("- %s: %s\n", podList(g.pods, mdsafe.Code), mdsafe.Text(g.reason))
	}
	pg.block("\n")
}

// awsSection lists what the head's AWS resources change in the account, and who makes the
// changes (the controller on merge, or a person).
func (p *Plan) awsSection(pg *page) {
	a := p.AWS
	if a == nil {
		return
	}
	pg.blockf("#### AWS resources (spec.aws mode %s)\n\n", mdsafe.Text(a.Mode))
	switch {
	case a.Error != "":
		pg.blockf("⚠️ Not planned against the account: %s\n\n", mdsafe.Text(a.Error))
		return
	case len(a.Changes) == 0:
		pg.block("The account already holds every AWS resource the head revision needs.\n\n")
		return
	case a.Mode == "apply":
		pg.blockf("On merge, karpool makes these changes in the account before it applies the pools (%s):\n\n", mdsafe.Text(a.Summary))
	default:
		pg.blockf("The head revision needs these changes in the account (%s); spec.aws.mode is plan, so someone runs `karpool apply --aws` or sets it to apply:\n\n", mdsafe.Text(a.Summary))
	}
	pg.block(mdsafe.Fence("", strings.Join(a.Changes, "\n")) + "\n")
}

// diffSection is the rendered manifest diff in a <details> block, cut at a line to fit room
// characters; it is left out when not even the note that it was cut fits.
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
	head := fmt.Sprintf("<details><summary>Rendered manifests: %s</summary>\n\n", strings.Join(parts, ", "))
	const foot = "\n</details>\n\n"
	var diff strings.Builder
	for _, o := range p.Objects {
		diff.WriteString(o.Diff)
	}
	text := diff.String()
	block := mdsafe.Fence("diff", text)
	if len(head)+len(block)+len(foot) > room {
		// A part of the diff needs no longer a fence than all of it.
		fences := len(block) - len(text)
		const note = "… diff cut to fit the comment: run `karpool plan --output text` for all of it\n"
		keep := room - len(head) - fences - len(note) - len(foot)
		if keep < 0 {
			return ""
		}
		block = mdsafe.Fence("diff", cutAtLine(text, keep)+note)
	}
	return head + block + foot
}

// assumptions is the comment's tail, which is always kept: the region is clipped so that it
// stays short.
func (p *Plan) assumptions(version string) string {
	var b strings.Builder
	b.WriteString("<details><summary>Assumptions</summary>\n\n")
	fmt.Fprintf(&b, "- Prices: karpool's embedded EC2 catalog for %s (on-demand list prices; spot prices are a snapshot), each node with its EBS volumes; %d hours a month.\n", mdsafe.Text(clip(p.Region, 100)), int(fleet.HoursPerMonth))
	b.WriteString("- Sizing follows the pods' resource requests, not their usage; each revision places the whole workload on new nodes with karpool's scheduling engine.\n")
	b.WriteString("- Replacements apply karpool's drift rules to the nodes the base revision would run.\n")
	b.WriteString("\n</details>\n\n")
	fmt.Fprintf(&b, "<sub>karpool plan %s</sub>\n", mdsafe.Text(version))
	return b.String()
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

// podList names the first pods, each put in the text by name.
func podList(pods []string, name func(string) string) string {
	shown := pods
	if len(shown) > 5 {
		shown = shown[:5]
	}
	names := make([]string, len(shown))
	for i, p := range shown {
		names[i] = name(p)
	}
	s := strings.Join(names, ", ")
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

// clip cuts s to at most n bytes, at a character, with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
