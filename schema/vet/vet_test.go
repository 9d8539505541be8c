package vet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
	"github.com/karpool/karpool/schema/vet"
)

var (
	poolOnce sync.Once
	pool     *schema.Pool
)

func opts() vet.Options {
	poolOnce.Do(func() {
		var err error
		if pool, err = schema.NewPool(0); err != nil {
			panic(err)
		}
	})
	return vet.Options{Pool: pool}
}

func run(t *testing.T, o vet.Options, paths ...string) *vet.Report {
	t.Helper()
	r, err := vet.Run(context.Background(), paths, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func text(t *testing.T, r *vet.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := vet.WriteReport(&b, r, "text"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var locRE = regexp.MustCompile(`^(.+):(\d+):(\d+): (error|warning): `)

// TestThreeInvalidOfSix: one run reports every error of every invalid document, each at
// file:line:col, and nothing about the valid ones.
func TestThreeInvalidOfSix(t *testing.T) {
	const file = "testdata/three-of-six.yaml"
	r := run(t, opts(), file)
	if r.Checked != 6 {
		t.Fatalf("checked %d documents, want 6", r.Checked)
	}
	if r.Errors() < 3 || r.Warnings() != 0 {
		t.Fatalf("%d errors, %d warnings; want 3 or more errors and no warnings:\n%s", r.Errors(), r.Warnings(), text(t, r))
	}
	// The lines of the invalid documents: documents 2, 4 and 6 of the file.
	invalid := docLines(t, file, 2, 4, 6)
	docsHit := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(text(t, r)), "\n") {
		if strings.HasPrefix(line, "    hint: ") {
			continue
		}
		m := locRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("finding without file:line:col: %q", line)
			continue
		}
		if m[1] != file {
			t.Errorf("finding in %s, want %s", m[1], file)
		}
		n := atoi(m[2])
		doc, ok := invalid(n)
		if !ok {
			t.Errorf("finding on line %d, outside the invalid documents: %s", n, line)
		}
		docsHit[doc] = true
	}
	if len(docsHit) != 3 {
		t.Errorf("findings on documents %v, want 2, 4 and 6", docsHit)
	}
}

// docLines returns a function telling which of the given documents (1-based) a line is in.
func docLines(t *testing.T, file string, want ...int) func(int) (int, bool) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	chunks := manifests.SplitDocuments(data)
	return func(line int) (int, bool) {
		for _, c := range chunks {
			end := c.Line + bytes.Count(c.Data, []byte("\n"))
			if line >= c.Line && line < end {
				for _, w := range want {
					if w == c.Index {
						return c.Index, true
					}
				}
				return c.Index, false
			}
		}
		return 0, false
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

const class = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: %s
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`

func nodePool(name, class string, extra string) string {
	return `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ` + name + `
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ` + class + `}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
` + extra
}

func findings(r *vet.Report, rule string) schema.Findings {
	var out schema.Findings
	for _, f := range r.Findings {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

func TestNodeClassRef(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "pools.yaml", strings.ReplaceAll(class, "%s", "default")+"---\n"+nodePool("a", "missing", ""))
	r := run(t, opts(), f)
	got := findings(r, "nodeclassref")
	if len(got) != 1 || got[0].Path != "spec.template.spec.nodeClassRef.name" || !strings.Contains(got[0].Hint, `"default"`) || got[0].Line != 18 {
		t.Fatalf("nodeClassRef findings %v", got)
	}
	o := opts()
	o.AllowExternalRefs = true
	if r := run(t, o, f); len(r.Findings) != 0 {
		t.Errorf("with --allow-external-refs: %v", r.Findings)
	}
	// A class that is there but invalid is not reported missing: its own errors say what to fix.
	invalid := write(t, dir, "invalid.yaml", strings.ReplaceAll(strings.ReplaceAll(class, "%s", "default"), "KarpenterNodeRole-demo", `"role/*"`)+"---\n"+nodePool("a", "default", ""))
	r = run(t, opts(), invalid)
	if got := findings(r, "nodeclassref"); len(got) != 0 || len(r.Findings) == 0 {
		t.Errorf("a pool naming an invalid class: nodeClassRef findings %v among %v; want none, and the class's own errors", got, r.Findings)
	}
}

func TestDuplicates(t *testing.T) {
	dir := t.TempDir()
	a := write(t, dir, "a.yaml", strings.ReplaceAll(class, "%s", "default")+"---\n"+nodePool("same", "default", ""))
	b := write(t, dir, "sub/b.yaml", nodePool("same", "default", "  weight: 3\n"))
	r := run(t, opts(), dir)
	got := findings(r, "duplicate")
	if len(got) != 1 || !strings.Contains(got[0].Message, a+":") && !strings.Contains(got[0].Message, b+":") {
		t.Fatalf("duplicate findings %v", got)
	}
}

func TestOverlappingPools(t *testing.T) {
	dir := t.TempDir()
	base := strings.ReplaceAll(class, "%s", "default")
	f := write(t, dir, "pools.yaml", base+"---\n"+nodePool("a", "default", "")+"---\n"+nodePool("b", "default", ""))
	got := findings(run(t, opts(), f), "overlapping-pools")
	if len(got) != 1 || got[0].Severity != schema.Warning || got[0].Name != "b" {
		t.Fatalf("overlap findings %v", got)
	}
	// Different weights, or exclusive requirements: no warning.
	f = write(t, dir, "weights.yaml", base+"---\n"+nodePool("a", "default", "  weight: 10\n")+"---\n"+nodePool("b", "default", ""))
	if got := findings(run(t, opts(), f), "overlapping-pools"); len(got) != 0 {
		t.Errorf("weights: %v", got)
	}
	spot := strings.Replace(nodePool("b", "default", ""), "values: [on-demand]", "values: [spot]", 1)
	f = write(t, dir, "exclusive.yaml", base+"---\n"+nodePool("a", "default", "")+"---\n"+spot)
	if got := findings(run(t, opts(), f), "overlapping-pools"); len(got) != 0 {
		t.Errorf("exclusive: %v", got)
	}
	gt := func(name, op, v string) string {
		return nodePool(name, "default", "") + "        - {key: karpenter.k8s.aws/instance-cpu, operator: " + op + ", values: [\"" + v + "\"]}\n"
	}
	f = write(t, dir, "ranges.yaml", base+"---\n"+gt("small", "Lt", "8")+"---\n"+gt("big", "Gt", "16"))
	if got := findings(run(t, opts(), f), "overlapping-pools"); len(got) != 0 {
		t.Errorf("disjoint ranges: %v", got)
	}
	f = write(t, dir, "ranges2.yaml", base+"---\n"+gt("small", "Lt", "8")+"---\n"+gt("big", "Gt", "4"))
	if got := findings(run(t, opts(), f), "overlapping-pools"); len(got) != 1 {
		t.Errorf("overlapping ranges: %v", got)
	}
}

func TestNegativeLimits(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "pools.yaml", strings.ReplaceAll(class, "%s", "default")+"---\n"+nodePool("a", "default", "  limits:\n    cpu: -4\n    memory: \"-1Gi\"\n    pods: 10\n"))
	got := findings(run(t, opts(), f), "limits")
	if len(got) != 2 || got[0].Path != "spec.limits.cpu" || got[1].Path != "spec.limits.memory" {
		t.Fatalf("limits findings %v", got)
	}
}

func TestLints(t *testing.T) {
	// Seed 002 calls /etc/eks/bootstrap.sh on AL2023, and names its instance profile by a
	// Terraform placeholder: warnings, errors with --strict.
	r := run(t, opts(), "../../examples/seeds/002-hpa-terraform")
	got := findings(r, "al2023-bootstrap")
	if len(got) != 1 || got[0].Severity != schema.Warning || got[0].Path != "spec.userData" || r.Errors() != 0 {
		t.Fatalf("seed 002: %v", r.Findings)
	}
	if got := findings(r, "instance-profile"); len(got) != 1 || got[0].Severity != schema.Warning || got[0].Path != "spec.instanceProfile" || got[0].Line != 21 {
		t.Fatalf("seed 002's instance profile: %v", r.Findings)
	}
	o := opts()
	o.Strict = true
	if r := run(t, o, "../../examples/seeds/002-hpa-terraform"); r.Errors() != 2 {
		t.Errorf("--strict: %v", r.Findings)
	}

	dir := t.TempDir()
	spot := strings.Replace(nodePool("spot", "default", ""), "values: [on-demand]}", "values: [spot]}\n        - {key: node.kubernetes.io/instance-type, operator: In, values: [t3.medium]}", 1)
	never := nodePool("never", "default", "  weight: 5\n  disruption:\n    consolidateAfter: Never\n    budgets: [{nodes: \"1\"}]\n")
	f := write(t, dir, "pools.yaml", strings.ReplaceAll(class, "%s", "default")+"---\n"+spot+"---\n"+never)
	r = run(t, opts(), f)
	if got := findings(r, "spot-single-type"); len(got) != 1 || got[0].Name != "spot" {
		t.Errorf("spot-single-type: %v", r.Findings)
	}
	if got := findings(r, "never-with-budgets"); len(got) != 1 || got[0].Name != "never" {
		t.Errorf("never-with-budgets: %v", r.Findings)
	}
}

func TestRetiredAPIs(t *testing.T) {
	r := run(t, opts(), "../../examples/seeds/004-weasel", "../../examples/seeds/000-spot-dedicated")
	got := findings(r, "deprecated-api")
	if len(got) != 4 {
		t.Fatalf("deprecated-api findings %v", r.Findings)
	}
	for _, f := range got {
		if !strings.Contains(f.Message, "run `karpool migrate "+f.File+"`") {
			t.Errorf("message %q does not name the command", f.Message)
		}
	}
	if r.Skipped != 2 {
		t.Errorf("skipped %d documents of other kinds, want the 2 Deployments of seed 000", r.Skipped)
	}
}

func TestStdinAndNulls(t *testing.T) {
	o := opts()
	// `labels:` with nothing after it is null: the API server drops it, and so does vet.
	o.Stdin = strings.NewReader(strings.ReplaceAll(class, "%s", "default") + "---\n" + nodePool("a", "default", "  limits:\n") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	r := run(t, o, "-")
	if len(r.Findings) != 0 || r.Checked != 2 || r.Skipped != 1 {
		t.Fatalf("stdin: %d checked, %d skipped, %v", r.Checked, r.Skipped, r.Findings)
	}
}

func TestKustomize(t *testing.T) {
	r := run(t, opts(), "testdata/kustomize")
	var lines []string
	for _, f := range r.Findings {
		lines = append(lines, f.String())
	}
	want := []string{
		// In the base, found in both builds, reported once, in the base's file.
		"testdata/kustomize/base/nodepool.yaml:16:16: error: spec.template.spec.requirements[1].key",
		// Set by the overlay's patch: reported on the resource in its source file.
		"testdata/kustomize/base/nodepool.yaml:5:1: error: spec.disruption.consolidationPolicy",
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no finding %q in\n  %s", w, strings.Join(lines, "\n  "))
		}
	}
	if len(r.Findings) != 2 {
		t.Errorf("%d findings, want 2:\n  %s", len(r.Findings), strings.Join(lines, "\n  "))
	}
}

func TestKustomizeRefusesRemoteAndOutside(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "remote/kustomization.yaml", "resources:\n  - github.com/example/pools//base?ref=v1\n  - https://example.com/pool.yaml\n")
	r := run(t, opts(), filepath.Join(dir, "remote"))
	if got := findings(r, "kustomize"); len(got) != 2 || got[0].Line != 2 || !strings.Contains(got[0].Message, "remote location") {
		t.Fatalf("remote: %v", r.Findings)
	}
	write(t, dir, "outside/pool.yaml", nodePool("a", "default", ""))
	write(t, dir, "inside/kustomization.yaml", "resources:\n  - ../outside\n")
	r = run(t, opts(), filepath.Join(dir, "inside"))
	if got := findings(r, "kustomize"); len(got) != 1 || !strings.Contains(got[0].Message, "points outside the repository") {
		t.Fatalf("outside: %v", r.Findings)
	}
}

// sharedPatchRepo is a repository whose overlay takes a base and a patch from outside its own
// directory, as PoolSync and Flux allow, and a second overlay whose patch lies outside the
// repository. reconciler/build's TestBuildSharesFilesInsideTheRepository builds the same shape.
var sharedPatchRepo = map[string]string{
	"pools/base/kustomization.yaml":    "resources:\n  - nodepool.yaml\n  - ec2nodeclass.yaml\n",
	"pools/patches/weight.json":        `[{"op": "add", "path": "/spec/weight", "value": 10}]`,
	"pools/prod/kustomization.yaml":    "resources:\n  - ../base\npatches:\n  - path: ../patches/weight.json\n    target: {kind: NodePool}\n",
	"pools/escape/kustomization.yaml":  "resources:\n  - ../base\npatches:\n  - path: ../../../weight.yaml\n",
	"pools/escape2/kustomization.yaml": "resources:\n  - ../base\n  - ../../../pool.yaml\n",
}

// TestKustomizeSharesFilesInsideTheRepository: vet builds kustomizations as PoolSync does, so a
// patch from a sibling directory is applied, and one outside the repository is refused (it is
// there on disk, next to the repository, but never read).
func TestKustomizeSharesFilesInsideTheRepository(t *testing.T) {
	top := t.TempDir()
	repo := filepath.Join(top, "repo")
	write(t, repo, ".git/HEAD", "ref: refs/heads/main\n")
	for name, content := range sharedPatchRepo {
		write(t, repo, name, content)
	}
	write(t, repo, "pools/base/nodepool.yaml", nodePool("a", "default", ""))
	write(t, repo, "pools/base/ec2nodeclass.yaml", strings.ReplaceAll(class, "%s", "default"))
	write(t, top, "weight.yaml", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\nspec:\n  weight: 999\n")
	write(t, top, "pool.yaml", nodePool("b", "default", ""))

	r := run(t, opts(), filepath.Join(repo, "pools/prod"))
	if len(r.Findings) != 0 || r.Checked != 2 {
		t.Fatalf("../ patch inside the repository: %d checked, %v", r.Checked, r.Findings)
	}
	// The patch is applied: a weight out of range that only it sets is reported.
	write(t, repo, "pools/patches/weight.json", `[{"op": "add", "path": "/spec/weight", "value": 1000}]`)
	if r = run(t, opts(), filepath.Join(repo, "pools/prod")); r.Errors() != 1 || !strings.Contains(r.Findings[0].Path, "spec.weight") {
		t.Fatalf("the patch is not applied: %v", r.Findings)
	}
	write(t, repo, "pools/patches/weight.json", sharedPatchRepo["pools/patches/weight.json"])
	for _, overlay := range []string{"escape", "escape2"} {
		r = run(t, opts(), filepath.Join(repo, "pools", overlay))
		got := findings(r, "kustomize")
		if len(got) != 1 || got[0].Line != 4 && got[0].Line != 3 || !strings.Contains(got[0].Message, "points outside the repository") ||
			got[0].File != filepath.Join(repo, "pools", overlay, "kustomization.yaml") {
			t.Fatalf("%s: %v", overlay, r.Findings)
		}
	}
	// Outside a Git work tree the repository is the directory given to vet.
	if err := os.RemoveAll(filepath.Join(repo, ".git")); err != nil {
		t.Fatal(err)
	}
	if r = run(t, opts(), filepath.Join(repo, "pools")); len(findings(r, "kustomize")) != 2 || r.Checked != 4 {
		t.Fatalf("without .git, from pools: %d checked, %v", r.Checked, r.Findings)
	}
	if r = run(t, opts(), filepath.Join(repo, "pools/prod")); len(findings(r, "kustomize")) != 2 {
		t.Fatalf("without .git, from pools/prod (../base and ../patches are outside): %v", r.Findings)
	}
}

func TestOutputFormats(t *testing.T) {
	r := run(t, opts(), "testdata/three-of-six.yaml")
	var b bytes.Buffer
	if err := vet.WriteReport(&b, r, "github"); err != nil {
		t.Fatal(err)
	}
	ghRE := regexp.MustCompile(`^::error file=testdata/three-of-six\.yaml,line=\d+,col=\d+,title=karpool vet%3A [a-z-]+::[^\n]+$`)
	sc := bufio.NewScanner(&b)
	n := 0
	for sc.Scan() {
		n++
		if !ghRE.MatchString(sc.Text()) {
			t.Errorf("not a GitHub annotation: %q", sc.Text())
		}
	}
	if n != r.Errors() {
		t.Errorf("%d annotations for %d errors", n, r.Errors())
	}

	b.Reset()
	if err := vet.WriteReport(&b, r, "json"); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Findings []schema.Finding
		Errors   int
		Checked  int
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Errors != r.Errors() || len(out.Findings) != len(r.Findings) || out.Checked != 6 || out.Findings[0].Line == 0 {
		t.Errorf("json: %+v", out)
	}
	if err := vet.WriteReport(&b, r, "yaml"); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestLimits(t *testing.T) {
	dir := t.TempDir()
	o := opts()
	o.Limits = manifests.Limits{MaxBytes: 1000}
	big := write(t, dir, "big.yaml", strings.Repeat("# padding\n", 200))
	r := run(t, o, big)
	if got := findings(r, "limits"); len(got) != 1 {
		t.Fatalf("size cap: %v", r.Findings)
	}
	bomb := write(t, dir, "bomb.yaml", aliasBomb)
	r = run(t, opts(), bomb)
	if got := findings(r, "limits"); len(got) != 1 || !strings.Contains(got[0].Message, "aliases") {
		t.Fatalf("alias bomb: %v", r.Findings)
	}
	deep := write(t, dir, "deep.yaml", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: "+strings.Repeat("[", 200)+strings.Repeat("]", 200)+"\n")
	r = run(t, opts(), deep)
	if got := findings(r, "limits"); len(got) != 1 || !strings.Contains(got[0].Message, "deeper") {
		t.Fatalf("deep: %v", r.Findings)
	}
}

// aliasBomb is the "billion laughs": nine levels of ten aliases, 10^9 strings expanded.
const aliasBomb = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bomb}
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
spec: *i
`

func TestInputErrors(t *testing.T) {
	if _, err := vet.Run(context.Background(), []string{"testdata/no-such-file.yaml"}, opts()); err == nil {
		t.Error("missing file accepted")
	} else if _, ok := err.(*vet.InputError); !ok {
		t.Errorf("missing file: %T %v, want an InputError", err, err)
	}
	if _, err := vet.Run(context.Background(), nil, opts()); err == nil {
		t.Error("no paths accepted")
	}
}

func TestCheckBytes(t *testing.T) {
	r, err := vet.CheckBytes("out.yaml", []byte(strings.ReplaceAll(class, "%s", "default")+"---\n"+nodePool("a", "other", "")), opts())
	if err != nil {
		t.Fatal(err)
	}
	if got := findings(r, "nodeclassref"); len(got) != 1 || got[0].File != "out.yaml" {
		t.Fatalf("%v", r.Findings)
	}
}

// TestBudgetScheduleIsCron: vet rejects a schedule Karpenter's cron parser cannot read (the
// CRD's pattern accepts it), at the schedule's value, with a hint.
func TestBudgetScheduleIsCron(t *testing.T) {
	dir := t.TempDir()
	budget := "  disruption:\n    consolidateAfter: 5m\n    budgets:\n      - nodes: \"0\"\n        schedule: \"99 99 * * funday\"\n        duration: 8h\n"
	p := write(t, dir, "pool.yaml", strings.ReplaceAll(class, "%s", "default")+"---\n"+nodePool("a", "default", budget))
	r := run(t, opts(), p)
	got := findings(r, "cron")
	if len(got) != 1 || r.Errors() != 1 {
		t.Fatalf("want one cron finding, got %v", r.Findings)
	}
	classLines := strings.Count(class, "\n") + 1 // and the separator
	if f := got[0]; f.File != p || f.Line != classLines+15 || f.Column != 19 || !strings.Contains(f.Message, "above maximum (59)") || !strings.Contains(f.Hint, "@daily") {
		t.Fatalf("got %s (hint %q), want it at line %d, column 19", f, f.Hint, classLines+15)
	}
	if out := text(t, r); !strings.Contains(out, "0 9 * * mon-fri") {
		t.Errorf("text output does not carry the hint:\n%s", out)
	}
}
