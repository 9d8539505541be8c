package reconciler

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/testbed/gittest"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

// applyCounter counts server-side applies, dry-run or real.
type applyCounter struct {
	mu            sync.Mutex
	dryRuns, real int
}

func (a *applyCounter) reset() (dryRuns, real int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	dryRuns, real = a.dryRuns, a.real
	a.dryRuns, a.real = 0, 0
	return dryRuns, real
}

func TestUntouchedObjectsAreNeitherDryRunNorApplied(t *testing.T) {
	env := localenvtest.Env(t)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	count := &applyCounter{}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			o := &client.ApplyOptions{}
			o.ApplyOptions(opts)
			count.mu.Lock()
			if len(o.DryRun) > 0 {
				count.dryRuns++
			} else {
				count.real++
			}
			count.mu.Unlock()
			return c.Apply(ctx, obj, opts...)
		},
	})
	h := &harness{t: t, c: base}
	// The pools without the inflate Deployment, whose controller annotates it after each apply.
	repo := gittest.NewRepo(t, t.TempDir(), "pools.git")
	repo.CopyDir("../examples/workshop", "pools")
	repo.Remove("pools/workload/inflate.yaml")
	repo.Remove("pools/kustomization.yaml")
	repo.Commit("pools")
	r := New(c, Options{})
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: "untouched"},
		Spec:       v1alpha1.PoolSyncSpec{URL: repo.FileURL(), Path: "pools", Interval: metav1.Duration{Duration: time.Minute}},
	}
	t.Cleanup(func() { h.cleanup(ps.Name) })
	once := func(wantDryRuns, wantReal int) {
		t.Helper()
		if err := r.ReconcileDetached(context.Background(), ps); err != nil {
			t.Fatal(err)
		}
		if d, a := count.reset(); d != wantDryRuns || a != wantReal {
			t.Fatalf("%d dry-runs and %d applies, want %d and %d", d, a, wantDryRuns, wantReal)
		}
	}
	once(2, 2) // first time: everything
	once(0, 0) // untouched

	// Status updates, which the autoscaler makes all the time, do not count as changes.
	np, err := h.nodePool("default")
	if err != nil {
		t.Fatal(err)
	}
	if err := base.Status().Patch(context.Background(), np, client.RawPatch(types.MergePatchType, []byte(`{"status":{"nodes":3}}`))); err != nil {
		t.Fatal(err)
	}
	once(0, 0)
	if np, err = h.nodePool("default"); err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	if err := base.Update(context.Background(), np, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	once(1, 1) // the edited object only
	once(0, 0)

	// A metadata edit does not move the generation, and is seen all the same.
	np, err = h.nodePool("default")
	if err != nil {
		t.Fatal(err)
	}
	np.Labels["edited"] = "by-hand"
	if err := base.Update(context.Background(), np, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	once(1, 1)
	if np, _ = h.nodePool("default"); np.Labels["edited"] != "" {
		t.Errorf("label added in the cluster survived: %v", np.Labels)
	}
	once(0, 0)
}
