package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	rtcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) {
	// Each test's manager logs to its own buffer; what logs through the global logger (client-go
	// reflectors) is noise here.
	ctrl.SetLogger(logr.Discard())
	localenvtest.Main(m)
}

const secretNamespace = "karpool-system"

// harness runs the PoolSync controller in a controller-runtime manager against the shared local
// control plane, with its log captured.
type harness struct {
	t       *testing.T
	c       client.Client
	log     *logBuffer
	metrics *metrics.Recorder
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, "%s %s\n", prefix, args)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startController runs the controller; configure may change its options.
func startController(t *testing.T, configure ...func(*Options)) *harness {
	t.Helper()
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	recorder := metrics.NewRecorder() // unregistered, so that every test's manager can have one
	logger := funcr.New(logs.write, funcr.Options{Verbosity: 1})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		SecretNamespace: secretNamespace,
		SecretReader:    mgr.GetAPIReader(),
		EventRecorder:   mgr.GetEventRecorderFor("karpool"),
		Metrics:         rtcontroller.NewMetrics(mgr, recorder),
	}
	for _, f := range configure {
		f(&opts)
	}
	r := New(mgr.GetClient(), opts)
	if err := r.SetupWithManager(mgr, SetupOptions{SkipNameValidation: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &harness{t: t, c: c, log: logs, metrics: recorder}
}

// poolSync creates a PoolSync reconciling every second and removes it, and everything it
// applied, when the test ends.
func (h *harness) poolSync(name, url, path string, mutate ...func(*v1alpha1.PoolSync)) *v1alpha1.PoolSync {
	h.t.Helper()
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSyncSpec{
			URL:           url,
			Path:          path,
			Interval:      metav1.Duration{Duration: time.Second},
			RetryInterval: &metav1.Duration{Duration: 500 * time.Millisecond},
			Timeout:       &metav1.Duration{Duration: 30 * time.Second},
			Prune:         true,
		},
	}
	for _, m := range mutate {
		m(ps)
	}
	if err := h.c.Create(context.Background(), ps); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { h.cleanup(name) })
	return ps
}

var ownedKinds = []schema.GroupVersionKind{
	{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"},
	{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "", Version: "v1", Kind: "ConfigMap"},
}

func (h *harness) cleanup(name string) {
	ctx := context.Background()
	_ = h.c.Delete(ctx, &v1alpha1.PoolSync{ObjectMeta: metav1.ObjectMeta{Name: name}})
	h.waitFor(30*time.Second, "PoolSync "+name+" gone", func() (bool, string) {
		err := h.c.Get(ctx, types.NamespacedName{Name: name}, &v1alpha1.PoolSync{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for _, gvk := range ownedKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.c.List(ctx, list, client.MatchingLabels{OwnerLabel: name}); err != nil {
			h.t.Errorf("listing %s: %v", gvk.Kind, err)
			continue
		}
		for i := range list.Items {
			if err := h.c.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				h.t.Errorf("deleting %s: %v", list.Items[i].GetName(), err)
			}
		}
	}
}

// waitFor polls cond until it holds, failing the test with cond's last explanation at the deadline.
func (h *harness) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %s waiting for %s; last state: %s\ncontroller log:\n%s", timeout, what, last, tail(h.log.String(), 30))
		}
		<-tick.C
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (h *harness) get(name string) *v1alpha1.PoolSync {
	h.t.Helper()
	ps := &v1alpha1.PoolSync{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: name}, ps); err != nil {
		h.t.Fatal(err)
	}
	return ps
}

func describe(ps *v1alpha1.PoolSync) string {
	ready := conditions.Get(ps, meta.ReadyCondition)
	if ready == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("Ready=%s %s: %s (applied %s, attempted %s)", ready.Status, ready.Reason, ready.Message, ps.Status.LastAppliedRevision, ps.Status.LastAttemptedRevision)
}

// waitApplied waits until the PoolSync is Ready with commit applied, and checks the status is
// kstatus-compliant for a finished reconciliation.
func (h *harness) waitApplied(name, commit string) *v1alpha1.PoolSync {
	h.t.Helper()
	var ps *v1alpha1.PoolSync
	h.waitFor(60*time.Second, name+" to apply "+commit, func() (bool, string) {
		ps = h.get(name)
		// kstatus reads a finished reconciliation from Ready=True without Reconciling or Stalled
		// (between two, Reconciling=True shows the next one running).
		ok := conditions.IsReady(ps) && ps.Status.LastAppliedRevision == "main@sha1:"+commit &&
			!conditions.Has(ps, meta.StalledCondition) && !conditions.Has(ps, meta.ReconcilingCondition)
		return ok, describe(ps)
	})
	if ps.Status.ObservedGeneration != ps.Generation {
		h.t.Errorf("observedGeneration %d, generation %d", ps.Status.ObservedGeneration, ps.Generation)
	}
	return ps
}

// waitFailed waits until the PoolSync is Ready=False with reason, and returns it.
func (h *harness) waitFailed(name, reason string) *v1alpha1.PoolSync {
	h.t.Helper()
	var ps *v1alpha1.PoolSync
	h.waitFor(60*time.Second, name+" to fail with "+reason, func() (bool, string) {
		ps = h.get(name)
		return conditions.IsFalse(ps, meta.ReadyCondition) && conditions.GetReason(ps, meta.ReadyCondition) == reason, describe(ps)
	})
	return ps
}

func (h *harness) nodePool(name string) (*karpenterv1.NodePool, error) {
	np := &karpenterv1.NodePool{}
	err := h.c.Get(context.Background(), types.NamespacedName{Name: name}, np)
	return np, err
}

// events returns the messages of the PoolSync's events with the given reason.
func (h *harness) events(name, reason string) []string {
	h.t.Helper()
	list := &corev1.EventList{}
	if err := h.c.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == v1alpha1.PoolSyncKind && e.InvolvedObject.Name == name && (reason == "" || e.Reason == reason) {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

func (h *harness) waitEvent(name, reason, contains string) {
	h.t.Helper()
	h.waitFor(30*time.Second, fmt.Sprintf("a %s event containing %q", reason, contains), func() (bool, string) {
		evs := h.events(name, reason)
		for _, e := range evs {
			if strings.Contains(e, contains) {
				return true, ""
			}
		}
		return false, strings.Join(h.events(name, ""), "\n")
	})
}

// metricSeries counts the time series the metrics recorder holds.
func (h *harness) metricSeries() int {
	ch := make(chan prometheus.Metric, 1000)
	for _, c := range h.metrics.Collectors() {
		c.Collect(ch)
	}
	close(ch)
	return len(ch)
}

func statusJSON(ps *v1alpha1.PoolSync) string {
	data, _ := json.Marshal(ps)
	return string(data)
}
