package main

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/config"
)

// TestPlanNeverPrintsURLCredentials: karpool plan names the repository without the token that
// --repo carries, or the work tree's origin remote that --post reads the repository from.
func TestPlanNeverPrintsURLCredentials(t *testing.T) {
	const secret = "SECRETTOKEN"
	check := func(what, out string, err error, want string) {
		t.Helper()
		if err == nil || strings.Contains(err.Error()+out, secret) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, output %q; want %q without the token", what, err, out, want)
		}
	}
	out, err := run("plan", "--repo", "https://"+secret+"@127.0.0.1:1/acme/pools.git", "--base", "main")
	check("--repo", out, err, "https://xxxxx@127.0.0.1:1/acme/pools.git")

	dir, repo := overlayRepo(t)
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"https://x-access-token:" + secret + "@127.0.0.1:1/pools"}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_TOKEN", "ghp_not-used")
	out, err = run("plan", "--repo", dir, "--base", "HEAD", "--path", "prod", "--post", "github", "--pr", "7")
	check("origin", out, err, `cannot read owner/name from "https://xxxxx@127.0.0.1:1/pools"`)
}
