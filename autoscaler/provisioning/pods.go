package provisioning

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/state"
)

// PodWatcher triggers the provisioner when a pod becomes provisionable, and measures how long
// the pods it saw pending took to get bound.
type PodWatcher struct {
	client      client.Client
	provisioner *Provisioner
	metrics     *metrics.Metrics

	mu      sync.Mutex
	pending map[types.UID]bool
}

// NewPodWatcher returns the pod controller feeding p.
func NewPodWatcher(c client.Client, p *Provisioner, m *metrics.Metrics) *PodWatcher {
	return &PodWatcher{client: c, provisioner: p, metrics: m, pending: map[types.UID]bool{}}
}

// Reconcile looks at one pod.
func (w *PodWatcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := w.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case state.Provisionable(pod):
		w.pending[pod.UID] = true
		w.provisioner.TriggerFor(pod.UID)
	case pod.Spec.NodeName != "" && w.pending[pod.UID]:
		delete(w.pending, pod.UID)
		if w.metrics != nil {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					w.metrics.PodBindLatency.Observe(c.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
				}
			}
		}
	case pod.DeletionTimestamp != nil:
		delete(w.pending, pod.UID)
	}
	return reconcile.Result{}, nil
}

// SetupWithManager registers the pod controller.
func (w *PodWatcher) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("provisioner.trigger.pod").WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).For(&corev1.Pod{}).Complete(w)
}
