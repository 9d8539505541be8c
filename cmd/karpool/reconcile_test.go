package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/reconciler"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

// TestMain shares one local control plane among the package's end-to-end tests.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	localenvtest.Main(m)
}

// gitRepo makes a repository holding the workshop example's pools (its top directory, not the
// workload/ that `karpool up` applies outside Git) under clusters/dev and returns its file://
// URL and the commit.
func gitRepo(t *testing.T) (dir, url, commit string) {
	t.Helper()
	dir = t.TempDir()
	src := "../../examples/workshop"
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "clusters/dev", e.Name()), string(data))
	}
	git(t, dir, "init", "--quiet", "--initial-branch=main")
	return dir, "file://" + dir, commitAll(t, dir)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func commitAll(t *testing.T, dir string) string {
	t.Helper()
	git(t, dir, "add", "--all")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "change")
	return strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestReconcileOnceFromURL(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	dir, url, commit := gitRepo(t)
	out, err := run("reconcile", "--once", "--kubeconfig", env.Kubeconfig, "--url", url, "--path", "clusters/dev", "--name", "ci")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"ready: applied main@sha1:" + commit + " (2 objects)", "ReconciliationSucceeded: Applied revision main@sha1:" + commit + ": created: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() { deleteOwned(c, "ci") })
	np := &karpenterv1.NodePool{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	if np.Labels[reconciler.OwnerLabel] != "ci" {
		t.Errorf("owner label %v", np.Labels)
	}

	// An invalid revision fails with the position and exit code 1.
	path := filepath.Join(dir, "clusters/dev/nodepool.yaml")
	data, _ := os.ReadFile(path)
	writeFile(t, path, strings.Replace(string(data), "operator: In", "operator: Inn", 1))
	commitAll(t, dir)
	out, err = run("reconcile", "--once", "--kubeconfig", env.Kubeconfig, "--url", url, "--path", "clusters/dev", "--name", "ci")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "ValidationFailed: ") || !strings.Contains(err.Error(), "clusters/dev/nodepool.yaml:16:21: NodePool/default spec.template.spec.requirements[0].operator") {
		t.Errorf("invalid revision: exit %d, error %v\n%s", exitCode(err), err, out)
	}
}

func TestReconcileOnceExistingPoolSync(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	_, url, commit := gitRepo(t)
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec:       v1alpha1.PoolSyncSpec{URL: url, Path: "clusters/dev", Interval: metav1.Duration{Duration: time.Hour}, Prune: true},
	}
	if err := c.Create(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), ps)
		deleteOwned(c, "once")
	})
	out, err := run("reconcile", "--once", "--kubeconfig", env.Kubeconfig, "--poolsync", "once")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "once"}, ps); err != nil {
		t.Fatal(err)
	}
	if !conditions.IsReady(ps) || ps.Status.LastAppliedRevision != "main@sha1:"+commit || conditions.Has(ps, meta.ReconcilingCondition) {
		t.Errorf("status after one reconciliation: %+v", ps.Status)
	}
}

// deleteOwned removes the workshop objects a reconciliation labelled with owner.
func deleteOwned(c client.Client, owner string) {
	ctx, sel := context.Background(), client.MatchingLabels{reconciler.OwnerLabel: owner}
	_ = c.DeleteAllOf(ctx, &karpenterv1.NodePool{}, sel)
	_ = c.DeleteAllOf(ctx, &karpenterawsv1.EC2NodeClass{}, sel)
	_ = c.DeleteAllOf(ctx, &appsv1.Deployment{}, sel, client.InNamespace("default"))
}

func TestReconcileUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"reconcile", "--url", "file:///x"},
		{"reconcile", "--once"},
		{"reconcile", "--once", "--url", "file:///x", "--poolsync", "p"},
		{"reconcile", "--once", "--poolsync", "p", "--path", "x"},
		{"reconcile", "--once", "--url", "file:///x", "--tag", "v1", "--branch", "main"},
	} {
		_, err := run(args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: got %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}
