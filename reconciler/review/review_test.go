package review

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/fleet"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const nodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
`

// pool is seed 002's NodePool: t3.small, on-demand, limits cpu 20 and memory 40Gi.
func pool(types, cpuLimit, label string) string {
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels: {team: %s}
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: [%s]
        - key: karpenter.sh/capacity-type
          operator: In
          values: [on-demand]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  limits:
    cpu: "%s"
    memory: 40Gi
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5m
`, label, types, cpuLimit)
}

// app is a Deployment of n pods of 500m and 512Mi.
func app(n int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx
          resources: {requests: {cpu: 500m, memory: 512Mi}}
`, n)
}

func tree(rev string, files map[string]string) Tree {
	t := Tree{Revision: rev, Files: map[string][]byte{}}
	for name, content := range files {
		t.Files[name] = []byte(content)
	}
	return t
}

var base = map[string]string{
	"pools/kustomization.yaml": "resources: [nodeclass.yaml, nodepool.yaml, app.yaml]\n",
	"pools/nodeclass.yaml":     nodeClass,
	"pools/nodepool.yaml":      pool("t3.small", "20", "web"),
	"pools/app.yaml":           app(8),
}

// with is base with some files replaced.
func with(changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

func plan(t *testing.T, head map[string]string) *Plan {
	t.Helper()
	p, err := Make(context.Background(), Input{
		Base: tree("main@sha1:1111111", base), Head: tree("feature@sha1:2222222", head),
		Path: "pools", Now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// golden compares the comment with testdata/<name>.md (go test -update rewrites it).
func golden(t *testing.T, name string, p *Plan) string {
	t.Helper()
	got := p.Markdown("test")
	file := filepath.Join("testdata", name+".md")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./reconciler/review -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; got:\n%s", file, got)
	}
	return got
}

func monthlyOf(perHour float64) string { return fleet.Monthly(perHour) }

// TestIncrease: seed 002's pools move from t3.small to t3.medium and raise the cpu limit. The
// headline's numbers are the two revisions' plans, the table names both types, and drift
// replaces the base's nodes (the instance-type requirement no longer admits them).
func TestIncrease(t *testing.T) {
	p := plan(t, with(map[string]string{"pools/nodepool.yaml": pool("t3.medium", "40", "web")}))
	md := golden(t, "increase", p)
	if p.Failed() || !p.Base.Planned() || !p.Head.Planned() {
		t.Fatalf("plan failed: %+v %+v", p.Base, p.Head)
	}
	if p.Head.PerHour <= p.Base.PerHour {
		t.Errorf("t3.medium plan %.4f/h is not dearer than t3.small %.4f/h", p.Head.PerHour, p.Base.PerHour)
	}
	headline := fmt.Sprintf("**Estimated node cost: %s → %s per month (+", monthlyOf(p.Base.PerHour), monthlyOf(p.Head.PerHour))
	if !strings.Contains(md, headline) {
		t.Errorf("headline %q missing", headline)
	}
	c := p.Pools[0]
	if !strings.Contains(nodesCell(c.Base, asIs), "t3.small on-demand") || !strings.Contains(nodesCell(c.Head, asIs), "t3.medium on-demand") {
		t.Errorf("nodes %q → %q", nodesCell(c.Base, asIs), nodesCell(c.Head, asIs))
	}
	if len(p.Replaced) != 1 || p.Replaced[0].Nodes != c.Base.Nodes || p.Replaced[0].Reason != "RequirementsDrifted" {
		t.Errorf("replaced %+v, want all %d base nodes for their requirements", p.Replaced, c.Base.Nodes)
	}
	if len(p.Objects) != 1 || p.Objects[0].ID != "NodePool/default" || !strings.Contains(p.Objects[0].Diff, "+        - t3.medium") {
		t.Errorf("objects %+v", p.Objects)
	}
}

// TestDecrease: fewer replicas in the repository's own Deployment cost less; no node drifts.
func TestDecrease(t *testing.T) {
	p := plan(t, with(map[string]string{"pools/app.yaml": app(2)}))
	md := golden(t, "decrease", p)
	if p.Head.PerHour >= p.Base.PerHour || p.Head.Pods != 2 || p.Base.Pods != 8 {
		t.Errorf("head %d pods %.4f/h, base %d pods %.4f/h", p.Head.Pods, p.Head.PerHour, p.Base.Pods, p.Base.PerHour)
	}
	if !strings.Contains(md, "per month (−$") || len(p.Replaced) != 0 {
		t.Errorf("want a decrease and no replacement, got replaced %+v", p.Replaced)
	}
}

// TestNoChange: the same tree gives no object change and an unchanged cost.
func TestNoChange(t *testing.T) {
	p := plan(t, base)
	md := golden(t, "nochange", p)
	if p.Changed() || len(p.Replaced) != 0 || !strings.Contains(md, "unchanged.**") {
		t.Errorf("changed %v, replaced %+v", p.Changed(), p.Replaced)
	}
}

// TestValidationFailure: a misspelt field fails the head, at its file:line:col, and nothing is
// planned for it.
func TestValidationFailure(t *testing.T) {
	p := plan(t, with(map[string]string{"pools/nodepool.yaml": strings.Replace(pool("t3.small", "20", "web"), "requirements:", "requirement:", 1)}))
	md := golden(t, "invalid", p)
	if !p.Failed() || p.Head.Planned() {
		t.Fatal("a misspelt field was planned")
	}
	if !strings.Contains(md, "`pools/nodepool.yaml:10:7` NodePool/default `spec.template.spec.requirement`") {
		t.Errorf("no located error in\n%s", md)
	}
}

// TestUnschedulable: a limit below what the workload needs leaves pods Pending, named with the
// reason; the headroom shows the limit used up.
func TestUnschedulable(t *testing.T) {
	p := plan(t, with(map[string]string{"pools/nodepool.yaml": pool("t3.small", "4", "web")}))
	md := golden(t, "unschedulable", p)
	if len(p.Unschedulable) == 0 {
		t.Fatal("no pod left unschedulable under a 4-cpu limit")
	}
	for _, u := range p.Unschedulable {
		if !strings.HasPrefix(u.Pod, "shop/web-") || !strings.Contains(u.Reason, "limit") {
			t.Errorf("unschedulable %+v", u)
		}
	}
	if !strings.Contains(md, fmt.Sprintf("Pods that would no longer fit (%d)", len(p.Unschedulable))) {
		t.Error("section missing")
	}
	if h := p.Pools[0].Head; h.CapCPU > h.LimitCPU {
		t.Errorf("head capacity %dm above the limit %dm", h.CapCPU, h.LimitCPU)
	}
	// The other way round, the same pods fit again.
	back, err := Make(context.Background(), Input{Base: tree("b", with(map[string]string{"pools/nodepool.yaml": pool("t3.small", "4", "web")})),
		Head: tree("h", base), Path: "pools"})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Fitting) != len(p.Unschedulable) || len(back.Unschedulable) != 0 || !strings.Contains(back.Markdown("test"), fmt.Sprintf("Pods that would fit again (%d)", len(p.Unschedulable))) {
		t.Errorf("raising the limit: fitting %v, unschedulable %v", back.Fitting, back.Unschedulable)
	}
}

// TestTemplateDrift: a label change keeps the plan's cost but replaces every node, as many at
// a time as the default budget (10 %, rounded up) allows.
func TestTemplateDrift(t *testing.T) {
	p := plan(t, with(map[string]string{"pools/nodepool.yaml": pool("t3.small", "20", "shop")}))
	golden(t, "drift", p)
	n := p.Pools[0].Base.Nodes
	if len(p.Replaced) != 1 || p.Replaced[0].Reason != "NodePoolDrifted" || p.Replaced[0].Nodes != n {
		t.Fatalf("replaced %+v, want %d nodes for the template", p.Replaced, n)
	}
	if want := int(math.Ceil(float64(n) / 10)); p.Replaced[0].AtATime != want {
		t.Errorf("%d at a time, want %d", p.Replaced[0].AtATime, want)
	}
}

// TestTruncated: a change whose diff would not fit is cut at a line, with a note, and the
// comment keeps its marker, headline and assumptions under the cap.
func TestTruncated(t *testing.T) {
	head := with(nil)
	var res []string
	for i := 0; i < 400; i++ {
		name := fmt.Sprintf("cm%03d.yaml", i)
		res = append(res, name)
		head["pools/"+name] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%03d}\ndata: {text: %q}\n", i, strings.Repeat("x", 200))
	}
	head["pools/kustomization.yaml"] = "resources: [nodeclass.yaml, nodepool.yaml, app.yaml, " + strings.Join(res, ", ") + "]\n"
	p := plan(t, head)
	md := p.Markdown("test")
	if len(md) > MaxComment {
		t.Fatalf("%d characters, more than %d", len(md), MaxComment)
	}
	for _, want := range []string{Marker("pools"), "unchanged.**", "diff cut to fit the comment", "<summary>Assumptions</summary>", "Rendered manifests: 400 added"} {
		if !strings.Contains(md, want) {
			t.Errorf("%q missing", want)
		}
	}
	if strings.Count(md, "```") != 2 {
		t.Errorf("the diff block is not closed")
	}
}

// TestHPAWorstCase: with an HPA on the Deployment, the comment shows the head at maxReplicas:
// its cost, and the pods the pool's cpu limit would leave Pending.
func TestHPAWorstCase(t *testing.T) {
	hpa := `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 50
`
	head := with(map[string]string{
		"pools/hpa.yaml":           hpa,
		"pools/kustomization.yaml": "resources: [nodeclass.yaml, nodepool.yaml, app.yaml, hpa.yaml]\n",
	})
	p := plan(t, head)
	md := golden(t, "hpa", p)
	wc := p.WorstCase
	if wc == nil || len(wc.HPAs) != 1 || wc.HPAs[0].Target != "Deployment/shop/web" || wc.HPAs[0].Replicas != 8 || wc.HPAs[0].Max != 50 {
		t.Fatalf("worst case %+v", wc)
	}
	// 50 pods of 500m need 25 cpu; the pool's limit of 20 cpu stops the scale-up short.
	if len(wc.Pending) == 0 || !strings.Contains(wc.Pending[0].Reason, "limits exceeded") {
		t.Errorf("pending at the peak %+v, want pods stopped by the pool's limits", wc.Pending)
	}
	if ps := wc.Pools[0]; ps.CapCPU > ps.LimitCPU || ps.Pods+len(wc.Pending) != 50 {
		t.Errorf("peak pool %+v with %d pending", ps, len(wc.Pending))
	}
	if wc.PerHour <= p.Head.PerHour || !strings.Contains(md, "`Deployment/shop/web` 8 → 50") {
		t.Errorf("peak %.4f/h not above the head's %.4f/h, or the HPA line is missing", wc.PerHour, p.Head.PerHour)
	}
	if base := plan(t, base); base.WorstCase != nil {
		t.Error("a worst case without an HPA")
	}
}

// TestAWSSection: the head's AWS changes are listed with who makes them; an account that could
// not be read is said so; a PoolSync without spec.aws gets no section.
func TestAWSSection(t *testing.T) {
	p := plan(t, with(nil))
	if md := p.Markdown("test"); strings.Contains(md, "AWS resources") {
		t.Fatalf("a plan without spec.aws has an AWS section")
	}
	changes := []string{"+ IAM role GPUNodeRole", "+ IAM instance profile demo_0a1b"}
	for _, c := range []struct {
		aws  AWSChanges
		want []string
	}{
		{AWSChanges{Mode: "apply", Changes: changes, Summary: "2 to create, 0 to update, 0 to delete"},
			[]string{"On merge, karpool makes these changes", "(2 to create, 0 to update, 0 to delete)", "```\n+ IAM role GPUNodeRole\n+ IAM instance profile demo_0a1b\n```"}},
		{AWSChanges{Mode: "plan", Changes: changes, Summary: "2 to create, 0 to update, 0 to delete"},
			[]string{"spec.aws.mode is plan, so someone runs `karpool apply --aws`", "+ IAM role GPUNodeRole"}},
		{AWSChanges{Mode: "apply", Summary: "nothing to change"}, []string{"already holds every AWS resource"}},
		{AWSChanges{Mode: "plan", Error: "reading the account ID (sts:GetCallerIdentity): AccessDenied"}, []string{"⚠️ Not planned against the account: reading the account ID"}},
	} {
		p.AWS = &c.aws
		md := p.Markdown("test")
		for _, want := range append(c.want, "#### AWS resources (spec.aws mode "+c.aws.Mode+")") {
			if !strings.Contains(md, want) {
				t.Errorf("%+v: comment lacks %q:\n%s", c.aws, want, md)
			}
		}
	}
}

// TestTextCannotSteerATerminal: an escape sequence or a bidirectional override in a branch's
// error reaches the terminal as a visible replacement character.
func TestTextCannotSteerATerminal(t *testing.T) {
	p := &Plan{Path: "pools", Region: "us-east-1", Head: &Side{Revision: "head", Error: "x.yaml: \x1b[2K\x1b[1Ahidden \u202egnp.exe"}, Base: &Side{Revision: "base"}}
	out := p.Text()
	if strings.ContainsAny(out, "\x1b\u202e") || !strings.Contains(out, "\ufffd[2K") {
		t.Fatalf("the terminal output keeps the controls: %q", out)
	}
}

// TestUnhonoredFields: a field karpool does not act on fails the head; accepted in Git with the
// opt-out annotation, the plan is made without it and the comment says so, with what
// Karpenter would do.
func TestUnhonoredFields(t *testing.T) {
	placed := strings.Replace(nodeClass, "  role:", "  placementGroupSelector: {name: ml}\n  role:", 1)
	p := plan(t, with(map[string]string{"pools/nodeclass.yaml": placed}))
	if !p.Failed() || len(p.Unhonored) != 0 || !strings.Contains(p.Markdown("test"), "spec.placementGroupSelector") {
		t.Fatalf("placementGroupSelector without the annotation: failed %t, unhonored %v; want a validation error naming it", p.Failed(), p.Unhonored)
	}
	accepted := strings.Replace(placed, "  name: default\n", "  name: default\n  annotations: {karpool.dev/unimplemented-fields: ignore}\n", 1)
	p = plan(t, with(map[string]string{"pools/nodeclass.yaml": accepted}))
	if p.Failed() || !p.Head.Planned() {
		t.Fatalf("accepted placementGroupSelector: the head did not plan: %v %v", p.Head.Error, p.Head.Findings)
	}
	want := []Unhonored{{Object: "EC2NodeClass/default", Field: "spec.placementGroupSelector", Karpenter: "launches into the selected placement group and reports it in status"}}
	if !slices.Equal(p.Unhonored, want) {
		t.Fatalf("unhonored %v, want %v", p.Unhonored, want)
	}
	md, text := p.Markdown("test"), p.Text()
	for _, out := range []string{md, text} {
		if !strings.Contains(out, "Not done by karpool, accepted with") || !strings.Contains(out, "Karpenter launches into the selected placement group") {
			t.Errorf("the plan does not name the accepted field:\n%s", out)
		}
	}
}

// TestOverlaysInThePlan: a head adding a NodeOverlay that makes m5.large cheap is planned on
// m5.large when the cluster applies overlays; when its gate is off the plan ignores the
// overlay and the comment says so, as it names an overlay that conflicts.
func TestOverlaysInThePlan(t *testing.T) {
	overlay := func(name, price string) string {
		return fmt.Sprintf("---\napiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: %s}\nspec:\n  weight: 10\n  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]\n  price: %q\n", name, price)
	}
	head := with(map[string]string{
		"pools/kustomization.yaml": "resources: [nodeclass.yaml, nodepool.yaml, app.yaml, overlay.yaml]\n",
		"pools/nodepool.yaml":      pool("t3.small, m5.large", "20", "web"),
		"pools/overlay.yaml":       overlay("savings-plan", "0.001"),
	})
	types := func(p *Plan) map[string]int {
		out := map[string]int{}
		for _, nc := range p.Head.report.NodeClaims {
			out[nc.InstanceType]++
		}
		return out
	}
	planWith := func(head map[string]string, off string) *Plan {
		p, err := Make(context.Background(), Input{Base: tree("main@sha1:1111111", base), Head: tree("feature@sha1:2222222", head),
			Path: "pools", Now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), OverlaysOff: off})
		if err != nil || !p.Head.Planned() {
			t.Fatalf("plan: %v %+v", err, p)
		}
		return p
	}
	on := planWith(head, "")
	if got := types(on); got["m5.large"] == 0 || got["t3.small"] != 0 || len(on.Overlays) != 0 {
		t.Errorf("with the overlay applied: types %v, notes %q; want every node an m5.large", got, on.Overlays)
	}
	off := planWith(head, "the cluster's NodeOverlay feature gate is off")
	if got := types(off); got["m5.large"] != 0 {
		t.Errorf("with the overlay ignored: types %v; want the list prices' t3.small", got)
	}
	conflict := with(map[string]string{
		"pools/kustomization.yaml": head["pools/kustomization.yaml"], "pools/nodepool.yaml": head["pools/nodepool.yaml"],
		"pools/overlay.yaml": overlay("savings-plan", "0.001") + overlay("another", "0.002"),
	})
	for _, tc := range []struct {
		p    *Plan
		want string
	}{{off, "1 NodeOverlays not applied: the cluster's NodeOverlay feature gate is off"}, {planWith(conflict, ""), `NodeOverlay "another" is not applied (Conflict)`}} {
		for _, out := range []string{tc.p.Markdown("test"), tc.p.Text()} {
			if !strings.Contains(out, "NodeOverlays not applied") || !strings.Contains(out, tc.want) {
				t.Errorf("the plan does not say %q:\n%s", tc.want, out)
			}
		}
	}
}

// TestReservationUse: the cluster's class resolves a reservation of 2 t3.small; a head that
// lets the pool use reserved capacity plans 2 nodes into it (no more: the rest stay
// on-demand) and costs less than the base, which the comment shows.
func TestReservationUse(t *testing.T) {
	reserved := simulate.Reserved{"default": {{CapacityReservation: awsv1.CapacityReservation{ID: "cr-0123", InstanceType: "t3.small",
		AvailabilityZone: "us-east-1a", ReservationType: "default", State: "active"}, Available: 2}}}
	head := with(map[string]string{"pools/nodepool.yaml": strings.Replace(pool("t3.small", "20", "web"), "values: [on-demand]", "values: [reserved, on-demand]", 1)})
	p, err := Make(context.Background(), Input{
		Base: tree("main@sha1:1111111", base), Head: tree("feature@sha1:2222222", head),
		Path: "pools", Now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), Reserved: reserved,
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(s *Side) (reserved, other int) {
		for _, nc := range s.report.NodeClaims {
			if nc.CapacityType == "reserved" {
				reserved++
			} else {
				other++
			}
		}
		return reserved, other
	}
	baseReserved, baseOther := count(p.Base)
	headReserved, headOther := count(p.Head)
	if baseReserved != 0 || headReserved != 2 || headOther != baseOther-2 || p.Head.PerHour >= p.Base.PerHour {
		t.Fatalf("base %d reserved + %d, $%.4f/h; head %d reserved + %d, $%.4f/h; want the head to put 2 of the base's nodes into the reservation and cost less",
			baseReserved, baseOther, p.Base.PerHour, headReserved, headOther, p.Head.PerHour)
	}
	if md := p.Markdown("test"); !strings.Contains(md, "reserved") {
		t.Errorf("the comment does not show the reserved nodes:\n%s", md)
	}
}
