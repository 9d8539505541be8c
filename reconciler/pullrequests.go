package reconciler

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq/ensure"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/redact"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/reconciler/forge"
	"github.com/karpool/karpool/reconciler/review"
	"github.com/karpool/karpool/reconciler/source"
	"github.com/karpool/karpool/reconciler/status"
)

// Event reasons of pull-request reviews.
const (
	PullRequestPlannedReason = "PullRequestPlanned"
	PullRequestFailedReason  = "PullRequestPlanFailed"
)

// forgeTokenKey is the key of spec.report.pullRequests.secretRef's Secret that holds the token.
const forgeTokenKey = "token"

// reviewPullRequests plans every open pull request that changes spec.path, against the
// cluster's workload as the status report snapshots it, and posts the plan as the pull
// request's sticky comment with a commit status, once per head commit and set of labels. Like status commits, it
// never fails the reconciliation.
func (r *Reconciler) reviewPullRequests(ctx context.Context, obj *v1alpha1.PoolSync) {
	if obj.Spec.Report == nil || obj.Spec.Report.PullRequests == nil {
		return
	}
	f, err := r.openForge(ctx, obj)
	if err != nil {
		r.event(obj, corev1.EventTypeWarning, PullRequestFailedReason, "%v", err)
		return
	}
	prs, err := f.PullRequests(ctx)
	if err != nil {
		r.event(obj, corev1.EventTypeWarning, PullRequestFailedReason, "listing the pull requests: %v", err)
		return
	}
	var workload *simulate.Workload
	for _, pr := range prs {
		if r.reviewed(obj.Name, pr.Number, reviewKey(pr)) {
			continue
		}
		if touches, err := touchesPath(ctx, f, pr.Number, obj.Spec.Path); err != nil || !touches {
			if err != nil {
				r.event(obj, corev1.EventTypeWarning, PullRequestFailedReason, "pull request %d: %v", pr.Number, err)
			}
			continue
		}
		if workload == nil {
			if workload, err = r.clusterWorkload(ctx, obj); err != nil {
				r.event(obj, corev1.EventTypeWarning, PullRequestFailedReason, "reading the cluster's workload: %v", err)
				return
			}
		}
		if err := r.reviewOne(ctx, obj, f, pr, workload); err != nil {
			r.event(obj, corev1.EventTypeWarning, PullRequestFailedReason, "pull request %d: %v", pr.Number, err)
			continue
		}
		r.markReviewed(obj.Name, pr.Number, reviewKey(pr))
	}
}

// reviewKey is what a review depends on besides the base: the head commit, and the labels (the
// review policy's override label turns a blocked plan green without a new commit).
func reviewKey(pr forge.PullRequest) string {
	labels := slices.Sorted(slices.Values(pr.Labels))
	return pr.HeadSHA + " " + strings.Join(labels, ",")
}

// reviewOne plans one pull request and posts the plan.
func (r *Reconciler) reviewOne(ctx context.Context, obj *v1alpha1.PoolSync, f forge.Forge, pr forge.PullRequest, w *simulate.Workload) error {
	creds, err := r.credentials(ctx, obj)
	if err != nil {
		return err
	}
	base, err := r.opts.Fetcher.Fetch(ctx, source.Request{URL: obj.Spec.URL, Ref: source.Ref{Branch: pr.BaseRef}, Credentials: creds})
	if err != nil {
		return err
	}
	// The forge keeps every pull request's head under refs/pull/N/head of the base repository
	// (GitHub and Gitea alike), also when the branch lives in a fork.
	headRef := source.Ref{Name: fmt.Sprintf("refs/pull/%d/head", pr.Number)}
	head, err := r.opts.Fetcher.Fetch(ctx, source.Request{URL: obj.Spec.URL, Ref: headRef, Credentials: creds})
	if err != nil {
		return err
	}
	var reserved simulate.Reserved
	if r.opts.Reserved != nil {
		if reserved, err = r.opts.Reserved(ctx); err != nil {
			return fmt.Errorf("reading the cluster's capacity reservations: %w", err)
		}
	}
	plan, err := review.Make(ctx, review.Input{
		Base: review.Tree{Revision: base.Revision, Files: base.Files}, Head: review.Tree{Revision: head.Revision, Files: head.Files},
		Path: obj.Spec.Path, Workload: w, WorkloadSource: "the cluster's workload", Region: r.opts.Region, Reserved: reserved,
		OverlaysOff: overlaysOff(r.opts.NodeOverlays), Labels: pr.Labels,
	})
	if err != nil {
		return err
	}
	switch {
	case plan.Failed():
	case pr.Fork && obj.Spec.AWS != nil && obj.Spec.AWS.Mode != v1alpha1.AWSModeOff:
		// A fork's branch may come from anyone: its plan uses no AWS credentials (SECURITY.md).
		plan.AWS = &review.AWSChanges{Mode: string(modeOf(obj.Spec.AWS)), Error: "not planned for a pull request from a fork, which karpool plans without AWS credentials; the account is planned once the change is on a branch of this repository"}
	default:
		plan.AWS = r.planAWS(ctx, obj, head)
	}
	out, c, err := forge.Post(ctx, f, pr.Number, review.Marker(obj.Spec.Path), plan.Markdown("controller"), plan.Worth(), false)
	if err != nil {
		return err
	}
	state, why := plan.CommitStatus()
	st := forge.Status{State: state, Context: "karpool/plan", Description: forge.Description(why), TargetURL: c.URL}
	if err := f.SetStatus(ctx, head.Commit, st); err != nil {
		return fmt.Errorf("setting the commit status: %w", err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("pull request planned", "pr", pr.Number, "comment", out, "status", st.State)
	r.event(obj, corev1.EventTypeNormal, PullRequestPlannedReason, "Planned pull request %d at %s: %s", pr.Number, head.Revision, st.Description)
	return nil
}

// planAWS plans the head revision's AWS resources against the account when spec.aws asks for
// them; an error is part of the comment, not a failure of the review.
func (r *Reconciler) planAWS(ctx context.Context, obj *v1alpha1.PoolSync, head *source.Artifact) *review.AWSChanges {
	if obj.Spec.AWS == nil || obj.Spec.AWS.Mode == v1alpha1.AWSModeOff {
		return nil
	}
	out := &review.AWSChanges{Mode: string(modeOf(obj.Spec.AWS))}
	objs, err := build.Build(ctx, head.Files, obj.Spec.Path)
	if err == nil {
		var changes []ensure.Change
		if changes, err = r.ensureAWS(ctx, obj, objs, true); err == nil {
			st := awsStatus(modeOf(obj.Spec.AWS), head.Revision, changes)
			out.Changes, out.Summary = st.Changes, st.Summary
		}
	}
	if err != nil {
		out.Error = redact.Text(err.Error())
	}
	return out
}

// openForge connects to the forge of spec.report.pullRequests with the token of its Secret.
func (r *Reconciler) openForge(ctx context.Context, obj *v1alpha1.PoolSync) (forge.Forge, error) {
	spec := obj.Spec.Report.PullRequests
	key := types.NamespacedName{Namespace: r.opts.SecretNamespace, Name: spec.SecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.opts.SecretReader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("reading Secret %s (spec.report.pullRequests.secretRef): %w", key, err)
	}
	token := strings.TrimSpace(string(secret.Data[forgeTokenKey]))
	if token == "" {
		return nil, fmt.Errorf("Secret %s (spec.report.pullRequests.secretRef) has no %q key", key, forgeTokenKey)
	}
	owner, name, err := forge.Slug(obj.Spec.URL)
	if err != nil {
		return nil, err
	}
	f, err := forge.Open(ctx, spec.Provider, spec.APIURL, token, obj.Spec.URL, owner, name)
	if err != nil {
		return nil, fmt.Errorf("spec.report.pullRequests: %w (set apiURL)", err)
	}
	return f, nil
}

// touchesPath says whether a pull request changes a file under the PoolSync's path.
func touchesPath(ctx context.Context, f forge.Forge, pr int, dir string) (bool, error) {
	files, err := f.ChangedFiles(ctx, pr)
	if err != nil {
		return false, err
	}
	dir = strings.Trim(path.Clean("/"+dir), "/")
	for _, name := range files {
		if dir == "" || name == dir || strings.HasPrefix(name, dir+"/") {
			return true, nil
		}
	}
	return false, nil
}

// clusterWorkload is the workload snapshot the status report would commit, read back as a
// workload: the pull request is planned against what the cluster runs.
func (r *Reconciler) clusterWorkload(ctx context.Context, obj *v1alpha1.PoolSync) (*simulate.Workload, error) {
	files, err := r.statusFiles(ctx, obj)
	if err != nil {
		return nil, err
	}
	name := status.Dir(obj) + "/" + status.WorkloadFile
	objs, err := build.LoadFile(ctx, name, files[name])
	if err != nil {
		return nil, err
	}
	return simulate.WorkloadOf(objs, 0)
}

// reviewed says whether the pull request was planned at this head commit already.
func (r *Reconciler) reviewed(poolSync string, pr int, sha string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.planned[fmt.Sprintf("%s#%d", poolSync, pr)] == sha
}

func (r *Reconciler) markReviewed(poolSync string, pr int, sha string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.planned[fmt.Sprintf("%s#%d", poolSync, pr)] = sha
}

// overlaysOff is review.Input.OverlaysOff for a cluster whose NodeOverlay gate is on or off.
func overlaysOff(gate bool) string {
	if gate {
		return ""
	}
	return "the cluster's NodeOverlay feature gate is off (Karpenter's default), so the controller ignores them too"
}
