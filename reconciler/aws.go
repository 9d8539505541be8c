package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq/ensure"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/manifests/build"
)

// AWSReady reasons, and the event reasons of AWS changes.
const (
	// AWSUpToDateReason: the account holds every resource; nothing to change.
	AWSUpToDateReason = "UpToDate"
	// AWSChangesPendingReason: mode plan found changes; the status lists them.
	AWSChangesPendingReason = "ChangesPending"
	// AWSAppliedReason: mode apply made the changes the status lists.
	AWSAppliedReason = "Applied"
	// AWSFailedReason: the account could not be read or changed; the message says which call.
	AWSFailedReason = "AWSFailed"
)

// shownAWSChanges is how many change lines status.aws keeps; its summary counts them all.
const shownAWSChanges = 50

// DefaultAWSConfig loads the SDK's standard credential chain for a region.
func DefaultAWSConfig(ctx context.Context, region string) (aws.Config, error) {
	return awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
}

// reconcileAWS plans or applies the AWS resources of spec.aws for the revision's EC2NodeClasses
// and records the outcome in status.aws and the AWSReady condition. In apply mode it runs before
// the pools are applied, and its error stops the reconciliation: a class whose role is missing
// must not reach the cluster. In plan mode a failure is only reported.
func (r *Reconciler) reconcileAWS(ctx context.Context, obj *v1alpha1.PoolSync, objs []*build.Object, revision string) error {
	spec := obj.Spec.AWS
	if spec == nil || spec.Mode == v1alpha1.AWSModeOff {
		obj.Status.AWS = nil
		conditions.Delete(obj, v1alpha1.AWSReadyCondition)
		return nil
	}
	mode := modeOf(spec)
	changes, err := r.ensureAWS(ctx, obj, objs, mode == v1alpha1.AWSModePlan)
	if err != nil {
		err = fmt.Errorf("spec.aws (%s) for revision %s: %w", mode, revision, err)
		repeated := conditions.GetMessage(obj, v1alpha1.AWSReadyCondition) == err.Error()
		conditions.MarkFalse(obj, v1alpha1.AWSReadyCondition, AWSFailedReason, "%s", err)
		if mode == v1alpha1.AWSModeApply {
			return err
		}
		// The pools are applied all the same; a plan that keeps failing the same way is
		// reported once, not every interval.
		if !repeated {
			r.event(obj, corev1.EventTypeWarning, AWSFailedReason, "%s", err)
		}
		return nil
	}
	before := obj.Status.AWS
	obj.Status.AWS = awsStatus(mode, revision, changes)
	summary := obj.Status.AWS.Summary
	switch {
	case len(changes) == 0:
		conditions.MarkTrue(obj, v1alpha1.AWSReadyCondition, AWSUpToDateReason, "The account holds every AWS resource of revision %s", revision)
	case mode == v1alpha1.AWSModePlan:
		conditions.MarkFalse(obj, v1alpha1.AWSReadyCondition, AWSChangesPendingReason, "%s (status.aws lists them): set spec.aws.mode to apply, or run karpool apply --aws", summary)
		if before == nil || !slices.Equal(before.Changes, obj.Status.AWS.Changes) {
			r.event(obj, corev1.EventTypeNormal, AWSChangesPendingReason, "AWS changes for revision %s: %s", revision, summary)
		}
	default:
		conditions.MarkTrue(obj, v1alpha1.AWSReadyCondition, AWSAppliedReason, "Applied to the account for revision %s: %s", revision, summary)
		r.event(obj, corev1.EventTypeNormal, AWSAppliedReason, "AWS changes for revision %s: %s", revision, summary)
	}
	return nil
}

// modeOf is spec.aws.mode with its default.
func modeOf(spec *v1alpha1.AWSSpec) v1alpha1.AWSMode {
	if spec.Mode == "" {
		return v1alpha1.AWSModePlan
	}
	return spec.Mode
}

// ensureAWS renders the resources from spec.aws, the account's facts and the revision's
// EC2NodeClasses, and plans or applies them.
func (r *Reconciler) ensureAWS(ctx context.Context, obj *v1alpha1.PoolSync, objs []*build.Object, planOnly bool) ([]ensure.Change, error) {
	spec := obj.Spec.AWS
	if err := r.soleAWSOwner(ctx, obj); err != nil {
		return nil, err
	}
	pools, err := simulate.PoolsOf(objs)
	if err != nil {
		return nil, err
	}
	cfg, err := r.opts.AWSConfig(ctx, spec.Region)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	clients := ensure.NewClients(cfg)
	s, err := ensure.Discover(ctx, clients, prereq.Settings{
		ClusterName: spec.ClusterName, Region: spec.Region, AccountID: spec.AccountID, PodIdentity: spec.PodIdentity,
		Namespace: r.opts.SecretNamespace, ServiceAccount: r.opts.ServiceAccount,
		NodeRole: spec.NodeRole, InterruptionQueue: spec.InterruptionQueue, NodeAccess: spec.NodeAccess,
		AllowedAccounts: spec.AllowedAccounts,
	})
	if err != nil {
		return nil, err
	}
	res, err := prereq.Render(s, pools.Classes())
	if err != nil {
		return nil, err
	}
	return ensure.Run(ctx, clients, res, ensure.Options{PlanOnly: planOnly, KeepInstanceProfiles: true})
}

// soleAWSOwner refuses a second PoolSync with spec.aws for the same cluster: the resources are
// the cluster's (one controller role and policy, one queue), and two revisions with different
// EC2NodeClasses would rewrite each other's policy. The first by name keeps them.
func (r *Reconciler) soleAWSOwner(ctx context.Context, obj *v1alpha1.PoolSync) error {
	var all v1alpha1.PoolSyncList
	if err := r.List(ctx, &all); err != nil {
		return fmt.Errorf("listing PoolSyncs: %w", err)
	}
	for _, other := range all.Items {
		a := other.Spec.AWS
		if other.Name < obj.Name && a != nil && modeOf(a) != v1alpha1.AWSModeOff && a.ClusterName == obj.Spec.AWS.ClusterName && a.Region == obj.Spec.AWS.Region {
			return fmt.Errorf("PoolSync %s already manages the AWS resources of cluster %s in %s: set spec.aws on one PoolSync per cluster, the one with the EC2NodeClasses", other.Name, a.ClusterName, a.Region)
		}
	}
	return nil
}

// awsStatus is status.aws for the changes: their lines as the plan prints them, and counts.
func awsStatus(mode v1alpha1.AWSMode, revision string, changes []ensure.Change) *v1alpha1.AWSStatus {
	st := &v1alpha1.AWSStatus{Mode: mode, Revision: revision, Summary: ensure.Summary(changes)}
	for _, ch := range changes[:min(len(changes), shownAWSChanges)] {
		st.Changes = append(st.Changes, strings.Join([]string{string(ch.Op), ch.Kind, ch.Name}, " "))
	}
	return st
}
