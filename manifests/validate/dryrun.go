package validate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/manifests/build"
)

// DryRun asks the API server to accept every object with a server-side apply dry-run, so that
// OpenAPI validation, CEL rules and admission see the objects before any is applied.
type DryRun struct {
	Client client.Client
	// FieldManager is the apply's field manager; dry-run conflicts are judged as for the real
	// apply.
	FieldManager string
	// Concurrency bounds the requests in flight; default 8.
	Concurrency int
}

// Validate implements Validator.
func (d DryRun) Validate(ctx context.Context, objs []*build.Object) ([]Finding, error) {
	fs, _, err := d.Check(ctx, objs)
	return fs, err
}

// Check is Validate that also returns, by index of objs, each accepted object as the server
// would store it; the entry is nil for objects that were rejected or not dry-run (see below). An
// apply can compare these with the objects in the cluster and skip its own dry-run.
func (d DryRun) Check(ctx context.Context, objs []*build.Object) ([]Finding, []*unstructured.Unstructured, error) {
	// Objects that need another object of the same set to exist first (a namespaced object in a
	// new Namespace, a custom resource of a new CRD) cannot be dry-run before that one is applied;
	// their dry-run's complaint about it is not a finding: the apply stages them, and validates
	// them with its own dry-run once their Namespace or CRD exists.
	newNamespaces, newKinds := map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		switch gk := o.Object.GroupVersionKind().GroupKind(); {
		case gk.Group == "" && gk.Kind == "Namespace":
			newNamespaces[o.Object.GetName()] = true
		case gk.Group == "apiextensions.k8s.io" && gk.Kind == "CustomResourceDefinition":
			group, _, _ := unstructured.NestedString(o.Object.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object.Object, "spec", "names", "kind")
			newKinds[group+"/"+kind] = true
		}
	}
	n := d.Concurrency
	if n <= 0 {
		n = 8
	}
	var (
		mu       sync.Mutex
		findings = make([][]Finding, len(objs))
		results  = make([]*unstructured.Unstructured, len(objs))
		failure  error
		sem      = make(chan struct{}, n)
		wg       sync.WaitGroup
	)
	for i, o := range objs {
		gk := o.Object.GroupVersionKind().GroupKind()
		staged := newKinds[gk.Group+"/"+gk.Kind] || newNamespaces[o.Object.GetNamespace()]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fs, res, err := d.one(ctx, o, staged)
			mu.Lock()
			defer mu.Unlock()
			findings[i], results[i] = fs, res
			if err != nil && failure == nil {
				failure = err
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		return nil, nil, failure
	}
	var out []Finding
	for _, fs := range findings {
		out = append(out, fs...)
	}
	return out, results, nil
}

// Recorder is a DryRun that keeps the results of its last Validate, for the apply that follows,
// and leaves out objects known not to need one. Make one per reconciliation.
type Recorder struct {
	DryRun
	// Skip, by index of the objects to validate, marks objects not to dry-run: those the cluster
	// already holds exactly as last applied, which the apply will not write.
	Skip []bool
	// Results are Check's results, by index of the validated objects (nil where skipped).
	Results []*unstructured.Unstructured
}

// Validate implements Validator.
func (r *Recorder) Validate(ctx context.Context, objs []*build.Object) ([]Finding, error) {
	var subset []*build.Object
	var index []int
	for i, o := range objs {
		if i < len(r.Skip) && r.Skip[i] {
			continue
		}
		subset = append(subset, o)
		index = append(index, i)
	}
	fs, res, err := r.Check(ctx, subset)
	r.Results = make([]*unstructured.Unstructured, len(objs))
	for j, u := range res {
		r.Results[index[j]] = u
	}
	return fs, err
}

// notDeclaredRE reads the server-side apply error for a field the schema does not have:
// ".spec.foo: field not declared in schema".
var notDeclaredRE = regexp.MustCompile(`\.([^\s:]+): field not declared in schema`)

func (d DryRun) one(ctx context.Context, o *build.Object, staged bool) ([]Finding, *unstructured.Unstructured, error) {
	if o.Object.GetNamespace() == "" {
		// A namespaced object without a namespace would be sent to a URL that does not exist.
		if namespaced, err := d.Client.IsObjectNamespaced(o.Object); err == nil && namespaced {
			return []Finding{at(o, "metadata", "api-server", "a "+o.Object.GetKind()+" is namespaced: set metadata.namespace (or namespace: in the kustomization)")}, nil, nil
		}
	}
	res := o.Object.DeepCopy()
	err := d.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(res), client.DryRunAll, client.ForceOwnership, client.FieldOwner(d.FieldManager))
	if err == nil {
		return nil, res, nil
	}
	if staged && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err)) {
		return nil, nil, nil
	}
	fs, err := classify(o, err)
	return fs, nil, err
}

// classify turns a dry-run error into findings when the object is at fault, and returns it
// otherwise.
func classify(o *build.Object, err error) ([]Finding, error) {
	var status apierrors.APIStatus
	msg := err.Error()
	switch m := notDeclaredRE.FindStringSubmatch(msg); {
	case m != nil:
		// The API server answers 500 for this, but it is the object's fault.
		return []Finding{at(o, m[1], "api-server", "field not declared in the schema: check its spelling and indentation")}, nil
	case strings.Contains(msg, "failed to create typed patch object"):
		return []Finding{at(o, "", "api-server", msg)}, nil
	case meta.IsNoMatchError(err):
		gvk := o.Object.GroupVersionKind()
		return []Finding{at(o, "apiVersion", "api-server", fmt.Sprintf("the cluster does not serve kind %s in %s: install its CRD, or fix apiVersion/kind", gvk.Kind, gvk.GroupVersion()))}, nil
	case apierrors.IsNotFound(err) && o.Object.GetNamespace() != "":
		return []Finding{at(o, "metadata.namespace", "api-server", fmt.Sprintf("namespace %q does not exist: add a Namespace object to the repository or create it", o.Object.GetNamespace()))}, nil
	case apierrors.IsInvalid(err) && errors.As(err, &status) && status.Status().Details != nil && len(status.Status().Details.Causes) > 0:
		var out []Finding
		for _, c := range status.Status().Details.Causes {
			out = append(out, at(o, strings.TrimPrefix(c.Field, "."), "api-server", c.Message))
		}
		return out, nil
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsConflict(err), apierrors.IsForbidden(err) && strings.Contains(msg, "admission"):
		return []Finding{at(o, "", "api-server", msg)}, nil
	default:
		return nil, fmt.Errorf("dry-run of %s: %w", o.ID(), err)
	}
}
