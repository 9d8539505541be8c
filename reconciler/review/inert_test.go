package review

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/manifests/validate"
	"github.com/karpool/karpool/testbed/mdshape"
)

// sectionsOf picks a plan's sections from the bits of one byte: head failed, base not planned,
// worst case not planned, AWS not planned, no AWS changes; the top three bits add pools.
type sectionsOf uint8

// planOf is a plan with every section, each string of which the branch controls made by str
// from a, b and c.
func planOf(str func(string) string, a, b, c string, s sectionsOf) *Plan {
	ab, bc, ca := str(a+b), str(b+c), str(c+a)
	a, b, c = str(a), str(b), str(c)
	p := &Plan{Path: a, Region: b, WorkloadAt: c,
		Base: &Side{Revision: b, Pods: 3, PerHour: 0.1, planned: true, report: &simulate.Report{}},
		Head: &Side{Revision: c, Pods: 4, PerHour: 0.2, planned: true, report: &simulate.Report{}}}
	if s&1 != 0 {
		p.Head = &Side{Revision: c, Error: ab, Findings: []validate.Finding{
			{File: a, Line: 3, Column: 4, Object: b, Path: c, Message: ab}, {File: bc, Object: ca, Message: c}}}
	}
	if s&2 != 0 {
		p.Base = &Side{Revision: b, Error: bc, Findings: []validate.Finding{{File: a, Object: b, Message: c}}}
	}
	summary := func(name string) *simulate.PoolSummary {
		return &simulate.PoolSummary{Bound: 0.1, Pool: fleet.Pool{Name: name, Nodes: 3, PerHour: 0.1, LimitCPU: -1, LimitMem: -1, Groups: []fleet.NodeGroup{
			{InstanceType: a, CapacityType: b, Count: 2}, {InstanceType: c, CapacityType: ab, Count: 1}}}}
	}
	for i, name := range []string{a, b, c, ab, bc, ca, a, b}[:1+int(s>>5)] {
		p.Pools = append(p.Pools, PoolChange{Name: name, Base: summary(name), Head: summary([]string{c, a}[i%2])})
	}
	pods := []simulate.Unschedulable{{Pod: a, Reason: c}, {Pod: b, Reason: c}, {Pod: ab, Reason: bc}}
	p.Unschedulable, p.Fitting = pods, pods[1:]
	p.Replaced = []Replacement{{Pool: a, Nodes: 2, Reason: b, Message: c, AtATime: 1}, {Pool: ca, Nodes: 1, Reason: "NodePoolRemoved", Message: ab}}
	p.WorstCase = &WorstCase{HPAs: []simulate.HPA{{Target: a, Replicas: 2, Max: 9}, {Target: bc, Replicas: -1, Max: 3}},
		PerHour: 0.3, Pools: []simulate.PoolSummary{*summary(c)}, Pending: pods[:2]}
	if s&4 != 0 {
		p.WorstCase.Error = ca
	}
	p.AWS = &AWSChanges{Mode: b, Changes: []string{a, b, c}, Summary: ab}
	if s&8 != 0 {
		p.AWS.Error = c
	}
	if s&16 != 0 {
		p.AWS.Changes = nil
	}
	p.Objects = []ObjectChange{{ID: a, Change: "change", Diff: b}, {ID: c, Change: "add", Diff: ca}}
	p.Unhonored = []Unhonored{{Object: a, Field: b, Karpenter: c}}
	return p
}

// markerHTML is the marker as one HTML comment: without a ">" inside, nothing ends it early.
var markerHTML = regexp.MustCompile(`^<!-- karpool-plan path="[^<>\n]*" -->\n$`)

// checkInert renders the plan of a, b and c and of benign strings and compares what the two
// comments do: the hostile strings may add no link, image, HTML, heading, fenced block or
// other element, nor text that the forge links or notifies; the comment stays under the cap
// with every <details> closed.
func checkInert(t *testing.T, a, b, c string, s sectionsOf) {
	t.Helper()
	p := planOf(asIs, a, b, c, s)
	md := p.Markdown("fuzz")
	twin := planOf(mdshape.Benign(), a, b, c, s).Markdown("fuzz")
	got, want := mdshape.Of(md), mdshape.Of(twin)
	if len(md) > MaxComment || !strings.HasPrefix(md, Marker(p.Path)) {
		t.Fatalf("comment of %d characters, marker missing: %.300q", len(md), md)
	}
	if len(got.Triggers) > 0 || got.Elements["Link"]+got.Elements["AutoLink"]+got.Elements["Image"] > 0 {
		t.Fatalf("links %v or text that links or notifies %q in\n%s", got.Elements, got.Triggers, md)
	}
	if len(got.HTML) == 0 || !markerHTML.MatchString(got.HTML[0]) {
		t.Fatalf("the marker is not one HTML comment: %q", got.HTML)
	}
	got.HTML[0], want.HTML[0] = "marker", "marker"
	if open, closed := count(got.HTML, "<details>"), count(got.HTML, "</details>"); open != closed || open == 0 {
		t.Fatalf("%d <details> opened, %d closed in\n%s", open, closed, md)
	}
	// Tight list items vary with the strings: an error is listed per "; ", pods per reason.
	for _, k := range []string{"ListItem", "TextBlock"} {
		delete(got.Elements, k)
		delete(want.Elements, k)
	}
	whole := !strings.Contains(md, cutNote) && strings.Contains(md, "<summary>Rendered manifests")
	if whole && (!maps.Equal(got.Elements, want.Elements) || strings.Join(got.HTML, "") != strings.Join(want.HTML, "")) {
		t.Fatalf("the comment's shape changed:\ngot  %v %q\nwant %v %q\n%s", got.Elements, got.HTML, want.Elements, want.HTML, md)
	}
	for k, n := range got.Elements {
		if n > want.Elements[k] {
			t.Fatalf("%d %s where the cut benign comment has %d:\n%s", n, k, want.Elements[k], md)
		}
	}
	for _, h := range got.HTML {
		if count(got.HTML, h) > count(want.HTML, h) {
			t.Fatalf("HTML %q not in the benign comment %q", h, want.HTML)
		}
	}
}

// count is how many of html start with prefix.
func count(html []string, prefix string) int {
	n := 0
	for _, h := range html {
		if strings.HasPrefix(h, prefix) {
			n++
		}
	}
	return n
}

// TestMarkdownHostile: each hostile value as every string of a plan, in each kind of plan,
// adds nothing to the comment.
func TestMarkdownHostile(t *testing.T) {
	for _, v := range mdshape.Hostile {
		for _, s := range []sectionsOf{0, 1, 2, 4 | 8, 16 | 0xe0} {
			checkInert(t, v, v, v, s)
			checkInert(t, v, "default", "m5.large", s)
		}
	}
}

// TestMarkdownOrdinary: ordinary names read as before; a hostile one reads as itself.
func TestMarkdownOrdinary(t *testing.T) {
	md := planOf(asIs, "default", "m5.large", "inflate-7d9f", 0).Markdown("test")
	for _, want := range []string{"| **default** | nodes | 2 × default m5.large<br>1 × inflate-7d9f defaultm5.large |", "- `default`, `m5.large`: inflate-7d9f\n",
		"`default` 2 → 9", "Base `m5.large` → head `inflate-7d9f`", "#### AWS resources (spec.aws mode m5.large)"} {
		if !strings.Contains(md, want) {
			t.Errorf("comment lacks %q:\n%s", want, md)
		}
	}
	md = planOf(asIs, "@org/team </details>", "a`b", "x\n# h", 1).Markdown("test")
	for _, want := range []string{"- `@org/team </details>:3:4` a\\`b `x # h`: @&#8288;org/team &lt;/details&gt;a\\`b\n",
		"Base ``a`b`` → head `x # h`", `path="@org/team \u003c/details\u003e/"`} {
		if !strings.Contains(md, want) {
			t.Errorf("comment lacks %q:\n%s", want, md)
		}
	}
}

// TestMarkdownCut: a plan far over the cap keeps the marker, headline and assumptions, closes
// what it opens, and says it was cut; a diff is cut inside its fence.
func TestMarkdownCut(t *testing.T) {
	long := strings.Repeat("@a|`<b>` ", 3000)
	for _, s := range []sectionsOf{0, 1, 0xe0} {
		checkInert(t, "pools", long, long, s)
		md := planOf(asIs, "pools", long, long, s).Markdown("test")
		for _, want := range []string{cutNote, "**", "<summary>Assumptions</summary>", "<sub>karpool plan test</sub>\n"} {
			if !strings.Contains(md, want) {
				t.Errorf("sections %b: comment of %d characters lacks %q", s, len(md), want)
			}
		}
	}
	p := planOf(asIs, "a", "b", "c", 0)
	p.Objects[0].Diff = strings.Repeat("+ line ````\n", 10_000)
	md := p.Markdown("test")
	if !strings.Contains(md, "\n`````diff\n") || !strings.Contains(md, "… diff cut to fit the comment") || len(md) > MaxComment {
		t.Errorf("the cut diff is not fenced past its backticks, or not cut: %d characters", len(md))
	}
}

// FuzzMarkdownIsInert: whatever strings a branch puts in a plan, its comment does only what
// karpool's template does.
func FuzzMarkdownIsInert(f *testing.F) {
	for i, v := range mdshape.Hostile {
		f.Add(v, "default", fmt.Sprintf("%s\n%s", v, v), uint8(i))
	}
	f.Add("`", "``", "```", uint8(0xff))
	f.Add(strings.Repeat("@", 20_000), strings.Repeat("`", 5000), strings.Repeat("<a>", 9000), uint8(0xe0))
	f.Fuzz(func(t *testing.T, a, b, c string, s uint8) {
		checkInert(t, a, b, c, sectionsOf(s))
	})
}
