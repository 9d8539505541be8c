package nodeclaim

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// podEventDedupe is how recent a NodeClaim's lastPodEventTime may be and still not be rewritten:
// a scale-out binds hundreds of pods to a node within seconds, and consolidateAfter is measured
// in tens of seconds at least (Karpenter skips writes within 5 s too).
const podEventDedupe = 5 * time.Second

// PodEvents keeps NodeClaims' status.lastPodEventTime: the last time a pod was bound to the
// claim's node or left it (finished or deleted). Consolidation waits consolidateAfter from it,
// so the clock survives restarts and can be read with kubectl.
type PodEvents struct {
	client client.Client
	now    func() time.Time
}

// NewPodEvents returns the controller; now may be nil (time.Now).
func NewPodEvents(c client.Client, now func() time.Time) *PodEvents {
	if now == nil {
		now = time.Now
	}
	return &PodEvents{client: c, now: now}
}

// Reconcile is keyed by node name: the queue folds a burst of pod events into one write.
func (e *PodEvents) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := e.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var claims karpv1.NodeClaimList
	if node.Spec.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	if err := e.client.List(ctx, &claims, client.MatchingFields{claimProviderIDField: node.Spec.ProviderID}); err != nil {
		return reconcile.Result{}, err
	}
	now := e.now()
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil || now.Sub(nc.Status.LastPodEventTime.Time) < podEventDedupe {
			continue
		}
		patch := client.MergeFrom(nc.DeepCopy())
		nc.Status.LastPodEventTime = metav1.NewTime(now)
		if err := e.client.Status().Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{}, nil
}

// SetupWithManager watches pods and enqueues the node of each pod event that changes what runs
// there.
func (e *PodEvents) SetupWithManager(mgr ctrl.Manager) error {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], node string) {
		if node != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
		}
	}
	h := handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		UpdateFunc: func(_ context.Context, ev event.TypedUpdateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if podEvent(ev.ObjectOld, ev.ObjectNew) {
				enqueue(q, ev.ObjectNew.Spec.NodeName)
			}
		},
		DeleteFunc: func(_ context.Context, ev event.TypedDeleteEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !terminal(ev.Object) { // a finished pod already counted when it finished
				enqueue(q, ev.Object.Spec.NodeName)
			}
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.podevents").
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, h)).
		WithOptions(controller.Options{SkipNameValidation: skipNameValidation}).
		Complete(e)
}

// podEvent: the pod was just bound, or just finished.
func podEvent(old, cur *corev1.Pod) bool {
	return old.Spec.NodeName == "" && cur.Spec.NodeName != "" || !terminal(old) && terminal(cur)
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
