package reconciler

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/manifests/build"
)

// plan is what one reconciliation knows about its objects between validation and apply.
type plan struct {
	owner string
	objs  []*build.Object
	// hashes are the objects' content, by index of objs.
	hashes [][sha256.Size]byte
	// live holds the objects in the cluster that carry the owner label, by liveKey.
	live map[string]*unstructured.Unstructured
	// untouched marks, by index of objs, objects whose content is what this reconciler last
	// applied and which nobody has changed since (see observed): they need neither a dry-run nor
	// an apply, so an unchanged revision costs a List per kind.
	untouched []bool
	// dryRun holds, by index of objs, the validation's dry-run results (nil where not dry-run).
	dryRun []*unstructured.Unstructured

	mu sync.Mutex
	// learned is, after the apply, the state of every object the reconciler knows to match Git.
	learned map[string]appliedState
}

// appliedState is an object as the reconciler last saw it matching Git.
type appliedState struct {
	hash     [sha256.Size]byte
	observed string
}

// observed summarises what others can change in a live object. Where the API server tracks a
// generation (custom resources, workloads), it moves with every spec change but not with status
// updates, which controllers make all the time (the autoscaler on NodePools); metadata edits do
// not move it, so labels and annotations are added. Objects without a generation (ConfigMaps)
// fall back to the resourceVersion, which any write moves.
func observed(u *unstructured.Unstructured) string {
	if g := u.GetGeneration(); g > 0 {
		h := sha256.New()
		for _, m := range []map[string]string{u.GetLabels(), u.GetAnnotations()} {
			keys := slices.Sorted(maps.Keys(m))
			for _, k := range keys {
				fmt.Fprintf(h, "%q=%q;", k, m[k])
			}
			h.Write([]byte{0})
		}
		return fmt.Sprintf("generation %d, metadata %x", g, h.Sum(nil))
	}
	return "resourceVersion " + u.GetResourceVersion()
}

// newPlan lists the live objects and finds the untouched ones.
func (r *Reconciler) newPlan(ctx context.Context, owner string, objs []*build.Object) (*plan, error) {
	p := &plan{owner: owner, objs: objs, learned: map[string]appliedState{}}
	live, err := r.liveObjects(ctx, owner, objs)
	if err != nil {
		return nil, err
	}
	p.live = live
	r.mu.Lock()
	memory := r.applied[owner]
	r.mu.Unlock()
	p.hashes = make([][sha256.Size]byte, len(objs))
	p.untouched = make([]bool, len(objs))
	for i, o := range objs {
		data, err := o.Object.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.ID(), err)
		}
		p.hashes[i] = sha256.Sum256(data)
		key := liveKey(o.Object)
		if l, ok := live[key]; ok {
			m, known := memory[key]
			p.untouched[i] = known && m.hash == p.hashes[i] && m.observed == observed(l)
		}
	}
	return p, nil
}

// learn records that the object at index i matches Git in the state live.
func (p *plan) learn(i int, live *unstructured.Unstructured) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.learned[liveKey(p.objs[i].Object)] = appliedState{hash: p.hashes[i], observed: observed(live)}
}

// remember keeps what a successful apply learned, for the next reconciliation of owner; nil
// forgets (after a failure, everything is dry-run again).
func (r *Reconciler) remember(owner string, learned map[string]appliedState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if learned == nil {
		delete(r.applied, owner)
		return
	}
	r.applied[owner] = learned
}

// liveObjects lists, once per kind and namespace, the objects that carry the owner label. A kind
// the cluster does not serve yet (its CRD comes with this revision) has none.
func (r *Reconciler) liveObjects(ctx context.Context, owner string, objs []*build.Object) (map[string]*unstructured.Unstructured, error) {
	type scope struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	scopes := map[scope]bool{}
	for _, o := range objs {
		scopes[scope{o.Object.GroupVersionKind(), o.Object.GetNamespace()}] = true
	}
	live := map[string]*unstructured.Unstructured{}
	for s := range scopes {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
		err := r.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{OwnerLabel: owner})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", s.gvk.Kind, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			u.SetGroupVersionKind(s.gvk)
			live[liveKey(u)] = u
		}
	}
	return live, nil
}

func liveKey(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().GroupKind().String() + "/" + u.GetNamespace() + "/" + u.GetName()
}
