package up

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/migrate"
	"github.com/karpool/karpool/manifests/build"
)

// WorkloadFieldManager owns the fields of the workload up applies, as "kubectl" does for
// `kubectl apply --server-side`; PoolSync never touches these objects (they carry no owner label).
const WorkloadFieldManager = "karpool-up"

// example is an example split the way a cluster keeps it: the pools repository holds the pools,
// and the workload is applied to the cluster outside Git, as the seed tutorials do with
// `kubectl apply`. Keeping the workload out of Git matters: PoolSync corrects drift, so a
// Deployment in the repository with `replicas: 0` would undo every `kubectl scale`.
type example struct {
	// pools are the files of the repository by slash-separated path: the documents of the Karpenter
	// API groups (legacy ones migrated to v1) and kustomizations.
	pools map[string][]byte
	// workload is every other object, in file order, located in the example's files.
	workload []*build.Object
}

// readExample reads the directory dir of fsys and sorts its files into pools and workload. A
// file holds either kind, not both, so that the repository keeps each pool file whole.
func readExample(fsys fs.FS, dir string) (*example, error) {
	ex := &example{pools: map[string][]byte{}}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if ext := path.Ext(p); (ext != ".yaml" && ext != ".yml") || slices.Contains(build.KustomizationFiles, path.Base(p)) {
			ex.pools[rel] = data
			return nil
		}
		name := "examples/" + p
		data, _, err = migrate.Bytes(name, data)
		if err != nil {
			return fmt.Errorf("migrating %s: %w", name, err)
		}
		objs, err := build.Build(context.Background(), map[string][]byte{name: data}, "")
		if err != nil {
			return err
		}
		var pools, workload []string
		for _, o := range objs {
			if isPool(o.Object) {
				pools = append(pools, o.ID())
			} else {
				workload = append(workload, o.ID())
				ex.workload = append(ex.workload, o)
			}
		}
		if len(pools) > 0 && len(workload) > 0 {
			return fmt.Errorf("%s mixes pools (%s) with workload objects (%s): the pools go to Git and the workload does not, so put them in separate files",
				name, strings.Join(pools, ", "), strings.Join(workload, ", "))
		}
		if len(workload) == 0 {
			ex.pools[rel] = data
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ex.pools) == 0 {
		return nil, fmt.Errorf("examples/%s holds no NodePool or EC2NodeClass, only a workload, so there is nothing to put in the pools repository", dir)
	}
	return ex, nil
}

// isPool says whether an object belongs in the pools repository: it is of a Karpenter API group
// (NodePool, EC2NodeClass, or a legacy kind migration left alone).
func isPool(u *unstructured.Unstructured) bool {
	g := u.GroupVersionKind().Group
	return g == karpv1.GroupVersion.Group || g == awsv1.GroupVersion.Group
}

// applyWorkload applies the objects with server-side apply under WorkloadFieldManager, as
// `kubectl apply --server-side` would, into the namespace "default" when they name none. The
// namespaces they use are created first, as the seeds do with `kubectl create namespace`. It
// returns the objects as applied (namespace set).
func applyWorkload(ctx context.Context, c client.Client, objs []*build.Object) ([]*build.Object, error) {
	var applied []*build.Object
	for _, o := range objs {
		u := o.Object.DeepCopy()
		gvk := u.GroupVersionKind()
		mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return applied, fmt.Errorf("%s: %s: %w", o.Source, o.ID(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(metav1.NamespaceDefault)
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetNamespace()}}
			if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				return applied, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(WorkloadFieldManager)); err != nil {
			return applied, fmt.Errorf("%s: applying %s: %w", o.Source, o.ID(), err)
		}
		applied = append(applied, &build.Object{Object: u, Source: o.Source})
	}
	return applied, nil
}
