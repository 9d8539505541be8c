// Package nodeoverlay keeps NodeOverlay status current: ValidationSucceeded (False, reason
// RuntimeValidation or Conflict, for an overlay applied nowhere), FieldsHonored (capacity
// resources the scheduling engine does not schedule on) and Ready. As in Karpenter, it runs
// only with the NodeOverlay gate (so a cluster without the gate needs no NodeOverlay CRD).
package nodeoverlay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/overlay"
	"github.com/karpool/karpool/internal/unimplemented"
)

// Evaluator applies overlays to the pools as a provisioning round sees them.
type Evaluator interface {
	OverlayVerdicts(ctx context.Context, overlays []v1alpha1.NodeOverlay) ([]overlay.Verdict, error)
}

// Recheck is how often overlays are evaluated again without an event: instance types and
// offerings change without any object changing.
const Recheck = 5 * time.Minute

// Status reconciles the status of every NodeOverlay at once: whether one applies depends on
// all the others.
type Status struct {
	client client.Client
	eval   Evaluator
}

// NewStatus returns the status reconciler.
func NewStatus(c client.Client, eval Evaluator) *Status {
	return &Status{client: c, eval: eval}
}

// Reconcile evaluates every overlay and patches the statuses that changed.
func (s *Status) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var list v1alpha1.NodeOverlayList
	if err := s.client.List(ctx, &list); err != nil {
		return reconcile.Result{}, err
	}
	verdicts, err := s.eval.OverlayVerdicts(ctx, list.Items)
	if err != nil {
		return reconcile.Result{}, err
	}
	byName := map[string]overlay.Verdict{}
	for _, v := range verdicts {
		byName[v.Name] = v
	}
	for i := range list.Items {
		o := &list.Items[i]
		before := o.DeepCopy()
		conditions(o, byName[o.Name])
		if equality.Semantic.DeepEqual(before.Status, o.Status) {
			continue
		}
		if err := s.client.Status().Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{RequeueAfter: Recheck}, nil
}

// conditions sets the overlay's conditions from its verdict.
func conditions(o *v1alpha1.NodeOverlay, v overlay.Verdict) {
	gen := o.Generation
	set := func(t string, ok bool, reason, msg string) {
		st := metav1.ConditionTrue
		if !ok {
			st = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	switch {
	case v.Applied():
		set(v1alpha1.ConditionValidationSucceeded, true, "ValidationSucceeded", "")
		set(karpv1.ConditionTypeReady, true, "Ready", "")
	default:
		set(v1alpha1.ConditionValidationSucceeded, false, v.Reason, v.Message)
		set(karpv1.ConditionTypeReady, false, v.Reason, v.Message)
	}
	if len(v.Unmodelled) == 0 {
		set(unimplemented.ConditionType, true, "Honored", "")
		return
	}
	set(unimplemented.ConditionType, false, "NotImplemented", fmt.Sprintf(
		"spec.capacity %s: karpool's scheduling engine does not schedule on these resources, so pods requesting them get no new nodes (Karpenter would add them to the selected instance types); the overlay's other changes apply",
		strings.Join(v.Unmodelled, ", ")))
}

// key is the one request every event maps to.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "nodeoverlays"}}

// SetupWithManager registers the reconciler: any change to an overlay, a NodePool or an
// EC2NodeClass re-evaluates all overlays.
func (s *Status) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeoverlay.status").WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 1}).
		Watches(&v1alpha1.NodeOverlay{}, all).
		Watches(&karpv1.NodePool{}, all).
		Watches(&awsv1.EC2NodeClass{}, all).
		Complete(s)
}
