package reconciler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/testbed/giteatest"
	"github.com/karpool/karpool/testbed/gittest"
)

const budgetPolicy = `apiVersion: karpool.dev/v1alpha1
kind: ReviewPolicy
metadata: {name: pools}
spec:
  overrideLabel: karpool/approve-cost
  rules:
    - {name: budget, monthlyIncreaseAbove: "20"}
    - {name: limits, limitRemoved: true}
`

// TestPullRequestGuardrails, against a real Gitea: main holds seed 002's pools and a review
// policy allowing $20 more a month. A pull request moving the pool to m5.2xlarge costs more:
// its karpool/plan status fails and the comment names the rule; the override label turns it
// green without a new commit. A pull request that only removes a limit fails the other rule, a
// pull request within the policy is green.
func TestPullRequestGuardrails(t *testing.T) {
	h := startController(t)
	srv := giteatest.Start(t)
	clone := srv.CreateRepo("pools")
	repo := gittest.NewRepo(t, t.TempDir(), "pools")
	seed := func(name string) string {
		data, err := os.ReadFile(filepath.Join("..", "examples", "seeds", "002-hpa-terraform", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	nodePool := seed("nodepool.yaml")
	repo.Write("pools/nodepool.yaml", nodePool)
	repo.Write("pools/ec2nodeclass.yaml", seed("ec2nodeclass.yaml"))
	repo.Write(".karpool/policy.yaml", budgetPolicy)
	repo.CommitLocal("seed 002 pools and a review policy")
	push := srv.PushURL(clone)
	gittest.Git(t, repo.Work, "push", "-q", push, "main")
	branch := func(name, pool string) (int, string) {
		gittest.Git(t, repo.Work, "checkout", "-q", "-b", name, "main")
		repo.Write("pools/nodepool.yaml", pool)
		sha := repo.CommitLocal(name)
		gittest.Git(t, repo.Work, "push", "-q", push, name)
		return srv.OpenPullRequest("pools", name, "main", name), sha
	}
	bigger, biggerSHA := branch("bigger", strings.Replace(nodePool, `values: ["t3.small"]`, `values: ["m5.2xlarge"]`, 1))
	unlimited, unlimitedSHA := branch("unlimited", strings.Replace(nodePool, "  limits:\n    cpu: 20\n    memory: 40Gi\n", "", 1))
	smaller, smallerSHA := branch("smaller", strings.Replace(nodePool, "cpu: 20", "cpu: 16", 1))

	h.webWorkload("guarded-workload", 12)
	secret := h.giteaToken(srv)
	h.poolSync("guarded", clone, "pools", func(ps *v1alpha1.PoolSync) {
		ps.Spec.Report = &v1alpha1.ReportSpec{PullRequests: &v1alpha1.PullRequestSpec{
			Provider: "gitea", APIURL: srv.URL, SecretRef: fluxmeta.LocalObjectReference{Name: secret}}}
	})
	wait := func(pr int, sha, state, status, comment string) {
		h.waitFor(2*time.Minute, fmt.Sprintf("pull request %d: status %s %q, comment with %q", pr, state, status, comment), func() (bool, string) {
			cs, st := srv.Comments("pools", pr), srv.Statuses("pools", sha)
			if len(cs) != 1 || len(st) == 0 {
				return false, fmt.Sprintf("%d comments, %d statuses", len(cs), len(st))
			}
			ok := st[0].State == state && st[0].Context == "karpool/plan" && strings.Contains(st[0].Description, status) && strings.Contains(cs[0].Body, comment)
			return ok, fmt.Sprintf("status %+v; comment:\n%s", st[0], cs[0].Body)
		})
	}
	wait(bigger, biggerSHA, "failure", "blocked by guardrail budget", "| budget | monthly increase at most \\$20.00 |")
	wait(unlimited, unlimitedSHA, "failure", "blocked by guardrail limits", "default: cpu, default: memory")
	wait(smaller, smallerSHA, "success", "Estimated node cost", "✅ pass")

	srv.Label("pools", bigger, "karpool/approve-cost")
	wait(bigger, biggerSHA, "success", "overridden by label karpool/approve-cost", "**Overridden** by the label `karpool/approve-cost`")
}
