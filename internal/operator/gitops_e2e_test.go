package operator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/testbed/gittest"
)

// TestNodePoolRemovedFromGit: the workshop pools come from Git through a PoolSync with prune;
// inflate gets a node from them. Removing the NodePool's file from Git deletes the NodePool in
// the cluster, and its node is drained and its instance terminated through the NodeClaim's
// finalizer — nothing is orphaned, and inflate's pods are Pending again (no pool is left for
// them). The EC2NodeClass, still in Git, stays.
func TestNodePoolRemovedFromGit(t *testing.T) {
	h := newHarness(t)
	h.startController()
	repo := gittest.NewRepo(t, t.TempDir(), "pools.git")
	for _, f := range []string{"ec2nodeclass.yaml", "nodepool.yaml"} {
		data, err := os.ReadFile(repoFile("examples", "workshop", f))
		if err != nil {
			t.Fatal(err)
		}
		repo.Write("pools/"+f, string(data))
	}
	first := repo.Commit("workshop pools")
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: "workshop"},
		Spec: v1alpha1.PoolSyncSpec{URL: repo.FileURL(), Path: "pools", Prune: true,
			Interval: metav1.Duration{Duration: 2 * time.Second}},
	}
	if err := h.c.Create(h.ctx, ps); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: the PoolSync goes before the harness's cleanup
	// deletes the pools, so it does not re-create them.
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), ps) })
	h.waitApplied(ps.Name, first)

	ns := h.namespace("gitops")
	h.inflate(ns, 5)
	h.runningPods(ns, "inflate", 5, 3*time.Minute)
	claims := h.nodeClaims()
	if len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(claims))
	}
	instance := claims[0].Status.ProviderID

	repo.Remove("pools/nodepool.yaml")
	second := repo.Commit("remove the default pool")
	h.waitApplied(ps.Name, second)
	h.eventually("NodePool, NodeClaim, node and instance gone", 3*time.Minute, func() error {
		err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, &karpv1.NodePool{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodePool default still there (%v)", err)
		}
		if n := len(h.nodeClaims()); n != 0 {
			return fmt.Errorf("%d NodeClaims left", n)
		}
		if n := len(h.karpenterNodes()); n != 0 {
			return fmt.Errorf("%d nodes left", n)
		}
		for _, in := range h.sim.Instances() {
			if in.ProviderID == instance && in.State != "terminated" && in.State != "shutting-down" {
				return fmt.Errorf("instance %s is %s", instance, in.State)
			}
		}
		return nil
	})
	if len(h.logLines("tainted node")) == 0 {
		t.Errorf("no \"tainted node\" log line: the node was not cordoned before its pods left")
	}
	deleted := false
	for _, line := range h.logLines("deleted nodeclaim") {
		deleted = deleted || strings.Contains(line, instance)
	}
	if !deleted {
		t.Errorf("no \"deleted nodeclaim\" log line for %s", instance)
	}
	// The evicted pods come back from their ReplicaSet and find no pool.
	h.eventually("inflate's 5 pods Pending", time.Minute, func() error {
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "inflate"}); err != nil {
			return err
		}
		pending := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				pending++
			}
		}
		if pending != 5 {
			return fmt.Errorf("%d of %d pods pending", pending, len(pods.Items))
		}
		return nil
	})
	var ps2 v1alpha1.PoolSync
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: ps.Name}, &ps2); err != nil {
		t.Fatal(err)
	}
	for _, e := range ps2.Status.Inventory.Entries {
		if strings.Contains(e.ID, "NodePool") {
			t.Errorf("inventory still lists %s", e.ID)
		}
	}
}

// waitApplied waits until the PoolSync reports this commit applied and Ready.
func (h *harness) waitApplied(name, commit string) {
	h.t.Helper()
	h.eventually("PoolSync "+name+" applied "+commit[:8], 2*time.Minute, func() error {
		var ps v1alpha1.PoolSync
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: name}, &ps); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(ps.Status.Conditions, "Ready")
		if ps.Status.LastAppliedRevision != "main@sha1:"+commit || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("revision %q, Ready %+v", ps.Status.LastAppliedRevision, ready)
		}
		return nil
	})
}
