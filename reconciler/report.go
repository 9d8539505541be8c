package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/reconciler/source"
	"github.com/karpool/karpool/reconciler/status"
)

// Event reasons of status commits.
const (
	StatusCommittedReason    = "StatusCommitted"
	StatusCommitFailedReason = "StatusCommitFailed"
)

// DefaultStatusBranch receives status commits unless spec.report.statusCommits.branch names
// another.
const DefaultStatusBranch = "karpool-status"

// reportStatus commits the PoolSync's report to its status branch when
// spec.report.statusCommits asks for it. It runs after every reconciliation, applied or not; a
// failure is a warning event and never fails the reconciliation, whose outcome is already
// decided.
func (r *Reconciler) reportStatus(ctx context.Context, obj *v1alpha1.PoolSync) {
	if obj.Spec.Report == nil || obj.Spec.Report.StatusCommits == nil {
		return
	}
	sc := obj.Spec.Report.StatusCommits
	files, err := r.statusFiles(ctx, obj)
	if err != nil {
		r.event(obj, corev1.EventTypeWarning, StatusCommitFailedReason, "reading the cluster for the status report: %v", err)
		return
	}
	creds, err := r.credentials(ctx, obj)
	if err != nil {
		r.event(obj, corev1.EventTypeWarning, StatusCommitFailedReason, "%v", err)
		return
	}
	c := source.Commit{URL: obj.Spec.URL, Credentials: creds, Branch: sc.Branch, Files: files,
		Author:  object.Signature{Name: "karpool", Email: "karpool@localhost", When: time.Now()},
		Message: strings.ReplaceAll(sc.Message, "{revision}", obj.Status.LastAppliedRevision)}
	if c.Branch == "" {
		c.Branch = DefaultStatusBranch
	}
	if c.Message == "" {
		c.Message = "karpool status for " + obj.Status.LastAppliedRevision
	}
	if sc.Author != nil {
		c.Author.Name, c.Author.Email = sc.Author.Name, sc.Author.Email
	}
	pushed, err := source.Push(ctx, c)
	switch {
	case err != nil:
		r.event(obj, corev1.EventTypeWarning, StatusCommitFailedReason, "committing the status to branch %s: %v", c.Branch, err)
	case pushed:
		ctrl.LoggerFrom(ctx).V(1).Info("status committed", "branch", c.Branch)
		r.event(obj, corev1.EventTypeNormal, StatusCommittedReason, "Committed the status of revision %s to branch %s", obj.Status.LastAppliedRevision, c.Branch)
	}
}

// statusFiles reads what the report needs: the PoolSync's NodePools (from its inventory), every
// NodeClaim, Pod, DaemonSet and HorizontalPodAutoscaler.
func (r *Reconciler) statusFiles(ctx context.Context, obj *v1alpha1.PoolSync) (map[string][]byte, error) {
	ours := map[string]bool{}
	for _, e := range inventoryEntries(obj.Status.Inventory) {
		if parts := strings.Split(e.ID, "_"); len(parts) == 4 && parts[2] == karpv1.GroupVersion.Group && parts[3] == "NodePool" {
			ours[parts[1]] = true
		}
	}
	var pools karpv1.NodePoolList
	var claims karpv1.NodeClaimList
	var pods corev1.PodList
	var dss appsv1.DaemonSetList
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	if err := r.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	if err := r.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing Pods: %w", err)
	}
	if err := r.List(ctx, &dss); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	if err := r.List(ctx, &hpas); err != nil {
		return nil, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	in := status.Input{PoolSync: obj, NodeClaims: claims.Items, Pods: pods.Items, Price: r.opts.Prices}
	for _, np := range pools.Items {
		if ours[np.Name] {
			in.NodePools = append(in.NodePools, np)
		}
	}
	return status.Files(in, status.Workload{DaemonSets: dss.Items, HPAs: hpas.Items}), nil
}
