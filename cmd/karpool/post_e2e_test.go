package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/karpool/karpool/testbed/giteatest"
	"github.com/karpool/karpool/testbed/gittest"
)

func seedFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../examples/seeds/002-hpa-terraform", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestPlanPostsToGitea, against a real Gitea: seed 002's pools (t3.small, limits cpu 20) on
// main; a pull request switching to t3.medium and raising the limit gets one comment — the
// plan's Markdown, exactly — and a success status; another commit to it updates that comment
// (still one); a pull request with an invalid pool gets a failure status and the error with
// its file:line.
func TestPlanPostsToGitea(t *testing.T) {
	srv := giteatest.Start(t)
	clone := srv.CreateRepo("pools")
	work := t.TempDir()
	gittest.Git(t, work, "init", "-q", "-b", "main")
	write := func(name, content string) {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nodePool := seedFile(t, "nodepool.yaml")
	write("pools/nodepool.yaml", nodePool)
	write("pools/ec2nodeclass.yaml", seedFile(t, "ec2nodeclass.yaml"))
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-q", "-m", "seed 002 pools")
	gittest.Git(t, work, "remote", "add", "origin", srv.PushURL(clone))
	gittest.Git(t, work, "push", "-q", "origin", "main")

	// The workload: 12 pods of 500m and 1Gi, as a file outside the repository.
	wl := filepath.Join(t.TempDir(), "workload.yaml")
	if err := os.WriteFile(wl, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITEA_TOKEN", srv.Token)
	plan := func(head string, pr int, extra ...string) (string, error) {
		args := append([]string{"plan", "--repo", work, "--base", "main", "--head", head, "--path", "pools", "--workload", wl,
			"--output", "markdown"}, extra...)
		if pr > 0 {
			args = append(args, "--post", "gitea", "--pr", strconv.Itoa(pr), "--api-url", srv.URL, "--repository", srv.User+"/pools")
		}
		return run(args...)
	}

	gittest.Git(t, work, "checkout", "-q", "-b", "bigger")
	write("pools/nodepool.yaml", strings.Replace(strings.Replace(nodePool, `values: ["t3.small"]`, `values: ["t3.medium"]`, 1), "cpu: 20", "cpu: 40", 1))
	gittest.Git(t, work, "commit", "-q", "-am", "t3.medium, cpu 40")
	gittest.Git(t, work, "push", "-q", "origin", "bigger")
	pr := srv.OpenPullRequest("pools", "bigger", "main", "bigger nodes")

	want, err := plan("bigger", 0)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, want)
	}
	if out, err := plan("bigger", pr); err != nil {
		t.Fatalf("plan --post: %v\n%s", err, out)
	}
	comments := srv.Comments("pools", pr)
	if len(comments) != 1 || comments[0].User.Login != srv.User || strings.TrimSpace(comments[0].Body) != strings.TrimSpace(want) {
		t.Fatalf("comments %+v, want one by %s equal to the plan:\n%s", comments, srv.User, want)
	}
	for _, s := range []string{"t3.small on-demand", "t3.medium on-demand", "Estimated node cost: $", "of 40<br>memory"} {
		if !strings.Contains(want, s) {
			t.Errorf("the plan lacks %q:\n%s", s, want)
		}
	}
	head := gittest.Git(t, work, "rev-parse", "HEAD")
	if st := srv.Statuses("pools", head); len(st) == 0 || st[0].State != "success" || st[0].Context != "karpool/plan" || !strings.Contains(st[0].Description, "Estimated node cost") {
		t.Errorf("statuses of %s: %+v", head, st)
	}

	// Another commit: the same comment, updated.
	write("pools/nodepool.yaml", strings.Replace(strings.Replace(nodePool, `values: ["t3.small"]`, `values: ["t3.medium"]`, 1), "cpu: 20", "cpu: 48", 1))
	gittest.Git(t, work, "commit", "-q", "-am", "cpu 48")
	gittest.Git(t, work, "push", "-q", "origin", "bigger")
	if out, err := plan("bigger", pr); err != nil {
		t.Fatalf("plan --post again: %v\n%s", err, out)
	}
	again := srv.Comments("pools", pr)
	if len(again) != 1 || again[0].ID != comments[0].ID || !strings.Contains(again[0].Body, "of 48<br>memory") {
		t.Errorf("after another commit: %d comments (want the same one, updated): %+v", len(again), again)
	}

	// An invalid pool: exit 1, the error at its file:line, a failure status.
	gittest.Git(t, work, "checkout", "-q", "main")
	gittest.Git(t, work, "checkout", "-q", "-b", "broken")
	write("pools/nodepool.yaml", strings.Replace(nodePool, "  limits:", "  limit:", 1))
	gittest.Git(t, work, "commit", "-q", "-am", "misspelt limits")
	gittest.Git(t, work, "push", "-q", "origin", "broken")
	bad := srv.OpenPullRequest("pools", "broken", "main", "broken pool")
	out, err := plan("broken", bad)
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("invalid pool: %v, want exit 1\n%s", err, out)
	}
	line := 1 + strings.Count(nodePool[:strings.Index(nodePool, "  limits:")], "\n")
	located := "`pools/nodepool.yaml:" + strconv.Itoa(line) + ":3` NodePool/default `spec.limit`"
	if cs := srv.Comments("pools", bad); len(cs) != 1 || !strings.Contains(cs[0].Body, located) {
		t.Errorf("comments on the invalid pull request %+v, want one with %s", cs, located)
	}
	brokenHead := gittest.Git(t, work, "rev-parse", "HEAD")
	if st := srv.Statuses("pools", brokenHead); len(st) == 0 || st[0].State != "failure" {
		t.Errorf("statuses of the invalid head: %+v", st)
	}
}
