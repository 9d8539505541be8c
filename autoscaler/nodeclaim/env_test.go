package nodeclaim

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/state"
	b "github.com/karpool/karpool/testbed/builders"
	"github.com/karpool/karpool/testbed/fakecloud"
)

// t0 is the start of every test's clock.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// env is a lifecycle on controller-runtime's fake client and the fake cloud, with a clock
// the test moves.
type env struct {
	t     *testing.T
	c     client.Client
	cloud *fakecloud.CloudProvider
	noms  *state.Nominations
	rec   *record.FakeRecorder
	now   time.Time
	// capacityGone counts the lifecycle's calls of Options.CapacityGone.
	capacityGone int
	l            *Lifecycle
}

// The instance types of every test: small is the cheapest, in two zones.
var (
	small = fakecloud.InstanceType("small", 2, 4,
		fakecloud.Offering("zone-a", karpv1.CapacityTypeOnDemand, 0.1), fakecloud.Offering("zone-b", karpv1.CapacityTypeOnDemand, 0.11))
	large = fakecloud.InstanceType("large", 8, 32, fakecloud.Offering("zone-a", karpv1.CapacityTypeOnDemand, 0.4))
)

// newEnv stores the objects (and a ready EC2NodeClass "default") in the fake client; funcs,
// if given, intercept its calls.
func newEnv(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *env {
	e := &env{t: t, cloud: fakecloud.New(small, large), noms: state.NewNominations(), rec: record.NewFakeRecorder(100), now: t0}
	builder := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(append(objs, b.NodeClass("default", true))...).
		WithStatusSubresource(&karpv1.NodeClaim{}, &corev1.Pod{}).
		WithIndex(&corev1.Node{}, nodeProviderIDField, func(o client.Object) []string { return nonEmpty(o.(*corev1.Node).Spec.ProviderID) }).
		WithIndex(&karpv1.NodeClaim{}, claimProviderIDField, func(o client.Object) []string { return nonEmpty(o.(*karpv1.NodeClaim).Status.ProviderID) }).
		WithIndex(&corev1.Pod{}, podNodeNameField, func(o client.Object) []string { return nonEmpty(o.(*corev1.Pod).Spec.NodeName) })
	if funcs != nil {
		builder = builder.WithInterceptorFuncs(*funcs)
	}
	e.c = builder.Build()
	e.l = NewLifecycle(e.c, e.options())
	return e
}

func (e *env) options() Options {
	return Options{Provider: e.cloud, Recorder: e.rec, Nominations: e.noms, RegistrationTTL: 15 * time.Minute,
		CapacityGone: func() { e.capacityGone++ }, Now: func() time.Time { return e.now }}
}

func (e *env) reconcile(name string) reconcile.Result {
	e.t.Helper()
	res, err := e.l.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

// claim returns the stored NodeClaim, nil once it is gone.
func (e *env) claim(name string) *karpv1.NodeClaim {
	e.t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		e.t.Fatal(err)
	}
	return nc
}

// node returns the stored Node, nil once it is gone.
func (e *env) node(name string) *corev1.Node {
	e.t.Helper()
	n := &corev1.Node{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		e.t.Fatal(err)
	}
	return n
}

// pod returns the stored pod, nil once it is gone.
func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		e.t.Fatal(err)
	}
	return p
}

// create stores an object after the start.
func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.c.Create(context.Background(), o); err != nil {
		e.t.Fatal(err)
	}
}

// events drains the recorded events.
func (e *env) events() string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// launch reconciles a new NodeClaim until its instance is launched, and returns it.
func (e *env) launch(name string) *karpv1.NodeClaim {
	e.t.Helper()
	e.reconcile(name)
	nc := e.claim(name)
	if nc == nil || !state.Launched(nc) {
		e.t.Fatalf("%s not launched: %+v", name, nc)
	}
	return nc
}

func condition(nc *karpv1.NodeClaim, t string) karpv1.Condition {
	if c := state.Condition(nc, t); c != nil {
		return *c
	}
	return karpv1.Condition{}
}

func hasKey(taints []corev1.Taint, key string) bool {
	for _, t := range taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// offering names the offering a NodeClaim launched as.
func offering(nc *karpv1.NodeClaim) string {
	return nc.Labels[catalog.LabelInstanceType] + "/" + nc.Labels[catalog.LabelZone] + "/" + nc.Labels[catalog.LabelCapacityType]
}
