package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/karpool/karpool/testbed/giteatest"
	"github.com/karpool/karpool/testbed/gittest"
)

// TestFleetPlanPostsToGitea, against a real Gitea: a repository with a shared base and two
// cluster overlays; a pull request changing one overlay gets one fleet comment (the plan's
// Markdown) and a commit status per cluster — the changed one planned, the other "unchanged" —
// which is what branch protection can require by name.
func TestFleetPlanPostsToGitea(t *testing.T) {
	srv := giteatest.Start(t)
	clone := srv.CreateRepo("fleet")
	repo := gittest.NewRepo(t, t.TempDir(), "fleet")
	inflate := strings.Replace(readExample(t, "workload/inflate.yaml"), "\n  replicas: 0\n", "\n  replicas: 5\n", 1)
	for name, content := range map[string]string{
		"base/kustomization.yaml":  readExample(t, "kustomization.yaml"),
		"base/ec2nodeclass.yaml":   readExample(t, "ec2nodeclass.yaml"),
		"base/nodepool.yaml":       readExample(t, "nodepool.yaml"),
		"prod/kustomization.yaml":  "resources: [../base, inflate.yaml]\n",
		"prod/inflate.yaml":        inflate,
		"stage/kustomization.yaml": "resources: [../base, inflate.yaml]\n",
		"stage/inflate.yaml":       inflate,
	} {
		repo.Write(name, content)
	}
	repo.CommitLocal("two clusters")
	push := srv.PushURL(clone)
	gittest.Git(t, repo.Work, "push", "-q", push, "main")
	gittest.Git(t, repo.Work, "checkout", "-q", "-b", "more-prod")
	repo.Write("prod/inflate.yaml", strings.Replace(inflate, "replicas: 5", "replicas: 40", 1))
	head := repo.CommitLocal("40 replicas in prod")
	gittest.Git(t, repo.Work, "push", "-q", push, "more-prod")
	pr := srv.OpenPullRequest("fleet", "more-prod", "main", "more prod")

	fleetFile := filepath.Join(t.TempDir(), "fleet.yaml")
	writeFile(t, fleetFile, "apiVersion: karpool.dev/v1alpha1\nkind: Fleet\nmetadata: {name: shop}\nspec:\n  clusters:\n    - {name: prod, path: prod}\n    - {name: stage, path: stage}\n")
	t.Setenv("GITEA_TOKEN", srv.Token)
	want, err := run("plan", "--repo", repo.Work, "--base", "main", "--head", "more-prod", "--fleet", fleetFile, "--output", "markdown")
	if err != nil {
		t.Fatalf("plan --fleet: %v\n%s", err, want)
	}
	if out, err := run("plan", "--repo", repo.Work, "--base", "main", "--head", "more-prod", "--fleet", fleetFile, "--output", "markdown",
		"--post", "gitea", "--pr", strconv.Itoa(pr), "--api-url", srv.URL, "--repository", srv.User+"/fleet"); err != nil {
		t.Fatalf("plan --fleet --post: %v\n%s", err, out)
	}
	comments := srv.Comments("fleet", pr)
	if len(comments) != 1 || strings.TrimSpace(comments[0].Body) != strings.TrimSpace(want) || !strings.Contains(want, "Unchanged (1): `stage`.") {
		t.Fatalf("comments %+v, want one equal to the fleet plan:\n%s", comments, want)
	}
	byContext := map[string]giteatest.Status{}
	for _, st := range srv.Statuses("fleet", head) {
		if _, seen := byContext[st.Context]; !seen { // newest first
			byContext[st.Context] = st
		}
	}
	if st := byContext["karpool/plan: prod"]; st.State != "success" || !strings.Contains(st.Description, "Estimated node cost") {
		t.Errorf("prod's status: %+v", st)
	}
	if st := byContext["karpool/plan: stage"]; st.State != "success" || st.Description != "unchanged" {
		t.Errorf("stage's status: %+v", st)
	}
}
