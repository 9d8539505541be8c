package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fleetRepo is base's pools under base/ and one kustomize overlay per cluster under
// clusters/<name>/, each patching its NodePool's cpu limit to its own value.
func fleetRepo(files map[string]string, clusters int) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[strings.Replace(k, "pools/", "base/", 1)] = v
	}
	out["base/kustomization.yaml"] = "resources: [nodeclass.yaml, nodepool.yaml, app.yaml]\n"
	for i := 0; i < clusters; i++ {
		out[fmt.Sprintf("clusters/c%03d/kustomization.yaml", i)] = fmt.Sprintf(`resources: [../../base]
patches:
  - target: {kind: NodePool, name: default}
    patch: |
      - op: replace
        path: /spec/limits/cpu
        value: "%d"
`, 20+i)
	}
	return out
}

func fleetClusters(n int) []Cluster {
	cs := make([]Cluster, n)
	for i := range cs {
		cs[i] = Cluster{Name: fmt.Sprintf("c%03d", i), Path: fmt.Sprintf("clusters/c%03d", i)}
	}
	return cs
}

// TestFleetPlan: a change to the shared base touches every cluster; a change to one overlay
// only that one, the others listed as unchanged in one line; the summary has a row per touched
// cluster and the details follow.
func TestFleetPlan(t *testing.T) {
	base := fleetRepo(base, 3)
	head := fleetRepo(with(map[string]string{"pools/nodepool.yaml": pool("m5.2xlarge", "20", "web")}), 3)
	fp := MakeFleet(context.Background(), FleetInput{Base: tree("main@sha1:1111111", base), Head: tree("feature@sha1:2222222", head),
		Clusters: fleetClusters(3), Now: time.Now()})
	if fp.Changed() != 3 || fp.Failed() {
		t.Fatalf("a change to the base: %d clusters changed, failed %v: %+v", fp.Changed(), fp.Failed(), fp.Clusters)
	}
	md := fp.Markdown("prod", "test")
	for _, want := range []string{`<!-- karpool-plan fleet="prod" -->`, "### karpool plan for the fleet `prod` (3 clusters)",
		"Estimated node cost of the 3 clusters the change touches", "| c000 |", "| c002 |", "<details><summary>c001 (`clusters/c001/`)"} {
		if !strings.Contains(md, want) {
			t.Errorf("comment lacks %q:\n%s", want, md)
		}
	}

	one := fleetRepo(base, 3)
	one["clusters/c001/kustomization.yaml"] = strings.Replace(one["clusters/c001/kustomization.yaml"], `value: "21"`, `value: "2"`, 1)
	fp = MakeFleet(context.Background(), FleetInput{Base: tree("main@sha1:1111111", fleetRepo(base, 3)), Head: tree("feature@sha1:3333333", one),
		Clusters: fleetClusters(3), Now: time.Now()})
	if fp.Changed() != 1 || !fp.Clusters[0].Unchanged || fp.Clusters[1].Plan == nil || !fp.Clusters[2].Unchanged {
		t.Fatalf("a change to one overlay: %+v", fp.Clusters)
	}
	md = fp.Markdown("prod", "test")
	if !strings.Contains(md, "Unchanged (2): `c000`, `c002`.") || strings.Contains(md, "| c000 |") {
		t.Errorf("unchanged clusters not in one line:\n%s", md)
	}
	if n := len(fp.Clusters[1].Plan.Unschedulable); n == 0 || !strings.Contains(md, "| c001 | ") {
		t.Errorf("a 2-cpu limit strands no pod (%d) or the row is missing:\n%s", n, md)
	}
}

// TestFleetCommentFits: 200 touched clusters make one comment under MaxComment: every cluster
// in the summary, then as many details as fit and a note for the rest.
func TestFleetCommentFits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: plans 200 clusters")
	}
	head := with(map[string]string{"pools/nodepool.yaml": pool("m5.2xlarge", "20", "web")})
	fp := MakeFleet(context.Background(), FleetInput{Base: tree("b", fleetRepo(base, 200)), Head: tree("h", fleetRepo(head, 200)),
		Clusters: fleetClusters(200), Now: time.Now()})
	md := fp.Markdown("big", "test")
	if len(md) > MaxComment {
		t.Fatalf("comment of %d characters, over %d", len(md), MaxComment)
	}
	for i := 0; i < 200; i++ {
		if !strings.Contains(md, fmt.Sprintf("| c%03d |", i)) {
			t.Fatalf("cluster c%03d missing from the summary", i)
		}
	}
	shown := strings.Count(md, "<details>")
	if shown == 0 || shown == 200 || !strings.Contains(md, fmt.Sprintf("the details of %d more clusters were cut", 200-shown)) {
		t.Errorf("%d details shown; want some, and a note for the %d others", shown, 200-shown)
	}
}

// TestFleetGuardrails: the base's policy is checked per cluster; one blocked cluster blocks the
// fleet, and the summary names the rule.
func TestFleetGuardrails(t *testing.T) {
	b := fleetRepo(base, 2)
	b[".karpool/policy.yaml"] = policy("    - {name: budget, monthlyIncreaseAbove: \"10\"}\n")
	h := fleetRepo(with(map[string]string{"pools/nodepool.yaml": pool("m5.2xlarge", "20", "web")}), 2)
	h[".karpool/policy.yaml"] = b[".karpool/policy.yaml"]
	fp := MakeFleet(context.Background(), FleetInput{Base: tree("b", b), Head: tree("h", h), Clusters: fleetClusters(2), Now: time.Now()})
	if !fp.Blocked() || !strings.Contains(fp.Markdown("prod", "test"), "| ❌ budget |") {
		t.Errorf("blocked %v:\n%s", fp.Blocked(), fp.Markdown("prod", "test"))
	}
	fp = MakeFleet(context.Background(), FleetInput{Base: tree("b", b), Head: tree("h", h), Clusters: fleetClusters(2), Now: time.Now(), Labels: []string{"karpool/approve-cost"}})
	if fp.Blocked() || !strings.Contains(fp.Markdown("prod", "test"), "overridden: budget") {
		t.Errorf("with the override label: blocked %v", fp.Blocked())
	}
}
