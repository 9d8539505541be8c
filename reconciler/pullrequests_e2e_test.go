package reconciler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/reconciler/review"
	"github.com/karpool/karpool/testbed/giteatest"
	"github.com/karpool/karpool/testbed/gittest"
)

// TestPullRequestsArePlanned: a PoolSync with spec.report.pullRequests plans the open pull
// request of a real Gitea that changes its path, against the cluster's workload (four Pending
// pods), and posts one comment and a commit status; a new commit to the pull request updates
// the same comment and gets its own status; a pull request from a fork is planned too.
func TestPullRequestsArePlanned(t *testing.T) {
	aws, withAWS := startAWS(t)
	h := startController(t, withAWS)
	srv := giteatest.Start(t)
	clone := srv.CreateRepo("pools")
	work := t.TempDir()
	seed := func(name string) string {
		data, err := os.ReadFile(filepath.Join("..", "examples", "seeds", "002-hpa-terraform", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	write := func(name, content string) {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nodePool := seed("nodepool.yaml")
	gittest.Git(t, work, "init", "-q", "-b", "main")
	write("pools/nodepool.yaml", nodePool)
	write("pools/ec2nodeclass.yaml", seed("ec2nodeclass.yaml"))
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-q", "-m", "seed 002 pools")
	gittest.Git(t, work, "remote", "add", "origin", srv.PushURL(clone))
	gittest.Git(t, work, "push", "-q", "origin", "main")
	gittest.Git(t, work, "checkout", "-q", "-b", "bigger")
	write("pools/nodepool.yaml", strings.Replace(nodePool, `values: ["t3.small"]`, `values: ["t3.medium"]`, 1))
	gittest.Git(t, work, "commit", "-q", "-am", "t3.medium")
	gittest.Git(t, work, "push", "-q", "origin", "bigger")
	pr := srv.OpenPullRequest("pools", "bigger", "main", "bigger nodes")

	// The cluster's workload: four pods for the seed's pool, Pending (no node has its label).
	h.webWorkload("pr-workload", 4)

	secret := h.giteaToken(srv)
	h.poolSync("reviewed", clone, "pools", func(ps *v1alpha1.PoolSync) {
		ps.Spec.Report = &v1alpha1.ReportSpec{PullRequests: &v1alpha1.PullRequestSpec{
			Provider: "gitea", APIURL: srv.URL, SecretRef: fluxmeta.LocalObjectReference{Name: secret}}}
		ps.Spec.AWS = &v1alpha1.AWSSpec{Region: aws.Region(), ClusterName: "demo", Mode: v1alpha1.AWSModePlan}
	})

	marker := review.Marker("pools")
	waitComment := func(pr int, sha, contains string) giteatest.Comment {
		var c giteatest.Comment
		h.waitFor(2*time.Minute, "the plan comment and status of "+sha[:8], func() (bool, string) {
			cs := srv.Comments("pools", pr)
			st := srv.Statuses("pools", sha)
			if len(cs) != 1 || !strings.Contains(cs[0].Body, marker) || !strings.Contains(cs[0].Body, contains) || len(st) == 0 {
				return false, fmt.Sprintf("%d comments, %d statuses", len(cs), len(st))
			}
			c = cs[0]
			return st[0].State == "success" && st[0].Context == "karpool/plan", fmt.Sprintf("status %+v", st[0])
		})
		return c
	}
	first := waitComment(pr, gittest.Git(t, work, "rev-parse", "HEAD"), "t3.medium on-demand")
	for _, want := range []string{"4 pods from the cluster's workload", "t3.small on-demand", "Estimated node cost: $",
		"#### AWS resources (spec.aws mode plan)", "+ SQS queue demo"} {
		if !strings.Contains(first.Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, first.Body)
		}
	}

	write("pools/nodepool.yaml", strings.Replace(strings.Replace(nodePool, `values: ["t3.small"]`, `values: ["t3.medium"]`, 1), "cpu: 20", "cpu: 36", 1))
	gittest.Git(t, work, "commit", "-q", "-am", "cpu 36")
	gittest.Git(t, work, "push", "-q", "origin", "bigger")
	second := waitComment(pr, gittest.Git(t, work, "rev-parse", "HEAD"), "of 36<br>memory")
	if second.ID != first.ID {
		t.Errorf("a new comment %d instead of updating %d", second.ID, first.ID)
	}

	// A pull request from a fork: its branch is not in the PoolSync's repository, only the
	// forge's refs/pull/N/head is.
	fork := srv.Fork("pools", "contributor")
	gittest.Git(t, work, "checkout", "-q", "-b", "from-fork", "main")
	write("pools/nodepool.yaml", strings.Replace(nodePool, `values: ["t3.small"]`, `values: ["t3.large"]`, 1))
	gittest.Git(t, work, "commit", "-q", "-am", "t3.large")
	gittest.Git(t, work, "push", "-q", fork, "from-fork")
	forked := srv.OpenPullRequest("pools", "contributor:from-fork", "main", "larger nodes, from a fork")
	fromFork := waitComment(forked, gittest.Git(t, work, "rev-parse", "HEAD"), "t3.large on-demand")
	// Planned without AWS credentials: the account is not read for a fork's branch.
	if !strings.Contains(fromFork.Body, "not planned for a pull request from a fork") || strings.Contains(fromFork.Body, "+ SQS queue demo") {
		t.Errorf("the fork's comment plans the account:\n%s", fromFork.Body)
	}
}

// webWorkload runs n pods of 500m and 512Mi for seed 002's pool (node selector intent: apps) in
// a namespace of that name, and waits until they exist (Pending: no node has the label).
func (h *harness) webWorkload(namespace string, n int32) {
	h.t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := h.c.Create(ctx, ns); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.c.Delete(context.Background(), ns) })
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name},
		Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"intent": "apps"},
				Containers: []corev1.Container{{Name: "web", Image: "example.com/web", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
			}}}}
	if err := h.c.Create(ctx, dep); err != nil {
		h.t.Fatal(err)
	}
	h.waitFor(time.Minute, fmt.Sprintf("the Deployment's %d pods", n), func() (bool, string) {
		var pods corev1.PodList
		if err := h.c.List(ctx, &pods); err != nil {
			return false, err.Error()
		}
		found := 0
		for _, p := range pods.Items {
			if p.Namespace == ns.Name {
				found++
			}
		}
		return found == int(n), fmt.Sprintf("%d pods", found)
	})
}

// giteaToken stores the Gitea server's token in a Secret for spec.report.pullRequests and
// returns its name.
func (h *harness) giteaToken(srv *giteatest.Server) string {
	h.t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea-token", Namespace: secretNamespace}, StringData: map[string]string{"token": srv.Token}}
	if err := h.c.Create(context.Background(), secret); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.c.Delete(context.Background(), secret) })
	return secret.Name
}
