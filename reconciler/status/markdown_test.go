package status

import (
	"maps"
	"strings"
	"testing"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/testbed/mdshape"
)

// reportOf is a report with every section, each string of which the repository or the cluster
// controls made by str from a, b and c; ready is the Ready condition's status, which decides
// whether the errors are shown.
func reportOf(str func(string) string, a, b, c, ready string) *Report {
	ab, bc, ca := str(a+b), str(b+c), str(c+a)
	a, b, c = str(a), str(b), str(c)
	r := &Report{PoolSync: a, Path: b, AppliedRevision: c, AttemptedRevision: ab, Ready: ready, Message: bc, Nodes: 3, PerHour: 0.3}
	r.Pools = []PoolStatus{
		{Pool: fleet.Pool{Name: a, Nodes: 3, Groups: []fleet.NodeGroup{{InstanceType: a, CapacityType: b, Zone: c, Count: 2}, {InstanceType: ca, CapacityType: bc, Zone: ab, Count: 1}},
			LimitCPU: -1, LimitMem: -1}, Rollout: ca, Drifted: 1, Blocked: map[string]int{b: 1, ab: 2}},
		{Pool: fleet.Pool{Name: bc, LimitCPU: 2000, LimitMem: -1}, Limits: Pair{CPU: "2"}},
	}
	r.AWS = &AWSReport{AWSStatus: v1alpha1.AWSStatus{Mode: v1alpha1.AWSMode(b), Revision: c, Changes: []string{a, bc, c}, Summary: ca}, Ready: "False", Message: ab}
	return r
}

func same(s string) string { return s }

// checkInert compares what the page of a, b and c and that of benign strings do: the hostile
// strings may add no element, HTML, link or text that the forge links or notifies.
func checkInert(t *testing.T, a, b, c, ready string) {
	t.Helper()
	md := reportOf(same, a, b, c, ready).Markdown()
	got, want := mdshape.Of(md), mdshape.Of(reportOf(mdshape.Benign(), a, b, c, ready).Markdown())
	if len(got.Triggers) > 0 || len(got.HTML) > 0 || !maps.Equal(got.Elements, want.Elements) {
		t.Fatalf("the page's shape changed: elements %v, HTML %q, links and mentions %q; want elements %v\n%s", got.Elements, got.HTML, got.Triggers, want.Elements, md)
	}
}

// TestMarkdownHostile: each hostile value as every string of a report adds nothing to the page,
// and an ordinary one reads as before.
func TestMarkdownHostile(t *testing.T) {
	for _, v := range mdshape.Hostile {
		for _, ready := range []string{"True", "False"} {
			checkInert(t, v, v, v, ready)
			checkInert(t, v, "pools", "main@sha1:abc", ready)
		}
	}
	md := reportOf(same, "default", "pools", "main@sha1:abc", "False").Markdown()
	for _, want := range []string{"# karpool status: PoolSync default\n", "- Path: `pools`\n- Applied revision: `main@sha1:abc`\n", "## NodePool default\n",
		"| default | pools | main@&#8288;sha1:abc | 2 |", "## Last errors\n\n```\npoolsmain@sha1:abc\n```\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("page lacks %q:\n%s", want, md)
		}
	}
}

// FuzzMarkdownIsInert: whatever strings a repository and cluster put in a report, its page
// does only what karpool's template does.
func FuzzMarkdownIsInert(f *testing.F) {
	for _, v := range mdshape.Hostile {
		f.Add(v, "pools", v+"\n"+v, false)
	}
	// A number alone before the template's "." started an ordered list.
	f.Add("00000000", "A000!", "", false)
	f.Fuzz(func(t *testing.T, a, b, c string, ready bool) {
		checkInert(t, a, b, c, map[bool]string{true: "True", false: "False"}[ready])
	})
}
