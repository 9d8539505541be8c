package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/manifests/build"
)

// takenOverManagers are field managers whose fields karpool takes over before applying, as Flux
// does: an edit made with kubectl (apply, edit, or the client-side apply of old versions) becomes
// karpool's, so the next apply restores the Git state completely, removing fields that were
// added in the cluster as well as reverting changed ones.
var takenOverManagers = []ssa.FieldManager{
	{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
	{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "kubectl-edit", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "kubectl-client-side-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "kubectl-patch", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
}

// apply applies the plan's objects with server-side apply, in stages: cluster definitions (CRDs,
// Namespaces, ClusterRoles) first, waiting until they are ready; then everything but NodePools
// (EC2NodeClasses among them); NodePools last, so that a NodePool never exists before the
// EC2NodeClass it names. Within a stage objects are written concurrently, and only those that
// differ from the cluster: untouched objects are skipped, and the others are compared with the
// validation's dry-run result. Objects without one (those that had to wait for a Namespace or CRD
// of the same revision) go through ssa's own dry-run and apply.
func (r *Reconciler) apply(ctx context.Context, p *plan, timeout time.Duration) (*changeSet, error) {
	poller := polling.NewStatusPoller(r.Client, r.Client.RESTMapper(), polling.Options{})
	rm := ssa.NewResourceManager(r.Client, poller, ssa.Owner{Field: FieldManager, Group: v1alpha1.GroupVersion.Group})
	rm.SetConcurrency(r.opts.Concurrency)
	opts := ssa.DefaultApplyOptions()
	opts.WaitTimeout = timeout
	opts.WaitInterval = 500 * time.Millisecond
	opts.Cleanup = ssa.ApplyCleanupOptions{
		Annotations:   []string{corev1.LastAppliedConfigAnnotation},
		FieldManagers: takenOverManagers,
	}

	var defs []*unstructured.Unstructured
	var rest, pools []int
	for i, o := range p.objs {
		switch gk := o.Object.GroupVersionKind().GroupKind(); {
		case ssautils.IsClusterDefinition(o.Object):
			defs = append(defs, o.Object.DeepCopy())
		case gk.Group == karpenterv1.GroupVersion.Group && gk.Kind == "NodePool":
			pools = append(pools, i)
		default:
			rest = append(rest, i)
		}
	}
	cs := &changeSet{}
	if len(defs) > 0 {
		res, err := rm.ApplyAllStaged(ctx, defs, opts)
		if res != nil {
			cs.entries = append(cs.entries, res.Entries...)
		}
		if err != nil {
			return cs, err
		}
	}
	for _, stage := range [][]int{rest, pools} {
		entries, err := r.applyStage(ctx, rm, p, stage, opts)
		cs.entries = append(cs.entries, entries...)
		if err != nil {
			return cs, err
		}
	}
	return cs, nil
}

// applyStage writes the objects of one stage (indexes of p.objs) that differ from the cluster.
func (r *Reconciler) applyStage(ctx context.Context, rm *ssa.ResourceManager, p *plan, stage []int, opts ssa.ApplyOptions) ([]ssa.ChangeSetEntry, error) {
	entries := make([]ssa.ChangeSetEntry, len(stage))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Concurrency)
	for j, i := range stage {
		g.Go(func() error {
			desired := p.objs[i].Object.DeepCopy()
			if p.dryRun[i] == nil && !p.untouched[i] {
				e, err := rm.Apply(gctx, desired, opts)
				if err == nil {
					entries[j] = *e
				}
				return err
			}
			action := ssa.UnchangedAction
			var err error
			if !p.untouched[i] {
				action, err = r.applyPlanned(gctx, p, i, desired)
			} else {
				p.learn(i, p.live[liveKey(desired)])
			}
			entries[j] = ssa.ChangeSetEntry{
				ObjMetadata:  object.UnstructuredToObjMetadata(desired),
				GroupVersion: desired.GroupVersionKind().Version,
				Subject:      ssautils.FmtUnstructured(desired),
				Action:       action,
			}
			return err
		})
	}
	err := g.Wait()
	var out []ssa.ChangeSetEntry
	for _, e := range entries {
		if e.Action != "" {
			out = append(out, e)
		}
	}
	return out, err
}

// applyPlanned does for one object what ssa's Apply does after its dry-run: hand the fields of
// kubectl edits over to karpool, and apply when the cluster differs from the dry-run result.
func (r *Reconciler) applyPlanned(ctx context.Context, p *plan, i int, desired *unstructured.Unstructured) (ssa.Action, error) {
	dryRun := p.dryRun[i]
	live := p.live[liveKey(desired)]
	action := ssa.ConfiguredAction
	switch {
	case dryRun.GetResourceVersion() == "":
		action = ssa.CreatedAction
	case live == nil:
		// It exists but without the owner label (adopted, or the label was edited away).
	default:
		patches := ssa.PatchRemoveAnnotations(live, []string{corev1.LastAppliedConfigAnnotation})
		fp, err := ssa.PatchReplaceFieldsManagers(live, takenOverManagers, FieldManager)
		if err != nil {
			return "", fmt.Errorf("%s: taking over fields edited with kubectl: %w", ssautils.FmtUnstructured(live), err)
		}
		patches = append(patches, fp...)
		if len(patches) > 0 {
			raw, err := json.Marshal(patches)
			if err != nil {
				return "", err
			}
			if err := r.Patch(ctx, live.DeepCopy(), client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(FieldManager)); err != nil {
				return "", fmt.Errorf("%s: taking over fields edited with kubectl: %w", ssautils.FmtUnstructured(live), err)
			}
		} else if !drifted(live, dryRun) {
			p.learn(i, live)
			return ssa.UnchangedAction, nil
		}
	}
	// The server's answer, the object as stored, lands in desired.
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.ForceOwnership, client.FieldOwner(FieldManager)); err != nil {
		return "", fmt.Errorf("%s apply failed: %w", ssautils.FmtUnstructured(desired), err)
	}
	p.learn(i, desired)
	return action, nil
}

// drifted says whether the cluster's object differs from what applying would make of it,
// comparing labels, annotations and everything outside metadata and status, as ssa does.
func drifted(live, dryRun *unstructured.Unstructured) bool {
	if !equality.Semantic.DeepEqual(live.GetLabels(), dryRun.GetLabels()) || !equality.Semantic.DeepEqual(live.GetAnnotations(), dryRun.GetAnnotations()) {
		return true
	}
	return !equality.Semantic.DeepEqual(forDiff(live), forDiff(dryRun))
}

func forDiff(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata")
	unstructured.RemoveNestedField(c.Object, "status")
	if err := normalize.DryRunUnstructured(c); err != nil {
		return u.Object
	}
	return c.Object
}

// prune deletes the stale inventory entries that still carry this PoolSync's owner label and
// returns what it deleted.
func (r *Reconciler) prune(ctx context.Context, obj *v1alpha1.PoolSync, stale []v1alpha1.InventoryEntry) ([]string, error) {
	if len(stale) == 0 {
		return nil, nil
	}
	var objs []*unstructured.Unstructured
	for _, e := range stale {
		m, err := object.ParseObjMetadata(e.ID)
		if err != nil {
			return nil, fmt.Errorf("inventory entry %q: %w", e.ID, err)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(m.GroupKind.WithVersion(e.Version))
		u.SetNamespace(m.Namespace)
		u.SetName(m.Name)
		objs = append(objs, u)
	}
	rm := ssa.NewResourceManager(r.Client, nil, ssa.Owner{Field: FieldManager, Group: v1alpha1.GroupVersion.Group})
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = map[string]string{OwnerLabel: obj.Name}
	res, err := rm.DeleteAll(ctx, objs, opts)
	var deleted []string
	if res != nil {
		for _, e := range res.Entries {
			if e.Action == ssa.DeletedAction {
				deleted = append(deleted, e.Subject)
			}
		}
	}
	return deleted, err
}

// changeSet is what an apply did.
type changeSet struct{ entries []ssa.ChangeSetEntry }

func (c *changeSet) changed() bool {
	for _, e := range c.entries {
		if e.Action == ssa.CreatedAction || e.Action == ssa.ConfiguredAction {
			return true
		}
	}
	return false
}

// summary renders "created: A, B; configured: C; deleted: D", or "no changes".
func (c *changeSet) summary(deleted []string) string {
	by := map[ssa.Action][]string{}
	for _, e := range c.entries {
		by[e.Action] = append(by[e.Action], e.Subject)
	}
	var parts []string
	for _, a := range []ssa.Action{ssa.CreatedAction, ssa.ConfiguredAction} {
		if len(by[a]) > 0 {
			parts = append(parts, string(a)+": "+listed(by[a]))
		}
	}
	if len(deleted) > 0 {
		parts = append(parts, "deleted: "+listed(deleted))
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, "; ")
}

// listed joins names, eliding the middle of long lists: an event is for reading.
func listed(names []string) string {
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// inventoryOf lists objects as Flux inventory entries (namespace_name_group_kind), sorted.
func inventoryOf(objs []*build.Object) []v1alpha1.InventoryEntry {
	entries := make([]v1alpha1.InventoryEntry, 0, len(objs))
	for _, o := range objs {
		entries = append(entries, v1alpha1.InventoryEntry{
			ID:      object.UnstructuredToObjMetadata(o.Object).String(),
			Version: o.Object.GroupVersionKind().Version,
		})
	}
	return sortEntries(entries)
}

func inventoryEntries(inv *v1alpha1.Inventory) []v1alpha1.InventoryEntry {
	if inv == nil {
		return nil
	}
	return inv.Entries
}

func toInventory(entries []v1alpha1.InventoryEntry) *v1alpha1.Inventory {
	return &v1alpha1.Inventory{Entries: entries}
}

// difference is the entries of a whose ID is not in b.
func difference(a, b []v1alpha1.InventoryEntry) []v1alpha1.InventoryEntry {
	in := map[string]bool{}
	for _, e := range b {
		in[e.ID] = true
	}
	var out []v1alpha1.InventoryEntry
	for _, e := range a {
		if !in[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// union is a and the entries of b not in a, sorted.
func union(a, b []v1alpha1.InventoryEntry) []v1alpha1.InventoryEntry {
	out := append([]v1alpha1.InventoryEntry{}, a...)
	return sortEntries(append(out, difference(b, a)...))
}

func sortEntries(e []v1alpha1.InventoryEntry) []v1alpha1.InventoryEntry {
	sort.Slice(e, func(i, j int) bool { return e[i].ID < e[j].ID })
	return e
}
