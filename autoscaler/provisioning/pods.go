package provisioning

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/state"
)

// PodWatcher triggers the provisioner when a pod becomes provisionable or waits for the
// kube-scheduler's first try, hands a failed pod that was planned onto a NodeClaim its
// nomination (state.Nominations.HandBack), and measures how long the pods it saw pending took to
// get bound and to become ready.
type PodWatcher struct {
	client      client.Client
	provisioner *Provisioner
	metrics     *metrics.Metrics

	mu sync.Mutex
	// provisionable: seen provisionable (karpool_pods_pending_to_bound_seconds); unbound: seen
	// pending and not scheduled (karpenter_pods_bound_duration_seconds); unstarted: seen
	// pending (karpenter_pods_startup_duration_seconds).
	provisionable, unbound, unstarted map[types.NamespacedName]bool
}

// NewPodWatcher returns the pod controller feeding p and observing into m.
func NewPodWatcher(c client.Client, p *Provisioner, m *metrics.Metrics) *PodWatcher {
	return &PodWatcher{client: c, provisioner: p, metrics: m,
		provisionable: map[types.NamespacedName]bool{}, unbound: map[types.NamespacedName]bool{}, unstarted: map[types.NamespacedName]bool{}}
}

// Reconcile looks at one pod.
func (w *PodWatcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.NamespacedName
	pod := &corev1.Pod{}
	if err := w.client.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(key)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.DeletionTimestamp != nil {
		w.forget(key)
		return reconcile.Result{}, nil
	}
	if state.Provisionable(pod) && w.handBack(ctx, pod) {
		return reconcile.Result{}, nil
	}
	if state.Provisionable(pod) || state.Untried(pod) {
		w.provisioner.TriggerFor(pod.UID)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	scheduled, bound := conditionSince(pod, corev1.PodScheduled)
	ready, started := conditionSince(pod, corev1.PodReady)
	if state.Provisionable(pod) {
		w.provisionable[key] = true
	}
	if pod.Status.Phase == corev1.PodPending {
		w.unstarted[key] = true
		if !bound {
			w.unbound[key] = true
		}
	}
	if pod.Spec.NodeName != "" && bound {
		observe(w.provisionable, key, pod, scheduled, w.metrics.PodBindLatency)
		observe(w.unbound, key, pod, scheduled, w.metrics.PodBound)
	}
	switch {
	case started:
		observe(w.unstarted, key, pod, ready, w.metrics.PodStartup)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		delete(w.unstarted, key) // a finished pod never becomes ready
	}
	return reconcile.Result{}, nil
}

// handBack nominates a pod the kube-scheduler failed to the node its planned NodeClaim expects,
// while that node boots or waits for its cohort (state.Nominations.HandBack), and reports
// whether it did.
func (w *PodWatcher) handBack(ctx context.Context, pod *corev1.Pod) bool {
	node, ok := w.provisioner.opts.Nominations.HandBack(pod.UID)
	if !ok {
		return false
	}
	if err := w.client.Status().Patch(ctx, pod, state.NominationPatch(pod, node)); err != nil {
		log.FromContext(ctx).V(1).Info("could not hand a nomination back", "Pod", klog.KObj(pod), "Node", node, "error", err.Error())
		return false
	}
	return true
}

// observe records the time from the pod's creation to at, if the pod is in seen, and forgets it.
func observe(seen map[types.NamespacedName]bool, key types.NamespacedName, pod *corev1.Pod, at time.Time, metric prometheus.Observer) {
	if seen[key] {
		delete(seen, key)
		metric.Observe(at.Sub(pod.CreationTimestamp.Time).Seconds())
	}
}

func (w *PodWatcher) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.provisionable, key)
	delete(w.unbound, key)
	delete(w.unstarted, key)
}

// conditionSince says whether the pod's condition is True, and since when.
func conditionSince(pod *corev1.Pod, t corev1.PodConditionType) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// podWorkers: on a scale-out the watcher hands nominations to hundreds of pods as the
// kube-scheduler first fails them, one status write each.
const podWorkers = 16

// SetupWithManager registers the pod controller.
func (w *PodWatcher) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("provisioner.trigger.pod").WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: podWorkers}).For(&corev1.Pod{}).Complete(w)
}
