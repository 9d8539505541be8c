package reconciler

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/testbed/giteatest"
	"github.com/karpool/karpool/testbed/gittest"
	"github.com/karpool/karpool/testbed/hostile"
)

// followed are the cases also given to a PoolSync as the branch it follows, one of each class
// the PoolSync itself refuses (workload numbers are plan's business, not the cluster's).
var followed = map[string]bool{
	"exec-generator-dir": true, "ssrf-patch-transformer-file": true, "outside-dotdot-patch": true,
	"dos-alias-patch": true, "dos-big-file": true, "md-unknown-field": true, "iam-role-star": true,
	"yaml-duplicate-key": true,
}

// TestHostileBranchesAndPullRequests runs the corpus of hostile repositories (testbed/hostile)
// through the controller on the local control plane and a real Gitea: every case is a pull
// request that a PoolSync reviews (its comment names the file and line, its commit status
// fails, the comment holds nothing karpool's template did not write), and one case of each
// class is the branch a PoolSync follows (not Ready, the file and line in its message). No
// connection reaches the trap, no command runs, the file outside the repository is never
// opened, and no build process grows past 500 MB.
func TestHostileBranchesAndPullRequests(t *testing.T) {
	h := startController(t)
	srv := giteatest.Start(t)
	tr := hostile.NewTrap(t)
	cases, err := hostile.Cases(tr)
	if err != nil {
		t.Fatal(err)
	}
	clone := srv.CreateRepo("hostile")
	work := t.TempDir()
	gittest.Git(t, work, "init", "-q", "-b", "main")
	benign := hostile.Case{Files: map[string][]byte{"pools/README": []byte("pools\n")}}
	if err := benign.WriteTo(work); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-q", "-m", "pools")
	gittest.Git(t, work, "remote", "add", "origin", srv.PushURL(clone))
	gittest.Git(t, work, "push", "-q", "origin", "main")
	prs := map[string]int{}
	heads := map[string]string{}
	for _, c := range cases {
		gittest.Git(t, work, "checkout", "-q", "-b", c.Name, "main")
		if err := c.WriteTo(work); err != nil {
			t.Fatal(err)
		}
		gittest.Git(t, work, "add", "-A")
		gittest.Git(t, work, "commit", "-q", "-m", c.Name)
		gittest.Git(t, work, "push", "-q", "origin", c.Name)
		heads[c.Name] = gittest.Git(t, work, "rev-parse", "HEAD")
		prs[c.Name] = srv.OpenPullRequest("hostile", c.Name, "main", c.About)
	}

	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea-token-hostile", Namespace: secretNamespace}, StringData: map[string]string{"token": srv.Token}}
	if err := h.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), secret) })
	h.poolSync("hostile-reviews", clone, "pools", func(ps *v1alpha1.PoolSync) {
		ps.Spec.Interval = metav1.Duration{Duration: 5 * time.Second}
		ps.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Minute}
		ps.Spec.Report = &v1alpha1.ReportSpec{PullRequests: &v1alpha1.PullRequestSpec{
			Provider: "gitea", APIURL: srv.URL, SecretRef: fluxmeta.LocalObjectReference{Name: secret.Name}}}
	})
	for _, c := range cases {
		if followed[c.Name] {
			h.poolSync("hostile-"+c.Name, clone, "pools", func(ps *v1alpha1.PoolSync) {
				ps.Spec.Ref = &v1alpha1.GitRef{Branch: c.Name}
			})
		}
	}

	// Each review is one probe: 10 s each is the budget.
	var comments []string
	h.waitFor(time.Duration(len(cases))*10*time.Second, "a failing review of every pull request", func() (bool, string) {
		comments = comments[:0]
		for _, c := range cases {
			cs := srv.Comments("hostile", prs[c.Name])
			st := srv.Statuses("hostile", heads[c.Name])
			if len(cs) != 1 || len(st) == 0 {
				return false, fmt.Sprintf("%s: %d comments, %d statuses", c.Name, len(cs), len(st))
			}
			comments = append(comments, cs[0].Body)
		}
		return true, ""
	})
	for i, c := range cases {
		if st := srv.Statuses("hostile", heads[c.Name]); st[0].State != "failure" || st[0].Context != "karpool/plan" {
			t.Errorf("%s: commit status %+v, want karpool/plan failure", c.Name, st[0])
		}
		if !hostile.Located(comments[i], c.Want) {
			t.Errorf("%s: the comment does not name %s %s:\n%s", c.Name, c.Want.Where(), c.Want.Message, comments[i])
		}
		for _, p := range hostile.Steered(comments[i]) {
			t.Errorf("%s: comment: %s", c.Name, p)
		}
	}
	var messages []string
	for _, c := range cases {
		if !followed[c.Name] {
			continue
		}
		name := "hostile-" + c.Name
		h.waitFor(time.Minute, name+" not Ready", func() (bool, string) {
			ps := h.get(name)
			return conditions.IsFalse(ps, fluxmeta.ReadyCondition) && ps.Status.LastAttemptedRevision != "", describe(ps)
		})
		msg := conditions.GetMessage(h.get(name), fluxmeta.ReadyCondition)
		messages = append(messages, msg)
		if !hostile.Located(msg, c.Want) {
			t.Errorf("%s: Ready's message does not name %s %s: %s", name, c.Want.Where(), c.Want.Message, msg)
		}
	}
	tr.Check(t, "the controller", append(comments, messages...)...)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err == nil && ru.Maxrss<<10 > 500<<20 {
		t.Errorf("a build process grew to %d MiB, more than 500 MiB", ru.Maxrss>>10)
	}
}
