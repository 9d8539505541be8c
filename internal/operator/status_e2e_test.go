package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/reconciler/status"
	"github.com/karpool/karpool/testbed/gittest"
)

// TestStatusCommittedToGit: a PoolSync with status commits writes, to its own branch of the
// repository it reads, a report whose node count and cost are the cluster's, and a workload
// snapshot that plans the same pods. A reconciliation with nothing changed commits nothing, and
// the branch PoolSync reconciles never moves.
func TestStatusCommittedToGit(t *testing.T) {
	h := newHarness(t)
	h.startController()
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "pools.git")
	for _, f := range []string{"ec2nodeclass.yaml", "nodepool.yaml"} {
		data, err := os.ReadFile(repoFile("examples", "workshop", f))
		if err != nil {
			t.Fatal(err)
		}
		// Without consolidation the node stays as launched, so the cluster is unchanged
		// between the reconciliations the test compares.
		repo.Write("pools/"+f, strings.Replace(string(data), "consolidateAfter: 1m", "consolidateAfter: Never", 1))
	}
	head := repo.Commit("workshop pools")
	srv := &gittest.Server{Root: dir}
	srv.Start(t)
	defer srv.Stop()
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: "reported"},
		Spec: v1alpha1.PoolSyncSpec{URL: srv.URL("pools.git"), Path: "pools", Prune: true,
			Interval: metav1.Duration{Duration: time.Hour},
			Report: &v1alpha1.ReportSpec{StatusCommits: &v1alpha1.StatusCommitSpec{
				Branch: "karpool-status", Message: "status of {revision}",
				Author: &v1alpha1.CommitAuthor{Name: "Pool Bot", Email: "pools@example.com"},
			}}},
	}
	if err := h.c.Create(h.ctx, ps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), ps) })
	h.waitApplied(ps.Name, head)

	ns := h.namespace("reported")
	h.inflate(ns, 5)
	h.runningPods(ns, "inflate", 5, 3*time.Minute)
	claims := h.nodeClaims()
	want := 0.0
	its := catalogTypes(t)
	for _, nc := range claims {
		p, ok := catalog.PriceOf(its, nc.Labels)
		if !ok {
			t.Fatalf("NodeClaim %s has no catalog price: %v", nc.Name, nc.Labels)
		}
		want += p
	}

	// The report is written after a reconciliation: ask for one until it shows the node.
	var rep status.Report
	h.eventually("a status report with the cluster's nodes", 2*time.Minute, func() error {
		h.requestReconcile(ps.Name)
		data, err := gitShow(repo.Bare, "karpool-status:reported/status.json")
		if err != nil {
			return err
		}
		rep = status.Report{}
		if err := json.Unmarshal([]byte(data), &rep); err != nil {
			return err
		}
		if rep.Nodes != len(claims) || math.Abs(rep.PerHour-want) > 1e-9 || rep.AppliedRevision != "main@sha1:"+head {
			return fmt.Errorf("report: %d nodes at %.4f/h of %s; cluster: %d at %.4f/h", rep.Nodes, rep.PerHour, rep.AppliedRevision, len(claims), want)
		}
		// The disruption controller's first pass marks the node ConsolidateAfterNever; a report
		// written before it differs from every later one.
		if len(rep.Pools) == 1 && rep.Pools[0].Blocked["ConsolidateAfterNever"] != len(claims) {
			return fmt.Errorf("report: consolidation state %v, want the node marked ConsolidateAfterNever", rep.Pools[0].Blocked)
		}
		return nil
	})
	if len(rep.Pools) != 1 || rep.Pools[0].Pods != 5 {
		t.Errorf("pools %+v, want default with inflate's 5 pods", rep.Pools)
	}
	if got, _ := gitShow(repo.Bare, "log", "-1", "--format=%an <%ae>|%s", "karpool-status"); got != "Pool Bot <pools@example.com>|status of main@sha1:"+head {
		t.Errorf("last status commit %q", got)
	}
	if got, _ := gitShow(repo.Bare, "rev-parse", "main"); got != head {
		t.Errorf("main moved to %s", got)
	}

	// The snapshot plans inflate's five pods.
	data, err := gitShow(repo.Bare, "karpool-status:reported/"+status.WorkloadFile)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := build.LoadFile(context.Background(), "workload.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if w, err := simulate.WorkloadOf(objs, 0); err != nil || w.Pods() != 5 {
		t.Errorf("snapshot: %v, want 5 pods:\n%s", err, data)
	}

	// Nothing changes: further reconciliations commit nothing.
	count := func() int {
		out, err := gitShow(repo.Bare, "rev-list", "--count", "karpool-status")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(out)
		return n
	}
	before := count()
	for i := 0; i < 2; i++ {
		h.requestReconcile(ps.Name)
		h.waitReconciled(ps.Name)
	}
	if after := count(); after != before {
		t.Errorf("%d status commits after two reconciliations of an unchanged cluster, want %d", after, before)
	}
}

func catalogTypes(t *testing.T) []catalog.InstanceType {
	t.Helper()
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	nco, _ := catalog.NodeClassOptionsFor(nil)
	return cat.InstanceTypes(nco)
}

func gitShow(bare string, args ...string) (string, error) {
	if len(args) == 1 {
		args = []string{"show", args[0]}
	}
	out, err := exec.Command("git", append([]string{"-C", bare}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// requestReconcile asks for a reconciliation as `flux reconcile` does, with the
// reconcile.fluxcd.io/requestedAt annotation.
func (h *harness) requestReconcile(name string) {
	h.t.Helper()
	ps := &v1alpha1.PoolSync{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: name}, ps); err != nil {
		h.t.Fatal(err)
	}
	before := ps.DeepCopy()
	if ps.Annotations == nil {
		ps.Annotations = map[string]string{}
	}
	ps.Annotations["reconcile.fluxcd.io/requestedAt"] = time.Now().Format(time.RFC3339Nano)
	if err := h.c.Patch(h.ctx, ps, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

// waitReconciled waits until the last requested reconciliation is handled.
func (h *harness) waitReconciled(name string) {
	h.t.Helper()
	h.eventually("PoolSync "+name+" handled its reconcile request", time.Minute, func() error {
		ps := &v1alpha1.PoolSync{}
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: name}, ps); err != nil {
			return err
		}
		if asked := ps.Annotations["reconcile.fluxcd.io/requestedAt"]; ps.Status.LastHandledReconcileAt != asked {
			return fmt.Errorf("handled %q, asked %q", ps.Status.LastHandledReconcileAt, asked)
		}
		return nil
	})
}
