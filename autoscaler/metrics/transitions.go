package metrics

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Transitions counts status-condition changes (operator_<kind>_status_condition_transitions_total)
// and observes how long a condition stayed in the status it left (_transition_seconds). Like
// Karpenter's, the count is best effort: it compares each object with how it last saw it, so two
// changes between two looks count once, and after a restart every condition that is True or
// False counts once more.
type Transitions struct {
	total   map[*conditionKind]*prometheus.CounterVec
	seconds map[*conditionKind]*prometheus.HistogramVec
	// The operator_status_condition_* names, with group and kind labels.
	oldTotal   *prometheus.CounterVec
	oldSeconds *prometheus.HistogramVec
}

func newTransitions() *Transitions {
	t := &Transitions{total: map[*conditionKind]*prometheus.CounterVec{}, seconds: map[*conditionKind]*prometheus.HistogramVec{}}
	for _, k := range conditionKinds {
		extra := k.extraNames()
		t.total[k] = transitionsTotal("operator_"+k.metric+"_status_condition_transitions_total", extra)
		t.seconds[k] = transitionSeconds("operator_"+k.metric+"_status_condition_transition_seconds", k.buckets, extra)
	}
	t.oldTotal = transitionsTotal("operator_status_condition_transitions_total", []string{"group", "kind"})
	t.oldSeconds = transitionSeconds("operator_status_condition_transition_seconds", prometheus.DefBuckets, []string{"group", "kind"})
	return t
}

func transitionsTotal(name string, extra []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "Status condition changes, by condition type, new status and reason."},
		append([]string{"type", "status", labelReason}, extra...))
}

func transitionSeconds(name string, buckets []float64, extra []string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Buckets: buckets,
		Help: "Time a status condition spent in a status before changing, by condition type and the status it left."},
		append([]string{"type", "status"}, extra...))
}

func (t *Transitions) collectors() []prometheus.Collector {
	out := []prometheus.Collector{t.oldTotal, t.oldSeconds}
	for _, k := range conditionKinds {
		out = append(out, t.total[k], t.seconds[k])
	}
	return out
}

// Describe sends every family's description.
func (t *Transitions) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range t.collectors() {
		c.Describe(ch)
	}
}

// Collect sends every family's series.
func (t *Transitions) Collect(ch chan<- prometheus.Metric) {
	for _, c := range t.collectors() {
		c.Collect(ch)
	}
}

// change is a condition whose status differs from how it was last seen; before is nil for a
// condition not seen before.
type change struct {
	after  condition
	before *condition
}

// changes compares an object's conditions with how they were last seen (pure). A condition seen
// for the first time counts unless it is Unknown, which is where every condition starts.
func changes(before, after []condition) []change {
	var out []change
	for _, a := range after {
		var b *condition
		for i := range before {
			if before[i].Type == a.Type {
				b = &before[i]
				break
			}
		}
		if (b == nil && a.Status == string(metav1.ConditionUnknown)) || (b != nil && b.Status == a.Status) {
			continue
		}
		out = append(out, change{a, b})
	}
	return out
}

// record counts an object's changes.
func (t *Transitions) record(kind *conditionKind, obj client.Object, cs []change) {
	extra := kind.extraValues(obj)
	for _, c := range cs {
		t.total[kind].WithLabelValues(append([]string{c.after.Type, c.after.Status, c.after.Reason}, extra...)...).Inc()
		if kind.deprecated {
			t.oldTotal.WithLabelValues(c.after.Type, c.after.Status, c.after.Reason, kind.group, kind.kind).Inc()
		}
		if c.before == nil {
			continue
		}
		spent := c.after.Since.Sub(c.before.Since).Seconds()
		t.seconds[kind].WithLabelValues(append([]string{c.before.Type, c.before.Status}, extra...)...).Observe(spent)
		if kind.deprecated {
			t.oldSeconds.WithLabelValues(c.before.Type, c.before.Status, kind.group, kind.kind).Observe(spent)
		}
	}
}

// watcher remembers how it last saw each object of one kind and records the changes.
type watcher struct {
	client      client.Client
	transitions *Transitions
	newObject   func() client.Object
	seen        sync.Map // namespace/name → []condition
}

// Reconcile compares one object with how it was last seen.
func (w *watcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := w.newObject()
	if err := w.client.Get(ctx, req.NamespacedName, obj); err != nil {
		w.seen.Delete(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	kind, now := conditionsOf(obj)
	var before []condition
	if v, ok := w.seen.Swap(req.NamespacedName, now); ok {
		before = v.([]condition)
	}
	w.transitions.record(kind, obj, changes(before, now))
	return reconcile.Result{}, nil
}

// WatchTransitions registers one watcher per kind (NodeClaim, NodePool, EC2NodeClass, Node).
// Like every controller, they run on the leader only.
func (t *Transitions) WatchTransitions(mgr ctrl.Manager) error {
	for _, newObject := range []func() client.Object{
		func() client.Object { return &karpv1.NodeClaim{} },
		func() client.Object { return &karpv1.NodePool{} },
		func() client.Object { return &awsv1.EC2NodeClass{} },
		func() client.Object { return &corev1.Node{} },
	} {
		kind, _ := conditionsOf(newObject())
		w := &watcher{client: mgr.GetClient(), transitions: t, newObject: newObject}
		err := ctrl.NewControllerManagedBy(mgr).Named("metrics.conditions." + kind.metric).
			WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
			For(newObject()).Complete(w)
		if err != nil {
			return err
		}
	}
	return nil
}
