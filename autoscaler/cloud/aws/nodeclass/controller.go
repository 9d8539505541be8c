// Package nodeclass is the EC2NodeClass status controller: it resolves a class's subnets,
// security groups, AMIs and instance profile through the AWS provider into its status, keeps
// its conditions (SubnetsReady, SecurityGroupsReady, AMIsReady, CapacityReservationsReady,
// InstanceProfileReady, ValidationSucceeded and Ready), drains the nodes of capacity blocks
// about to end, turns nodes whose reservation ended into on-demand ones, and on deletion waits for the class's NodeClaims to go before
// deleting the launch templates and the instance profile karpool created for it.
//
// Ready=True for the class's current generation (see Ready) is the promise the provisioning
// controller relies on: every selector resolved to something and the instance profile exists.
package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	cloudaws "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
	"github.com/karpool/karpool/internal/unimplemented"
)

// Finalizer holds a class until its NodeClaims are gone and its AWS resources deleted.
const Finalizer = "karpenter.k8s.aws/termination"

// ControllerName names the controller in logs and metrics.
const ControllerName = "ec2nodeclass-status"

// Condition reasons.
const (
	ReasonResolved         = "Resolved"
	ReasonNotFound         = "NotFound"
	ReasonInvalid          = "Invalid"
	ReasonResolutionFailed = "ResolutionFailed"
	ReasonNotReady         = "NotReady"
	ReasonTerminating      = "Terminating"
)

// Options configure the controller.
type Options struct {
	// Interval is how often a class is resolved again when nothing changed: subnets, groups
	// and AMIs change in AWS without the class changing. Default 5 minutes.
	Interval time.Duration
	// RetryInterval is how soon a class that is not Ready, or whose resolution failed, is tried
	// again. Default 30 seconds.
	RetryInterval time.Duration
	// MaxConcurrentReconciles defaults to 1.
	MaxConcurrentReconciles int
	// SkipNameValidation allows more than one controller of this name in a process (tests).
	SkipNameValidation bool
}

// Reconciler is the EC2NodeClass status controller.
type Reconciler struct {
	client   client.Client
	provider *cloudaws.Provider
	opts     Options
}

// New returns the controller; c reads and writes EC2NodeClasses and lists NodeClaims.
func New(c client.Client, p *cloudaws.Provider, opts Options) *Reconciler {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Minute
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 30 * time.Second
	}
	return &Reconciler{client: c, provider: p, opts: opts}
}

// SetupWithManager registers the controller: it reconciles a class when its spec changes, when
// its deletion starts, periodically, and when one of its NodeClaims is deleted (which may
// unblock the class's deletion). Status updates do not trigger it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	deleting := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}
	onlyDeletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&awsv1.EC2NodeClass{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting))).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(classOfClaim), builder.WithPredicates(onlyDeletes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles, SkipNameValidation: &r.opts.SkipNameValidation}).
		Complete(r)
}

func classOfClaim(_ context.Context, o client.Object) []reconcile.Request {
	nc, ok := o.(*karpv1.NodeClaim)
	if !ok || !refersToClass(nc) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: nc.Spec.NodeClassRef.Name}}}
}

func refersToClass(nc *karpv1.NodeClaim) bool {
	ref := nc.Spec.NodeClassRef
	return ref != nil && ref.Group == awsv1.GroupVersion.Group && ref.Kind == "EC2NodeClass"
}

// Ready reports whether a class may be launched from: its Ready condition is True and was
// computed for the class's current spec (observedGeneration), and it is not being deleted.
func Ready(nc *awsv1.EC2NodeClass) bool {
	c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == nc.Generation && nc.DeletionTimestamp.IsZero()
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nc := &awsv1.EC2NodeClass{}
	if err := r.client.Get(ctx, req.NamespacedName, nc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !nc.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, nc)
	}
	// The finalizer, and the hash of the static fields as Karpenter stamps it (the NodeClaims
	// launched from the class carry the hash of their launch; drift compares the two).
	hash := nc.Hash()
	if !controllerutil.ContainsFinalizer(nc, Finalizer) || nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != hash ||
		nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(nc, Finalizer)
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, awsv1.AnnotationEC2NodeClassHash, hash)
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, awsv1.AnnotationEC2NodeClassHashVersion, awsv1.EC2NodeClassHashVersion)
		if err := r.client.Patch(ctx, nc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer %s and hash annotations: %w", Finalizer, err)
		}
	}
	before := nc.DeepCopy()
	failed := r.resolve(ctx, nc)
	if err := r.patchStatus(ctx, before, nc); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.drainExpiring(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.demoteEnded(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	if failed || !Ready(nc) {
		return ctrl.Result{RequeueAfter: r.opts.RetryInterval}, nil
	}
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		return ctrl.Result{RequeueAfter: min(r.opts.Interval, capreservation.NextCheck(nc.Status.CapacityReservations, time.Now()))}, nil
	}
	return ctrl.Result{RequeueAfter: r.opts.Interval}, nil
}

func (r *Reconciler) patchStatus(ctx context.Context, before, nc *awsv1.EC2NodeClass) error {
	if equality.Semantic.DeepEqual(before.Status, nc.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, nc, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating the status of EC2NodeClass %s: %w", nc.Name, err)
	}
	return nil
}

// resolve fills the class's status and conditions. It reports whether asking AWS failed for
// some part, in which case that part keeps its previous state when it was computed for this
// generation (a passing AWS error does not make a class unready) and becomes Unknown otherwise.
func (r *Reconciler) resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (failed bool) {
	log := ctrl.LoggerFrom(ctx)
	step := func(condType string, what string, run func() (string, error), clear func()) {
		msg, err := run()
		switch {
		case err == nil:
			r.set(nc, condType, metav1.ConditionTrue, ReasonResolved, msg)
		case errors.Is(err, awserr.ErrInvalidClass):
			clear()
			reason := ReasonNotFound
			if condType == awsv1.ConditionTypeValidationSucceeded {
				reason = ReasonInvalid
			}
			r.set(nc, condType, metav1.ConditionFalse, reason, err.Error())
		default:
			failed = true
			log.Error(err, "resolving "+what+" failed; will retry", "EC2NodeClass", nc.Name)
			if c := meta.FindStatusCondition(nc.Status.Conditions, condType); c == nil || c.ObservedGeneration != nc.Generation {
				clear()
				r.set(nc, condType, metav1.ConditionUnknown, ReasonResolutionFailed, "asking AWS failed, retrying: "+err.Error())
			}
		}
	}
	step(awsv1.ConditionTypeValidationSucceeded, "the spec", func() (string, error) {
		return "", r.provider.ValidateClass(nc)
	}, func() {})
	step(awsv1.ConditionTypeSubnetsReady, "subnets", func() (string, error) {
		s, err := r.provider.Subnets(ctx, nc)
		if err != nil {
			return "", err
		}
		nc.Status.Subnets = s
		zones := map[string]bool{}
		for _, sn := range s {
			zones[sn.Zone] = true
		}
		return fmt.Sprintf("%d subnets in %d zones", len(s), len(zones)), nil
	}, func() { nc.Status.Subnets = nil })
	step(awsv1.ConditionTypeSecurityGroupsReady, "security groups", func() (string, error) {
		g, err := r.provider.SecurityGroups(ctx, nc)
		if err != nil {
			return "", err
		}
		nc.Status.SecurityGroups = g
		return fmt.Sprintf("%d security groups", len(g)), nil
	}, func() { nc.Status.SecurityGroups = nil })
	step(awsv1.ConditionTypeAMIsReady, "AMIs", func() (string, error) {
		a, err := r.provider.AMIs(ctx, nc)
		if err != nil {
			return "", err
		}
		nc.Status.AMIs = a
		return fmt.Sprintf("%d AMIs", len(a)), nil
	}, func() { nc.Status.AMIs = nil })
	step(awsv1.ConditionTypeCapacityReservationsReady, "capacity reservations", func() (string, error) {
		rs, err := r.provider.CapacityReservations(ctx, nc)
		if err != nil {
			return "", err
		}
		nc.Status.CapacityReservations = rs
		return fmt.Sprintf("%d capacity reservations", len(rs)), nil
	}, func() { nc.Status.CapacityReservations = nil })
	step(awsv1.ConditionTypeInstanceProfileReady, "the instance profile", func() (string, error) {
		name, err := r.provider.EnsureInstanceProfile(ctx, nc)
		if err != nil {
			return "", err
		}
		nc.Status.InstanceProfile = name
		return "instance profile " + name, nil
	}, func() { nc.Status.InstanceProfile = "" })
	r.summarize(nc)
	meta.SetStatusCondition(&nc.Status.Conditions, unimplemented.Condition("EC2NodeClass", nc, nc.Generation))
	return failed
}

// readiness are the conditions Ready summarizes.
var readiness = []string{
	awsv1.ConditionTypeValidationSucceeded,
	awsv1.ConditionTypeSubnetsReady,
	awsv1.ConditionTypeSecurityGroupsReady,
	awsv1.ConditionTypeAMIsReady,
	awsv1.ConditionTypeCapacityReservationsReady,
	awsv1.ConditionTypeInstanceProfileReady,
}

// summarize sets Ready: True when every other condition is True, False naming the ones that
// are False (with their messages), Unknown otherwise.
func (r *Reconciler) summarize(nc *awsv1.EC2NodeClass) {
	var falseMsgs, unknown []string
	for _, t := range readiness {
		c := meta.FindStatusCondition(nc.Status.Conditions, t)
		switch {
		case c == nil || c.Status == metav1.ConditionUnknown:
			unknown = append(unknown, t)
		case c.Status == metav1.ConditionFalse:
			falseMsgs = append(falseMsgs, t+"=False: "+c.Message)
		}
	}
	switch {
	case len(falseMsgs) > 0:
		r.set(nc, awsv1.ConditionTypeReady, metav1.ConditionFalse, ReasonNotReady, strings.Join(falseMsgs, "; "))
	case len(unknown) > 0:
		r.set(nc, awsv1.ConditionTypeReady, metav1.ConditionUnknown, ReasonNotReady, "not resolved yet: "+strings.Join(unknown, ", "))
	default:
		r.set(nc, awsv1.ConditionTypeReady, metav1.ConditionTrue, ReasonResolved, "")
	}
}

func (r *Reconciler) set(nc *awsv1.EC2NodeClass, condType string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: condType, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: nc.Generation})
}

// finalize deletes the class's AWS resources once no NodeClaim refers to it, then lets the
// class go. Until then Ready is False, so nothing new launches from a class being deleted.
func (r *Reconciler) finalize(ctx context.Context, nc *awsv1.EC2NodeClass) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, Finalizer) {
		return ctrl.Result{}, nil
	}
	var claims karpv1.NodeClaimList
	if err := r.client.List(ctx, &claims); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing NodeClaims: %w", err)
	}
	var using []string
	for i := range claims.Items {
		if c := &claims.Items[i]; refersToClass(c) && c.Spec.NodeClassRef.Name == nc.Name {
			using = append(using, c.Name)
		}
	}
	if len(using) > 0 {
		slices.Sort(using)
		before := nc.DeepCopy()
		r.set(nc, awsv1.ConditionTypeReady, metav1.ConditionFalse, ReasonTerminating,
			fmt.Sprintf("being deleted; waiting for %d NodeClaims to go: %s", len(using), strings.Join(using, ", ")))
		if err := r.patchStatus(ctx, before, nc); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.opts.RetryInterval}, nil
	}
	if err := r.provider.DeleteLaunchTemplates(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.provider.DeleteInstanceProfile(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(nc, Finalizer)
	if err := r.client.Patch(ctx, nc, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing finalizer %s: %w", Finalizer, err)
	}
	return ctrl.Result{}, nil
}
