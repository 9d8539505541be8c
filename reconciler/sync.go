package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/fluxcd/pkg/runtime/reconcile"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/internal/redact"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/manifests/validate"
	"github.com/karpool/karpool/reconciler/source"
)

// shownFindings is how many validation findings a condition message spells out; the event
// carries more.
const shownFindings = 5

// reconcile is one reconciliation, top-down. On success it returns a requeue after exactly
// spec.interval (finalize adds the jitter); on failure the error, with the Ready condition already
// saying what failed and where. A nil patcher reconciles without writing status (detached runs).
func (r *Reconciler) reconcile(ctx context.Context, obj *v1alpha1.PoolSync, patcher *patch.SerialPatcher) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if obj.Spec.Interval.Duration <= 0 {
		return r.stall(obj, InvalidSpecReason, fmt.Errorf("spec.interval is %s: it must be positive, e.g. 5m", obj.Spec.Interval.Duration))
	}
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(obj))
	defer cancel()

	reconcile.ProgressiveStatus(false, obj, meta.ProgressingReason, "fetching %s", redact.URL(obj.Spec.URL))
	if err := r.patchProgress(ctx, obj, patcher); err != nil {
		return ctrl.Result{}, err
	}

	// 1. Fetch: ls-remote, and a shallow clone only when the selected commit moved.
	creds, err := r.credentials(ctx, obj)
	if err != nil {
		return r.fail(obj, AuthenticationFailedReason, err)
	}
	art, err := r.opts.Fetcher.Fetch(ctx, source.Request{URL: obj.Spec.URL, Ref: refOf(obj), Credentials: creds})
	if err != nil {
		var serr *source.Error
		if errors.As(err, &serr) {
			switch serr.Kind {
			case source.Auth:
				return r.fail(obj, AuthenticationFailedReason, err)
			case source.Invalid:
				return r.stall(obj, InvalidSpecReason, err)
			}
		}
		return r.fail(obj, GitOperationFailedReason, err)
	}
	obj.Status.LastAttemptedRevision = art.Revision
	reconcile.ProgressiveStatus(false, obj, meta.ProgressingReason, "building revision %s", art.Revision)
	if err := r.patchProgress(ctx, obj, patcher); err != nil {
		return ctrl.Result{}, err
	}

	// 2. Build: kustomize or plain YAML, every object with the file and line it came from.
	objs, err := build.Build(ctx, art.Files, obj.Spec.Path)
	if err != nil {
		return r.fail(obj, meta.BuildFailedReason, fmt.Errorf("building revision %s failed, nothing applied: %w", art.Revision, err))
	}
	for _, o := range objs {
		labels := o.Object.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[OwnerLabel] = obj.Name
		o.Object.SetLabels(labels)
	}

	// 3. Validate: every object, before any is applied. The API server dry-runs every object but
	// those the cluster holds exactly as last applied; its results tell the apply which objects
	// already match.
	p, err := r.newPlan(ctx, obj.Name, objs)
	if err != nil {
		return r.fail(obj, meta.ReconciliationFailedReason, fmt.Errorf("reading the cluster: %w", err))
	}
	dryRun := &validate.Recorder{DryRun: validate.DryRun{Client: r.Client, FieldManager: FieldManager, Concurrency: r.opts.Concurrency}, Skip: p.untouched}
	findings, err := validate.All(ctx, objs, append(slices.Clip(r.opts.Validators), dryRun)...)
	if err != nil {
		return r.fail(obj, meta.ReconciliationFailedReason, fmt.Errorf("validating revision %s: %w", art.Revision, err))
	}
	if len(findings) > 0 {
		return r.fail(obj, ValidationFailedReason, fmt.Errorf("revision %s is invalid, nothing applied (%d problem%s): %s",
			art.Revision, len(findings), plural(len(findings)), validate.Summary(findings, shownFindings)))
	}

	// 4. AWS: plan or apply what spec.aws renders for the revision's EC2NodeClasses; in apply
	// mode, before the pools that need it.
	if err := r.reconcileAWS(ctx, obj, objs, art.Revision); err != nil {
		return r.fail(obj, AWSFailedReason, err)
	}

	// 5. Apply: server-side apply, EC2NodeClasses before NodePools; unchanged objects are left
	// alone and drifted ones restored.
	oldInv := inventoryEntries(obj.Status.Inventory)
	newInv := inventoryOf(objs)
	p.dryRun = dryRun.Results
	changes, err := r.apply(ctx, p, timeoutOf(obj))
	if err != nil {
		r.remember(obj.Name, nil)
		// Objects of the new revision may have been applied before the failure: keep them in the
		// inventory so that a later revision can prune them.
		obj.Status.Inventory = toInventory(union(oldInv, newInv))
		return r.fail(obj, meta.ReconciliationFailedReason, fmt.Errorf("applying revision %s: %w", art.Revision, err))
	}

	r.remember(obj.Name, p.learned)

	// 6. Prune what left Git, among the objects this PoolSync applied before.
	var pruned []string
	if obj.Spec.Prune {
		stale := difference(oldInv, newInv)
		pruned, err = r.prune(ctx, obj, stale)
		if err != nil {
			obj.Status.Inventory = toInventory(union(newInv, stale))
			return r.fail(obj, meta.PruneFailedReason, fmt.Errorf("pruning after revision %s: %w", art.Revision, err))
		}
	}

	// 7. Status and events.
	obj.Status.Inventory = toInventory(newInv)
	// Unless Git or the spec moved, every change undoes an edit made in the cluster.
	intended := art.Revision != obj.Status.LastAppliedRevision || obj.Generation != obj.Status.ObservedGeneration
	obj.Status.LastAppliedRevision = art.Revision
	conditions.MarkTrue(obj, meta.ReadyCondition, meta.ReconciliationSucceededReason, "Applied revision: %s", art.Revision)
	conditions.Delete(obj, meta.StalledCondition)
	switch summary := changes.summary(pruned); {
	case intended:
		r.event(obj, corev1.EventTypeNormal, meta.ReconciliationSucceededReason, "Applied revision %s: %s", art.Revision, summary)
	case changes.changed() || len(pruned) > 0:
		r.event(obj, corev1.EventTypeWarning, DriftCorrectedReason, "Restored objects changed in the cluster to revision %s: %s", art.Revision, summary)
	}
	log.V(1).Info("reconciled", "revision", art.Revision, "objects", len(objs), "changed", changes.changed(), "pruned", len(pruned))
	return ctrl.Result{RequeueAfter: obj.Spec.Interval.Duration}, nil
}

// fail marks Ready=False with the reason and the error's message, records a warning event and
// returns the error for finalize. The error is redacted first, for the log line too: a build or
// fetch error can quote URLs from the spec or the repository, credentials and all.
func (r *Reconciler) fail(obj *v1alpha1.PoolSync, reason string, err error) (ctrl.Result, error) {
	err = redact.Error(err)
	conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", err.Error())
	r.event(obj, corev1.EventTypeWarning, reason, "%s", err.Error())
	return ctrl.Result{}, err
}

// stall is fail for errors only a spec change can fix.
func (r *Reconciler) stall(obj *v1alpha1.PoolSync, reason string, err error) (ctrl.Result, error) {
	err = redact.Error(err)
	conditions.MarkStalled(obj, reason, "%s", err.Error())
	r.fail(obj, reason, err)
	return ctrl.Result{}, &stalledError{err: err}
}

// stalledError marks a failure that retrying cannot fix.
type stalledError struct{ err error }

func (e *stalledError) Error() string { return e.err.Error() }
func (e *stalledError) Unwrap() error { return e.err }

func asStalled(err error, target **stalledError) bool { return errors.As(err, target) }

// patchProgress writes the in-progress status so that watchers see the reconciliation start.
func (r *Reconciler) patchProgress(ctx context.Context, obj *v1alpha1.PoolSync, patcher *patch.SerialPatcher) error {
	if patcher == nil {
		return nil
	}
	return patcher.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(FieldManager))
}

// credentials reads the Secret named by spec.secretRef from the controller's namespace.
func (r *Reconciler) credentials(ctx context.Context, obj *v1alpha1.PoolSync) (*source.Credentials, error) {
	if obj.Spec.SecretRef == nil {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: r.opts.SecretNamespace, Name: obj.Spec.SecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.opts.SecretReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("Secret %s (spec.secretRef) does not exist: create it in namespace %s with keys %q and %q (https) or %q and %q (ssh)",
				key, key.Namespace, source.KeyUsername, source.KeyPassword, source.KeyIdentity, source.KeyKnownHosts)
		}
		return nil, fmt.Errorf("reading Secret %s (spec.secretRef): %w", key, err)
	}
	return source.CredentialsFromSecret(secret.Data), nil
}

func refOf(obj *v1alpha1.PoolSync) source.Ref {
	if obj.Spec.Ref == nil {
		return source.Ref{}
	}
	r := obj.Spec.Ref
	return source.Ref{Branch: r.Branch, Tag: r.Tag, SemVer: r.SemVer, Commit: r.Commit}
}

// timeoutOf is spec.timeout, defaulting to the interval as the API documents.
func timeoutOf(obj *v1alpha1.PoolSync) time.Duration {
	if obj.Spec.Timeout != nil && obj.Spec.Timeout.Duration > 0 {
		return obj.Spec.Timeout.Duration
	}
	return obj.Spec.Interval.Duration
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
