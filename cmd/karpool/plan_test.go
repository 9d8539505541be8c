package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/reconciler/status"
)

// commitFiles writes files into the work tree and commits them all.
func commitFiles(t *testing.T, repo *gogit.Repository, dir, msg string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "test", Email: "test@example.com", When: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	if _, err := wt.Commit(msg, &gogit.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../examples/workshop", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// overlayRepo is a repository whose pools are a kustomize overlay: base/ holds the workshop
// pools, prod/ patches the NodePool to c5.xlarge and adds the inflate Deployment (5 replicas).
func overlayRepo(t *testing.T) (string, *gogit.Repository) {
	t.Helper()
	dir := t.TempDir()
	repo, err := gogit.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	inflate := strings.Replace(readExample(t, "workload/inflate.yaml"), "\n  replicas: 0\n", "\n  replicas: 5\n", 1)
	commitFiles(t, repo, dir, "base", map[string]string{
		"base/kustomization.yaml": readExample(t, "kustomization.yaml"),
		"base/ec2nodeclass.yaml":  readExample(t, "ec2nodeclass.yaml"),
		"base/nodepool.yaml":      readExample(t, "nodepool.yaml"),
		"prod/inflate.yaml":       inflate,
		"prod/kustomization.yaml": `resources: [../base, inflate.yaml]
patches:
  - target: {kind: NodePool, name: default}
    patch: |
      - op: replace
        path: /spec/template/spec/requirements/0/values
        value: [c5.xlarge]
`,
	})
	return dir, repo
}

// TestPipelinesAgreeOnAnOverlay: vet, simulate, plan and PoolSync's build read the same
// kustomize overlay the same way — the patched instance type everywhere, the same objects.
func TestPipelinesAgreeOnAnOverlay(t *testing.T) {
	dir, _ := overlayRepo(t)
	prod := filepath.Join(dir, "prod")

	out, err := run("vet", "--output", "json", prod)
	if err != nil {
		t.Fatalf("vet: %v\n%s", err, out)
	}
	var vetted struct {
		Checked  int   `json:"checked"`
		Findings []any `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &vetted); err != nil || vetted.Checked != 2 || len(vetted.Findings) != 0 {
		t.Fatalf("vet checked %d documents with findings %v (%v), want the 2 pool documents clean:\n%s", vetted.Checked, vetted.Findings, err, out)
	}

	out, err = run("simulate", "--pools", prod, "--workload", prod, "--output", "json")
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	var sim struct {
		NodeClaims []struct {
			InstanceType string   `json:"instanceType"`
			Pods         []string `json:"pods"`
		} `json:"nodeClaims"`
		TotalPerHour float64 `json:"totalPerHour"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sim); err != nil {
		t.Fatal(err)
	}
	for _, nc := range sim.NodeClaims {
		if nc.InstanceType != "c5.xlarge" {
			t.Errorf("simulate planned %s; the overlay allows only c5.xlarge", nc.InstanceType)
		}
	}

	out, err = run("plan", "--repo", dir, "--base", "HEAD", "--head", "HEAD", "--path", "prod", "--output", "json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var planned struct {
		Head struct {
			Pods    int     `json:"pods"`
			PerHour float64 `json:"perHour"`
		} `json:"head"`
		Pools []struct {
			Head struct {
				Groups []struct{ InstanceType string }
			} `json:"head"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(out), &planned); err != nil {
		t.Fatal(err)
	}
	if planned.Head.Pods != 5 || planned.Head.PerHour != sim.TotalPerHour || len(planned.Pools) != 1 ||
		len(planned.Pools[0].Head.Groups) == 0 || planned.Pools[0].Head.Groups[0].InstanceType != "c5.xlarge" {
		t.Errorf("plan's head %+v %+v differs from simulate's %.4f/h on c5.xlarge", planned.Head, planned.Pools, sim.TotalPerHour)
	}

	// PoolSync builds the fetched files with build.Build; the command line reads the work tree
	// with build.LoadDir. Both must give the same objects.
	files := map[string][]byte{}
	for _, name := range []string{"base/kustomization.yaml", "base/ec2nodeclass.yaml", "base/nodepool.yaml", "prod/inflate.yaml", "prod/kustomization.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	fromGit, err := build.Build(context.Background(), files, "prod")
	if err != nil {
		t.Fatal(err)
	}
	fromDisk, err := build.LoadDir(context.Background(), prod, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromGit) != 3 || len(fromDisk) != len(fromGit) {
		t.Fatalf("PoolSync's build has %d objects, the command line's %d; want 3", len(fromGit), len(fromDisk))
	}
	for i := range fromGit {
		a, _ := fromGit[i].Object.MarshalJSON()
		b, _ := fromDisk[i].Object.MarshalJSON()
		if string(a) != string(b) {
			t.Errorf("object %d differs:\n%s\n%s", i, a, b)
		}
	}
}

// TestPlanExitCodes: a head that does not validate exits 1 with the error at its file:line;
// a Deployment asking for 100,000,000 replicas likewise, at once; an unknown revision is an
// I/O error (2).
func TestPlanExitCodes(t *testing.T) {
	dir, repo := overlayRepo(t)
	commitFiles(t, repo, dir, "typo", map[string]string{
		"base/nodepool.yaml": strings.Replace(readExample(t, "nodepool.yaml"), "  limits:", "  limit:", 1),
	})
	out, err := run("plan", "--repo", dir, "--base", "HEAD~1", "--path", "prod", "--output", "markdown")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "`base/nodepool.yaml:31:3` NodePool/default `spec.limit`: unknown field") {
		t.Errorf("typo: exit %v, output:\n%s", err, out)
	}

	commitFiles(t, repo, dir, "huge", map[string]string{
		"base/nodepool.yaml": readExample(t, "nodepool.yaml"),
		"prod/inflate.yaml":  strings.Replace(readExample(t, "workload/inflate.yaml"), "\n  replicas: 0\n", "\n  replicas: 100000000\n", 1),
	})
	out, err = run("plan", "--repo", dir, "--base", "HEAD~2", "--path", "prod")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "prod/inflate.yaml:14:13: Deployment \"inflate\": spec.replicas asks for 100000000 pods") {
		t.Errorf("huge: exit %v, output:\n%s", err, out)
	}

	if _, err := run("plan", "--repo", dir, "--base", "no-such-branch"); err == nil || exitCode(err) != 2 {
		t.Errorf("unknown revision: %v, want exit 2", err)
	}
}

// TestPlanGuardrailExitCode: with a review policy in the base, a change past a blocking rule
// exits 3 and says which rule; the policy's override label (--label) lets it pass (exit 0).
func TestPlanGuardrailExitCode(t *testing.T) {
	dir, repo := overlayRepo(t)
	commitFiles(t, repo, dir, "policy", map[string]string{".karpool/policy.yaml": `apiVersion: karpool.dev/v1alpha1
kind: ReviewPolicy
metadata: {name: pools}
spec:
  overrideLabel: karpool/approve-cost
  rules:
    - {name: budget, monthlyIncreaseAbove: "50"}
`})
	commitFiles(t, repo, dir, "more pods", map[string]string{
		"prod/inflate.yaml": strings.Replace(readExample(t, "workload/inflate.yaml"), "\n  replicas: 0\n", "\n  replicas: 40\n", 1),
	})
	out, err := run("plan", "--repo", dir, "--base", "HEAD~1", "--path", "prod")
	if err == nil || exitCode(err) != 3 || !strings.Contains(err.Error(), "guardrail budget") || !strings.Contains(out, "blocked: 1 blocking rule fails") {
		t.Errorf("past the budget: exit %v (%v), output:\n%s", exitCode(err), err, out)
	}
	out, err = run("plan", "--repo", dir, "--base", "HEAD~1", "--path", "prod", "--label", "karpool/approve-cost")
	if err != nil || !strings.Contains(out, "overridden by the label karpool/approve-cost") {
		t.Errorf("with the override label: %v, output:\n%s", err, out)
	}
}

// TestPlanFleet: a Fleet file of two clusters (overlays of one base): a change to the base
// plans both, a change to one overlay plans it and says the other is unchanged; a fleet file
// that does not validate is refused at its line.
func TestPlanFleet(t *testing.T) {
	dir, repo := overlayRepo(t)
	inflate := strings.Replace(readExample(t, "workload/inflate.yaml"), "\n  replicas: 0\n", "\n  replicas: 5\n", 1)
	commitFiles(t, repo, dir, "staging", map[string]string{"staging/kustomization.yaml": "resources: [../base, inflate.yaml]\n", "staging/inflate.yaml": inflate})
	fleetFile := filepath.Join(t.TempDir(), "fleet.yaml")
	writeFile(t, fleetFile, `apiVersion: karpool.dev/v1alpha1
kind: Fleet
metadata: {name: shop}
spec:
  clusters:
    - {name: prod, path: prod}
    - {name: staging, path: staging}
`)
	commitFiles(t, repo, dir, "bigger limit in prod", map[string]string{"prod/kustomization.yaml": `resources: [../base, inflate.yaml]
patches:
  - target: {kind: NodePool, name: default}
    patch: |
      - op: replace
        path: /spec/template/spec/requirements/0/values
        value: [c5.2xlarge]
`})
	out, err := run("plan", "--repo", dir, "--base", "HEAD~1", "--fleet", fleetFile)
	if err != nil || !strings.Contains(out, "fleet plan of 2 clusters (1 changed)") || !strings.Contains(out, "staging: unchanged") || !strings.Contains(out, "prod: Estimated node cost") {
		t.Errorf("a change to prod's overlay: %v\n%s", err, out)
	}
	md, err := run("plan", "--repo", dir, "--base", "HEAD~1", "--fleet", fleetFile, "--output", "markdown")
	if err != nil || !strings.Contains(md, "| prod |") || !strings.Contains(md, "Unchanged (1): `staging`.") {
		t.Errorf("markdown: %v\n%s", err, md)
	}
	writeFile(t, fleetFile, "apiVersion: karpool.dev/v1alpha1\nkind: Fleet\nmetadata: {name: shop}\nspec:\n  clusters:\n    - {name: prod, path: prod, workload: a.yaml, statusBranch: status}\n")
	if out, err := run("plan", "--repo", dir, "--base", "HEAD~1", "--fleet", fleetFile); err == nil || exitCode(err) != 1 || !strings.Contains(err.Error()+out, "fleet.yaml:6:") {
		t.Errorf("an invalid fleet file: exit %d (%v)\n%s", exitCode(err), err, out)
	}
}

// TestPlanReadsTheStatusSnapshot: --status-branch finds the snapshot of the PoolSync whose
// path is --path on the status branch and plans it, next to the repository's own workload.
func TestPlanReadsTheStatusSnapshot(t *testing.T) {
	dir, repo := overlayRepo(t)
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&gogit.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("karpool-status"), Create: true}); err != nil {
		t.Fatal(err)
	}
	snapshot := `apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 7
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      nodeSelector: {type: karpenter}
      containers: [{name: c0, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	commitFiles(t, repo, dir, "status", map[string]string{
		"prod/" + status.ReportFile:   `{"poolSync": "prod", "path": "./prod"}`,
		"prod/" + status.WorkloadFile: snapshot,
		"other/" + status.ReportFile:  `{"poolSync": "other", "path": "other"}`,
	})
	out, err := run("plan", "--repo", dir, "--base", "master", "--head", "master", "--path", "prod", "--status-branch", "karpool-status", "--output", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var planned struct {
		Head struct{ Pods int } `json:"head"`
		From string             `json:"workloadSource"`
	}
	if err := json.Unmarshal([]byte(out), &planned); err != nil {
		t.Fatal(err)
	}
	// 7 pods of the snapshot, 5 of the overlay's inflate.
	if planned.Head.Pods != 12 || !strings.Contains(planned.From, "prod/workload.yaml of karpool-status@sha1:") {
		t.Errorf("planned %+v, want the snapshot's 7 pods and inflate's 5", planned)
	}
	if _, err := run("plan", "--repo", dir, "--base", "master", "--path", "elsewhere", "--status-branch", "karpool-status"); err == nil || !strings.Contains(err.Error(), `no status of a PoolSync with path "elsewhere"`) {
		t.Errorf("unknown path: %v", err)
	}
}
