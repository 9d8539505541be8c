// Package reconciler is the PoolSync controller: it keeps the objects of one path of a Git
// repository applied to the cluster, the way Flux's kustomize-controller does, and reports in
// Flux's conventions (Ready/Reconciling/Stalled conditions, lastAppliedRevision as
// branch@sha1:<hex>, an inventory of namespace_name_group_kind IDs, the
// reconcile.fluxcd.io/requestedAt annotation) so that the same tooling reads it.
//
// One reconciliation reads top-down in sync.go: fetch (package source) → build (package build) →
// validate (package validate; nothing is applied unless every object passes) → AWS (aws.go: plan or
// apply the AWS resources spec.aws renders) → apply (server-side apply, EC2NodeClasses before
// NodePools, drift corrected) → prune (objects of the previous
// inventory that left Git) → status. A failure at any step leaves the previous revision in force.
package reconciler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	rtcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/fluxcd/pkg/runtime/predicates"
	"github.com/fluxcd/pkg/runtime/reconcile"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kuberecorder "k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/redact"
	"github.com/karpool/karpool/manifests/validate"
	"github.com/karpool/karpool/reconciler/source"
	"github.com/karpool/karpool/reconciler/status"
)

const (
	// FieldManager owns the fields karpool applies, and PoolSync status.
	FieldManager = "karpool"
	// OwnerLabel marks every applied object with the PoolSync that applied it. Prune deletes only
	// objects that still carry it, so an object another PoolSync took over is left alone.
	OwnerLabel = "poolsync.karpool.dev/name"
	// ControllerName names the controller in logs, metrics and events.
	ControllerName = "poolsync"
	// Finalizer holds a PoolSync until its deletion policy has been carried out.
	Finalizer = "finalizers.karpool.dev"
	// DefaultSecretNamespace is where spec.secretRef Secrets live unless configured otherwise.
	DefaultSecretNamespace = "karpool-system"
)

// Condition reasons beyond those of fluxcd/pkg/apis/meta.
const (
	// GitOperationFailedReason: the repository could not be read (server down, no such branch).
	GitOperationFailedReason = "GitOperationFailed"
	// AuthenticationFailedReason: the credentials were refused or cannot be used.
	AuthenticationFailedReason = "AuthenticationFailed"
	// ValidationFailedReason: some object of the revision is invalid; nothing was applied.
	ValidationFailedReason = "ValidationFailed"
	// InvalidSpecReason: the PoolSync itself is wrong; it is Stalled until its spec changes.
	InvalidSpecReason = "InvalidSpec"
	// DeletedWithPoolSyncReason is the event reason for objects deleted with their PoolSync.
	DeletedWithPoolSyncReason = "DeletedWithPoolSync"
	// DriftCorrectedReason is the event reason for objects restored after an in-cluster edit.
	DriftCorrectedReason = "DriftCorrected"
)

// ownedConditions are the conditions the controller writes; the patch helper resolves conflicts
// on them in the controller's favour.
var ownedConditions = []string{meta.ReadyCondition, meta.ReconcilingCondition, meta.StalledCondition, v1alpha1.AWSReadyCondition}

// Options configure a Reconciler. The zero value of every field has a working default.
type Options struct {
	// SecretNamespace is the controller's namespace, where spec.secretRef names a Secret.
	SecretNamespace string
	// SecretReader reads Secrets; default the client. The controller passes the manager's
	// uncached API reader, so that it never caches (or needs to list) every Secret.
	SecretReader client.Reader
	// EventRecorder receives events; nil records none.
	EventRecorder kuberecorder.EventRecorder
	// Notifier also sends every event to Flux's notification-controller (NewNotifier); nil
	// sends none.
	Notifier *events.Recorder
	// Metrics records durations and readiness; the zero value records nothing.
	Metrics rtcontroller.Metrics
	// Validators check objects before anything is applied, alongside a server-side dry-run of
	// every object, which always runs; default DefaultValidators.
	Validators []validate.Validator
	// Fetcher fetches and caches repositories; default a new one.
	Fetcher *source.Fetcher
	// Concurrency bounds the requests in flight for drift detection and dry-runs; default 8.
	Concurrency int
	// Jitter spreads requeues by ± this fraction of the interval; default 0.05, negative for none.
	Jitter float64
	// MaxBackoff caps the growing wait between retries of a failing PoolSync; default 5 minutes.
	MaxBackoff time.Duration
	// Region is the cluster's AWS region, whose catalog prices the status reports and the
	// plans of pull requests; default us-east-1.
	Region string
	// AWSConfig loads the SDK configuration spec.aws works in, for its region; default
	// DefaultAWSConfig (the standard credential chain).
	AWSConfig func(ctx context.Context, region string) (aws.Config, error)
	// ServiceAccount is the controller's service account, which the controller role rendered
	// for spec.aws trusts; default karpool.
	ServiceAccount string
	// Prices prices a node by its labels (instance type, zone, capacity type) in the status
	// report; default the embedded catalog of Region.
	Prices func(labels map[string]string) (float64, bool)
	// Reserved lists the capacity reservations the cluster's EC2NodeClasses resolve to now,
	// for the plans of pull requests; nil plans without reservations.
	Reserved func(ctx context.Context) (simulate.Reserved, error)
	// NodeOverlays says whether the cluster applies NodeOverlays (its NodeOverlay gate);
	// pull-request plans apply the revisions' overlays only then.
	NodeOverlays bool
}

// Reconciler reconciles PoolSyncs.
type Reconciler struct {
	client.Client
	opts Options

	mu       sync.Mutex
	failures map[string]int // consecutive failures by PoolSync name, for backoff
	// applied is, by PoolSync name, the state of each object when last seen matching Git.
	applied map[string]map[string]appliedState
	// planned is the head commit each pull request was last planned at, by PoolSync#number.
	planned map[string]string
}

// New returns a Reconciler using c for everything but Secrets (see Options.SecretReader).
func New(c client.Client, opts Options) *Reconciler {
	if opts.SecretNamespace == "" {
		opts.SecretNamespace = DefaultSecretNamespace
	}
	if opts.SecretReader == nil {
		opts.SecretReader = c
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Validators == nil {
		opts.Validators = DefaultValidators()
	}
	if opts.Fetcher == nil {
		opts.Fetcher = source.NewFetcher()
	}
	if opts.Jitter == 0 {
		opts.Jitter = 0.05
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.AWSConfig == nil {
		opts.AWSConfig = DefaultAWSConfig
	}
	if opts.ServiceAccount == "" {
		opts.ServiceAccount = "karpool"
	}
	if opts.Prices == nil {
		opts.Prices = status.CatalogPrices(opts.Region)
	}
	return &Reconciler{Client: c, opts: opts, failures: map[string]int{}, applied: map[string]map[string]appliedState{}, planned: map[string]string{}}
}

// DefaultValidators are strict decoding into the Go types and the CUE schema, in that order (of
// a problem reported twice, the first wording is kept; the API server's dry-run comes last).
func DefaultValidators() []validate.Validator {
	return []validate.Validator{validate.Types{}, validate.NewSchema()}
}

// SetupOptions configure the controller.
type SetupOptions struct {
	MaxConcurrentReconciles int
	// SkipNameValidation allows more than one controller of this name in a process (tests).
	SkipNameValidation bool
}

// SetupWithManager registers the controller. It reconciles on spec changes and on the
// reconcile.fluxcd.io/requestedAt annotation; status updates do not trigger it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts SetupOptions) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1alpha1.PoolSync{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler: it loads the PoolSync, runs one reconciliation and
// patches the status, whatever happened.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	log := ctrl.LoggerFrom(ctx)
	obj := &v1alpha1.PoolSync{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.remember(req.Name, nil)
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalizeDeletion(ctx, obj)
	}
	// The finalizer goes on before anything is applied, so that no deletion can miss objects.
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		before := obj.DeepCopy()
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := r.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
	}
	patcher := patch.NewSerialPatcher(obj, r.Client)

	defer func() {
		result, retErr = r.finalize(ctx, obj, patcher, result, retErr)
		r.opts.Metrics.RecordDuration(ctx, obj, start)
		r.opts.Metrics.RecordReadiness(ctx, obj)
	}()

	r.opts.Metrics.RecordSuspend(ctx, obj, obj.Spec.Suspend)
	if obj.Spec.Suspend {
		log.Info("reconciliation is suspended; the objects applied so far stay as they are")
		return ctrl.Result{}, nil
	}
	result, err := r.reconcile(ctx, obj, patcher)
	r.reportStatus(ctx, obj)
	r.reviewPullRequests(ctx, obj)
	return result, err
}

// finalizeDeletion runs when a PoolSync is deleted: the objects of its inventory are deleted
// (those still carrying its owner label) when its deletion policy says so, then the finalizer is
// released. A failed deletion keeps the finalizer and is retried with backoff.
func (r *Reconciler) finalizeDeletion(ctx context.Context, obj *v1alpha1.PoolSync) error {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return nil
	}
	if deletesObjects(obj) && obj.Status.Inventory != nil {
		deleted, err := r.prune(ctx, obj, obj.Status.Inventory.Entries)
		if err != nil {
			r.event(obj, corev1.EventTypeWarning, meta.PruneFailedReason, "deleting the applied objects: %v", err)
			return err
		}
		if len(deleted) > 0 {
			r.event(obj, corev1.EventTypeNormal, DeletedWithPoolSyncReason, "Deleted with the PoolSync (deletionPolicy %s): %s", policy(obj), strings.Join(deleted, ", "))
		}
	}
	before := obj.DeepCopy()
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.Patch(ctx, obj, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return err
	}
	r.remember(obj.Name, nil)
	r.forget(obj.Name)
	return nil
}

// policy is the PoolSync's deletion policy with its default.
func policy(obj *v1alpha1.PoolSync) v1alpha1.DeletionPolicy {
	if obj.Spec.DeletionPolicy == "" {
		return v1alpha1.DeletionPolicyMirrorPrune
	}
	return obj.Spec.DeletionPolicy
}

// deletesObjects says whether deleting obj deletes what it applied. Like Flux, a suspended
// PoolSync leaves its objects: suspension means hands off.
func deletesObjects(obj *v1alpha1.PoolSync) bool {
	if obj.Spec.Suspend {
		return false
	}
	switch policy(obj) {
	case v1alpha1.DeletionPolicyDelete:
		return true
	case v1alpha1.DeletionPolicyMirrorPrune:
		return obj.Spec.Prune
	default:
		return false
	}
}

// ReconcileDetached runs one reconciliation of a PoolSync that does not exist in the cluster
// (karpool reconcile --once --url): the objects are applied, the outcome is left in obj.Status and
// nothing is patched. It returns the error that made the reconciliation fail.
func (r *Reconciler) ReconcileDetached(ctx context.Context, obj *v1alpha1.PoolSync) error {
	_, err := r.reconcile(ctx, obj, nil)
	if err == nil {
		conditions.Delete(obj, meta.ReconcilingCondition)
	}
	var s *stalledError
	if asStalled(err, &s) {
		return s.err
	}
	return err
}

// finalize makes the status kstatus-compliant with the result finalizer, patches it, and turns
// a failure into a requeue after the (growing) retry interval.
func (r *Reconciler) finalize(ctx context.Context, obj *v1alpha1.PoolSync, patcher *patch.SerialPatcher, res ctrl.Result, recErr error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	interval := obj.Spec.Interval.Duration
	isSuccess := func(res ctrl.Result, err error) bool {
		return err == nil && !obj.Spec.Suspend && res.RequeueAfter == interval
	}

	var stalled *stalledError
	isStalled := asStalled(recErr, &stalled)
	finErr := recErr
	if isStalled {
		// The finalizer clears Stalled when given an error; a stalled PoolSync waits for a spec
		// change instead of retrying.
		finErr, res = nil, ctrl.Result{}
	}
	finErr = reconcile.NewResultFinalizer(isSuccess, "").Finalize(obj, res, finErr)
	if conditions.IsFalse(obj, meta.ReadyCondition) && conditions.Has(obj, meta.ReconcilingCondition) {
		rc := conditions.Get(obj, meta.ReconcilingCondition)
		rc.Reason = meta.ProgressingWithRetryReason
		conditions.Set(obj, rc)
	}
	if err := patcher.Patch(ctx, obj, reconcile.AddPatchOptions(obj, nil, ownedConditions, FieldManager)...); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	switch {
	case obj.Spec.Suspend:
		return ctrl.Result{}, nil
	case isStalled:
		log.Error(stalled.err, "reconciliation stalled until the PoolSync changes")
		r.forget(obj.Name)
		return ctrl.Result{}, nil
	case finErr != nil:
		wait := r.backoff(obj)
		log.Error(finErr, "reconciliation failed", "retryIn", wait.String())
		return ctrl.Result{RequeueAfter: wait}, nil
	default:
		r.forget(obj.Name)
		return ctrl.Result{RequeueAfter: r.jitter(interval)}, nil
	}
}

// backoff is the wait before the next attempt after consecutive failures: the retry interval,
// doubling with each further failure up to 16 times it, and never past MaxBackoff unless the retry
// interval itself is longer.
func (r *Reconciler) backoff(obj *v1alpha1.PoolSync) time.Duration {
	r.mu.Lock()
	r.failures[obj.Name]++
	n := r.failures[obj.Name]
	r.mu.Unlock()
	base := obj.Spec.Interval.Duration
	if obj.Spec.RetryInterval != nil && obj.Spec.RetryInterval.Duration > 0 {
		base = obj.Spec.RetryInterval.Duration
	}
	d := base << min(n-1, 4)
	if d > r.opts.MaxBackoff {
		d = max(base, r.opts.MaxBackoff)
	}
	return r.jitter(d)
}

func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	delete(r.failures, name)
	r.mu.Unlock()
}

func (r *Reconciler) jitter(d time.Duration) time.Duration {
	if r.opts.Jitter <= 0 {
		return d
	}
	return d + time.Duration((rand.Float64()*2-1)*r.opts.Jitter*float64(d))
}

// event records an event when a recorder is configured, and sends it to Flux when a notifier is.
func (r *Reconciler) event(obj *v1alpha1.PoolSync, eventType, reason, format string, args ...any) {
	msg := redact.Text(fmt.Sprintf(format, args...))
	if r.opts.EventRecorder != nil {
		r.opts.EventRecorder.Eventf(obj, eventType, reason, "%s", msg)
	}
	if r.opts.Notifier != nil {
		r.notify(obj, eventType, reason, "%s", msg)
	}
}
