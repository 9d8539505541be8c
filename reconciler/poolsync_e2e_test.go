package reconciler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/testbed/gittest"
)

// workshopRepo is a repository with the workshop example under clusters/dev, committed. Its
// kustomization also lists the example's inflate Deployment (which `karpool up` keeps out of
// Git), so that PoolSync is tested on an object of a kind besides the pools.
func workshopRepo(t *testing.T) (*gittest.Repo, string, string) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "pools.git")
	repo.CopyDir("../examples/workshop", "clusters/dev")
	repo.Write("clusters/dev/kustomization.yaml", "resources:\n  - ec2nodeclass.yaml\n  - nodepool.yaml\n  - workload/inflate.yaml\n")
	return repo, dir, repo.Commit("workshop pools")
}

func TestWorkshopPoolsAreApplied(t *testing.T) {
	h := startController(t)
	repo, dir, commit := workshopRepo(t)
	srv := &gittest.Server{Root: dir}
	srv.Start(t)
	defer srv.Stop()

	for _, c := range []struct{ name, url string }{{"http", srv.URL(repo.Name)}, {"file", repo.FileURL()}} {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			name := "workshop-" + c.name
			h.poolSync(name, c.url, "clusters/dev")
			ps := h.waitApplied(name, commit)

			np, err := h.nodePool("default")
			if err != nil {
				t.Fatal(err)
			}
			if np.Labels[OwnerLabel] != name || np.Spec.Template.Labels["type"] != "karpenter" {
				t.Errorf("NodePool labels %v, template labels %v", np.Labels, np.Spec.Template.Labels)
			}
			nc := &karpenterawsv1.EC2NodeClass{}
			if err := h.c.Get(context.Background(), types.NamespacedName{Name: "default"}, nc); err != nil {
				t.Fatal(err)
			}
			// EC2NodeClasses are applied before NodePools: etcd revisions order the creations.
			if rv(t, nc.ResourceVersion) > rv(t, np.ResourceVersion) && nc.Generation == 1 && np.Generation == 1 {
				t.Errorf("EC2NodeClass (rv %s) written after the NodePool (rv %s)", nc.ResourceVersion, np.ResourceVersion)
			}
			var ids []string
			for _, e := range ps.Status.Inventory.Entries {
				ids = append(ids, e.ID+"@"+e.Version)
			}
			want := "_default_karpenter.k8s.aws_EC2NodeClass@v1 _default_karpenter.sh_NodePool@v1 default_inflate_apps_Deployment@v1"
			if got := strings.Join(ids, " "); got != want {
				t.Errorf("inventory %s, want %s", got, want)
			}
			h.waitEvent(name, meta.ReconciliationSucceededReason, "Applied revision main@sha1:"+commit+": created: ")
			if h.metricSeries() == 0 {
				t.Error("no reconciliation metrics recorded")
			}
			// The next subtest applies the same objects from another PoolSync.
			h.cleanup(name)
		})
	}
}

func rv(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInvalidRevisionsAreNotApplied(t *testing.T) {
	h := startController(t)
	repo, _, good := workshopRepo(t)
	name := "invalid"
	h.poolSync(name, repo.FileURL(), "clusters/dev")
	h.waitApplied(name, good)

	// A bad operator in the same commit as a limits change: neither reaches the cluster.
	nodepool := "clusters/dev/nodepool.yaml"
	orig := readFile(t, repo, nodepool)
	bad := strings.Replace(orig, `cpu: "1000"`, `cpu: "5"`, 1)
	bad = strings.Replace(bad, "- key: karpenter.sh/capacity-type\n          operator: In", "- key: karpenter.sh/capacity-type\n          operator: Inn", 1)
	repo.Write(nodepool, bad)
	badCommit := repo.Commit("bad operator")
	ps := h.waitFailed(name, ValidationFailedReason)
	msg := conditions.GetMessage(ps, meta.ReadyCondition)
	if !strings.Contains(msg, "clusters/dev/nodepool.yaml:19:21: NodePool/default spec.template.spec.requirements[1].operator") || !strings.Contains(msg, "nothing applied") {
		t.Errorf("message does not point at the operator: %s", msg)
	}
	if ps.Status.LastAttemptedRevision != "main@sha1:"+badCommit || ps.Status.LastAppliedRevision != "main@sha1:"+good {
		t.Errorf("attempted %s applied %s", ps.Status.LastAttemptedRevision, ps.Status.LastAppliedRevision)
	}
	h.waitEvent(name, ValidationFailedReason, "nodepool.yaml:19:21")
	np, err := h.nodePool("default")
	if err != nil {
		t.Fatal(err)
	}
	if got := np.Spec.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1000")) != 0 {
		t.Errorf("limits.cpu is %s in the cluster: part of the invalid revision was applied", got.String())
	}

	// The fix applies both changes.
	repo.Write(nodepool, strings.Replace(orig, `cpu: "1000"`, `cpu: "5"`, 1))
	fixed := repo.Commit("fix operator")
	h.waitApplied(name, fixed)
	np, _ = h.nodePool("default")
	if got := np.Spec.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("5")) != 0 {
		t.Errorf("limits.cpu %s after the fix, want 5", got.String())
	}

	// A broken kustomization: a resource that does not exist.
	kust := "clusters/dev/kustomization.yaml"
	origKust := readFile(t, repo, kust)
	repo.Write(kust, origKust+"  - pools/extra.yaml\n")
	repo.Write(nodepool, orig)
	repo.Commit("broken kustomization")
	ps = h.waitFailed(name, meta.BuildFailedReason)
	if msg := conditions.GetMessage(ps, meta.ReadyCondition); !strings.Contains(msg, `clusters/dev/kustomization.yaml:5:5: "pools/extra.yaml" not found in the repository`) {
		t.Errorf("message does not point at the kustomization entry: %s", msg)
	}
	np, _ = h.nodePool("default")
	if got := np.Spec.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("5")) != 0 {
		t.Errorf("limits.cpu %s while the build is broken, want the previous 5", got.String())
	}
	repo.Write(kust, origKust)
	fixed = repo.Commit("fix kustomization")
	h.waitApplied(name, fixed)
	np, _ = h.nodePool("default")
	if got := np.Spec.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1000")) != 0 {
		t.Errorf("limits.cpu %s after fixing the kustomization, want 1000", got.String())
	}
}

func readFile(t *testing.T, repo *gittest.Repo, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo.Work, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDriftIsCorrectedAndRemovedPoolsPruned(t *testing.T) {
	h := startController(t)
	repo, _, commit := workshopRepo(t)
	name := "drift"
	h.poolSync(name, repo.FileURL(), "clusters/dev")
	h.waitApplied(name, commit)

	// kubectl edit: change a field from Git and add one that Git does not have.
	np, err := h.nodePool("default")
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("3")
	np.Spec.Weight = ptr.To(int32(42))
	if err := h.c.Update(context.Background(), np, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	h.waitFor(30*time.Second, "the edit to be undone", func() (bool, string) {
		np, err := h.nodePool("default")
		if err != nil {
			return false, err.Error()
		}
		cpu := np.Spec.Limits[corev1.ResourceCPU]
		return cpu.Cmp(resource.MustParse("1000")) == 0 && np.Spec.Weight == nil, fmt.Sprintf("cpu %s weight %v", cpu.String(), np.Spec.Weight)
	})
	h.waitEvent(name, DriftCorrectedReason, "configured: NodePool/default")

	// Remove the pool from Git: it is pruned; its EC2NodeClass stays.
	repo.Remove("clusters/dev/nodepool.yaml")
	repo.Write("clusters/dev/kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ec2nodeclass.yaml\n  - workload/inflate.yaml\n")
	removed := repo.Commit("remove the pool")
	ps := h.waitApplied(name, removed)
	if _, err := h.nodePool("default"); !apierrors.IsNotFound(err) {
		t.Errorf("NodePool still there after its removal from Git: %v", err)
	}
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: "default"}, &karpenterawsv1.EC2NodeClass{}); err != nil {
		t.Errorf("EC2NodeClass: %v", err)
	}
	for _, e := range ps.Status.Inventory.Entries {
		if strings.HasSuffix(e.ID, "_NodePool") {
			t.Errorf("pruned NodePool still in the inventory: %v", ps.Status.Inventory.Entries)
		}
	}
	h.waitEvent(name, meta.ReconciliationSucceededReason, "deleted: NodePool/default")
}

func TestForcePushedHistoryIsFollowed(t *testing.T) {
	h := startController(t)
	repo, _, base := workshopRepo(t)
	name := "force"
	h.poolSync(name, repo.FileURL(), "clusters/dev")
	h.waitApplied(name, base)

	extra := func(pool string) {
		repo.Write("clusters/dev/"+pool+".yaml", strings.Replace(readFile(t, repo, "clusters/dev/nodepool.yaml"), "name: default\nspec:", "name: "+pool+"\nspec:", 1))
		repo.Write("clusters/dev/kustomization.yaml", readFile(t, repo, "clusters/dev/kustomization.yaml")+"  - "+pool+".yaml\n")
	}
	extra("abandoned")
	h.waitApplied(name, repo.Commit("a pool that history will forget"))
	if _, err := h.nodePool("abandoned"); err != nil {
		t.Fatal(err)
	}

	repo.ResetHard(base)
	extra("rewritten")
	rewritten := repo.CommitLocal("rewritten history")
	repo.ForcePush()
	h.waitApplied(name, rewritten)
	if _, err := h.nodePool("rewritten"); err != nil {
		t.Errorf("pool of the new head: %v", err)
	}
	if _, err := h.nodePool("abandoned"); !apierrors.IsNotFound(err) {
		t.Errorf("pool of the abandoned history: %v", err)
	}
}

func TestGitServerDownKeepsStateAndRecovers(t *testing.T) {
	h := startController(t)
	repo, dir, commit := workshopRepo(t)
	srv := &gittest.Server{Root: dir}
	srv.Start(t)
	defer srv.Stop()
	name := "server-down"
	h.poolSync(name, srv.URL(repo.Name), "clusters/dev")
	h.waitApplied(name, commit)

	srv.Stop()
	ps := h.waitFailed(name, GitOperationFailedReason)
	if msg := conditions.GetMessage(ps, meta.ReadyCondition); !strings.Contains(msg, "connection refused") || !strings.Contains(msg, srv.URL(repo.Name)) {
		t.Errorf("message should name the server and the failure: %s", msg)
	}
	if ps.Status.LastAppliedRevision != "main@sha1:"+commit {
		t.Errorf("lastAppliedRevision %s while the server is down", ps.Status.LastAppliedRevision)
	}
	if _, err := h.nodePool("default"); err != nil {
		t.Errorf("applied NodePool gone while the server is down: %v", err)
	}

	repo.Write("clusters/dev/nodepool.yaml", strings.Replace(readFile(t, repo, "clusters/dev/nodepool.yaml"), `cpu: "1000"`, `cpu: "7"`, 1))
	newer := repo.Commit("while the server was down")
	srv.Start(t)
	h.waitApplied(name, newer)
}

func TestWrongTokenIsAnAuthenticationError(t *testing.T) {
	h := startController(t)
	repo, dir, commit := workshopRepo(t)
	const token, wrong = "correct-horse-battery-staple", "wrong-token-5f2a9c"
	srv := &gittest.Server{Root: dir, Username: "ci", Password: token, TLS: true}
	srv.Start(t)
	defer srv.Stop()

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git-auth", Namespace: secretNamespace},
		Data:       map[string][]byte{"username": []byte("ci"), "password": []byte(wrong), "ca.crt": srv.CA()},
	}
	if err := h.c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	defer h.c.Delete(context.Background(), secret)
	name := "auth"
	h.poolSync(name, srv.URL(repo.Name), "clusters/dev", func(ps *v1alpha1.PoolSync) {
		ps.Spec.SecretRef = &meta.LocalObjectReference{Name: "git-auth"}
	})
	ps := h.waitFailed(name, AuthenticationFailedReason)
	if msg := conditions.GetMessage(ps, meta.ReadyCondition); !strings.Contains(msg, "authentication to "+srv.URL(repo.Name)+" failed") || !strings.Contains(msg, "authentication required") {
		t.Errorf("unclear message: %s", msg)
	}
	h.waitEvent(name, AuthenticationFailedReason, "authentication required")

	// Fix the Secret and ask for a reconciliation the Flux way.
	secret.Data["password"] = []byte(token)
	if err := h.c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	requestedAt := time.Now().Format(time.RFC3339Nano)
	ps = h.get(name)
	patch := client.MergeFrom(ps.DeepCopy())
	ps.Annotations = map[string]string{meta.ReconcileRequestAnnotation: requestedAt}
	if err := h.c.Patch(context.Background(), ps, patch); err != nil {
		t.Fatal(err)
	}
	ps = h.waitApplied(name, commit)
	if ps.Status.LastHandledReconcileAt != requestedAt {
		t.Errorf("lastHandledReconcileAt %q, want %q", ps.Status.LastHandledReconcileAt, requestedAt)
	}

	// Neither token appears anywhere the controller writes.
	evs := strings.Join(h.events(name, ""), "\n")
	for _, s := range []string{token, wrong} {
		for where, text := range map[string]string{"status": statusJSON(ps), "events": evs, "log": h.log.String()} {
			if strings.Contains(text, s) {
				t.Errorf("secret %q found in the %s", s, where)
			}
		}
	}
}

func TestPoolSyncsOnDifferentPathsDoNotPruneEachOther(t *testing.T) {
	h := startController(t)
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "teams.git")
	pool := func(name string) string {
		return fmt.Sprintf("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: %s\nspec:\n  template:\n    spec:\n      requirements: []\n      nodeClassRef:\n        group: karpenter.k8s.aws\n        kind: EC2NodeClass\n        name: default\n", name)
	}
	repo.Write("team-a/pool.yaml", pool("team-a"))
	repo.Write("team-b/pool.yaml", pool("team-b"))
	first := repo.Commit("two teams")
	h.poolSync("team-a", repo.FileURL(), "team-a")
	h.poolSync("team-b", repo.FileURL(), "team-b")
	h.waitApplied("team-a", first)
	h.waitApplied("team-b", first)

	// Team A replaces its pool; team B's survives both reconciliations.
	repo.Remove("team-a/pool.yaml")
	repo.Write("team-a/pool2.yaml", pool("team-a2"))
	second := repo.Commit("team a renames its pool")
	h.waitApplied("team-a", second)
	h.waitApplied("team-b", second)
	if _, err := h.nodePool("team-a"); !apierrors.IsNotFound(err) {
		t.Errorf("team-a's old pool: %v", err)
	}
	for _, n := range []string{"team-a2", "team-b"} {
		if _, err := h.nodePool(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if inv := h.get("team-b").Status.Inventory.Entries; len(inv) != 1 || inv[0].ID != "_team-b_karpenter.sh_NodePool" {
		t.Errorf("team-b inventory %v", inv)
	}
}

func TestSuspendedPoolSyncIsLeftAlone(t *testing.T) {
	h := startController(t)
	repo, _, commit := workshopRepo(t)
	name := "suspended"
	h.poolSync(name, repo.FileURL(), "clusters/dev")
	h.waitApplied(name, commit)

	ps := h.get(name)
	ps.Spec.Suspend = true
	if err := h.c.Update(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	h.waitFor(30*time.Second, "the suspension to be seen", func() (bool, string) {
		ps := h.get(name)
		return ps.Status.ObservedGeneration == ps.Generation || !conditions.IsReady(ps), describe(ps)
	})
	repo.Remove("clusters/dev/workload/inflate.yaml")
	repo.Write("clusters/dev/kustomization.yaml", "resources:\n  - ec2nodeclass.yaml\n  - nodepool.yaml\n")
	next := repo.Commit("while suspended")
	// A request is handled (and recorded) even while suspended, but nothing is applied.
	ps = h.get(name)
	patch := client.MergeFrom(ps.DeepCopy())
	ps.Annotations = map[string]string{meta.ReconcileRequestAnnotation: "now"}
	if err := h.c.Patch(context.Background(), ps, patch); err != nil {
		t.Fatal(err)
	}
	h.waitFor(30*time.Second, "the request to be handled", func() (bool, string) {
		ps := h.get(name)
		return ps.Status.LastHandledReconcileAt == "now", describe(ps)
	})
	if got := h.get(name).Status.LastAppliedRevision; got != "main@sha1:"+commit {
		t.Errorf("applied %s while suspended", got)
	}

	ps = h.get(name)
	ps.Spec.Suspend = false
	if err := h.c.Update(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	h.waitApplied(name, next)
}

func TestInvalidSpecStalls(t *testing.T) {
	h := startController(t)
	repo, _, _ := workshopRepo(t)
	name := "stalled"
	h.poolSync(name, repo.FileURL(), "clusters/dev", func(ps *v1alpha1.PoolSync) {
		ps.Spec.Ref = &v1alpha1.GitRef{SemVer: "not a range"}
	})
	h.waitFor(30*time.Second, "Stalled", func() (bool, string) {
		ps := h.get(name)
		return conditions.IsStalled(ps) && conditions.IsFalse(ps, meta.ReadyCondition) && !conditions.Has(ps, meta.ReconcilingCondition), describe(ps)
	})
}

func TestNewNamespaceAndAdoptedObjects(t *testing.T) {
	h := startController(t)
	ctx := context.Background()
	// An object that exists before Git mentions it is adopted: labelled, and set to Git's content.
	existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: "default"}, Data: map[string]string{"from": "cluster"}}
	if err := h.c.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(ctx, existing) })

	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "apps.git")
	repo.Write("apps/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: brand-new\n")
	repo.Write("apps/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n  namespace: brand-new\ndata:\n  a: b\n")
	repo.Write("apps/adopted.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: adopted\n  namespace: default\ndata:\n  from: git\n")
	commit := repo.Commit("a namespace and its contents")
	name := "namespaces"
	h.poolSync(name, repo.FileURL(), "apps")
	t.Cleanup(func() { _ = h.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "brand-new"}}) })
	h.waitApplied(name, commit)

	cm := &corev1.ConfigMap{}
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: "brand-new", Name: "inside"}, cm); err != nil || cm.Data["a"] != "b" {
		t.Errorf("ConfigMap in the new Namespace: %v %v", err, cm.Data)
	}
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "adopted"}, cm); err != nil || cm.Data["from"] != "git" || cm.Labels[OwnerLabel] != name {
		t.Errorf("adopted ConfigMap: %v data %v labels %v", err, cm.Data, cm.Labels)
	}
}

// TestDeletionPolicy: deleting a PoolSync deletes what it applied when its deletion policy says
// so (MirrorPrune follows spec.prune, Delete always, Orphan never), and waits for it through the
// finalizer; orphaned objects stay as they were.
func TestDeletionPolicy(t *testing.T) {
	h := startController(t)
	repo, _, commit := workshopRepo(t)
	for _, c := range []struct {
		name    string
		policy  v1alpha1.DeletionPolicy
		prune   bool
		deletes bool
	}{
		{"mirror-prune", "", true, true},
		{"mirror-no-prune", v1alpha1.DeletionPolicyMirrorPrune, false, false},
		{"delete", v1alpha1.DeletionPolicyDelete, false, true},
		{"orphan", v1alpha1.DeletionPolicyOrphan, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			name := "deletion-" + c.name
			h.poolSync(name, repo.FileURL(), "clusters/dev", func(ps *v1alpha1.PoolSync) {
				ps.Spec.DeletionPolicy, ps.Spec.Prune = c.policy, c.prune
			})
			h.waitApplied(name, commit)
			if fin := h.get(name).Finalizers; len(fin) != 1 || fin[0] != Finalizer {
				t.Fatalf("finalizers %v, want [%s]", fin, Finalizer)
			}
			if err := h.c.Delete(context.Background(), &v1alpha1.PoolSync{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(30*time.Second, "PoolSync "+name+" gone", func() (bool, string) {
				err := h.c.Get(context.Background(), types.NamespacedName{Name: name}, &v1alpha1.PoolSync{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			np, err := h.nodePool("default")
			switch {
			case c.deletes && !apierrors.IsNotFound(err) && np.DeletionTimestamp.IsZero():
				t.Errorf("NodePool default left after the PoolSync's deletion (err %v)", err)
			case !c.deletes && err != nil:
				t.Errorf("NodePool default deleted with the PoolSync: %v", err)
			case !c.deletes && np.Labels[OwnerLabel] != name:
				t.Errorf("orphaned NodePool lost its labels: %v", np.Labels)
			}
			nc := &karpenterawsv1.EC2NodeClass{}
			err = h.c.Get(context.Background(), types.NamespacedName{Name: "default"}, nc)
			if c.deletes != (apierrors.IsNotFound(err) || !nc.DeletionTimestamp.IsZero()) {
				t.Errorf("EC2NodeClass after deletion: %v (want deleted: %t)", err, c.deletes)
			}
			if c.deletes {
				h.waitEvent(name, DeletedWithPoolSyncReason, "NodePool/default")
			}
			h.cleanup(name) // the orphans, before the next case applies them again
		})
	}
}
