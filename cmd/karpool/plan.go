package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	pathpkg "path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/reconciler/review"
	"github.com/karpool/karpool/reconciler/source"
	"github.com/karpool/karpool/reconciler/status"
)

type planOptions struct {
	repo, base, head, path string
	workload, region       string
	statusBranch, poolSync string
	output                 string
	maxPods                int
	// Posting: forge, pull request, repository slug, API base, post even without a change.
	post, repository, apiURL string
	pr                       int
	always                   bool
	// labels are the pull request's, for the review policy's override label.
	labels []string
	// fleet is a Fleet file: plan every cluster it lists.
	fleet string
}

func newPlanCommand() *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan --base REF [--head REF] [--repo PATH|URL] [--path P] [--workload FILE] [--output text|markdown|json]",
		Short: "Show what a change to the pools repository does to nodes, instance types and cost, before it is merged",
		Long: `plan reads two revisions of a pools repository exactly as a PoolSync would — kustomize build
of --path when it holds a kustomization, its YAML files otherwise — and validates both with the
controller's checks. It then places one workload on each revision's NodePools with karpool's
scheduling engine and compares them: nodes by instance type and capacity type, cost per month
(730 h), cpu and memory requested against allocatable, what the pools' limits leave, cost
against the lower bound, the pods that would no longer fit and why, and the nodes that drift
would replace (the disruption controller's drift rules applied to the nodes the base revision
runs). The rendered objects that differ are shown as a diff.

The workload is --workload (Kubernetes YAML, a file or directory, or a CSV of shapes; see
'karpool simulate --help'), or with --status-branch the snapshot of the running cluster that
the PoolSync's status commits keep on that branch (the PoolSync whose spec.path is --path, or
--poolsync NAME), plus the Pods, Deployments, ReplicaSets, StatefulSets, DaemonSets
and HorizontalPodAutoscalers that each revision holds under --path. With HPAs, the plan also
shows the head at every HPA's maxReplicas.

--repo is a work tree on disk (default: the current directory) or a URL (https://, ssh://,
file://) cloned into memory; REF is a branch, tag or commit id (on disk, anything git rev-parse
accepts, such as HEAD~1). Nothing in the repository is executed: kustomize plugins, exec
functions and remote bases are refused, files are read with size limits, and a workload may
expand to at most --max-pods pods.

--output markdown is the pull-request comment (docs/reviewing.md: a headline with the monthly delta,
a Previous | New | Diff table per pool, details with the manifest diff and the assumptions),
below 65,000 characters.

When the base revision holds a review policy (.karpool/policy.yaml, kind ReviewPolicy; see
docs/cost-governance.md), the plan checks the change against its guardrails — the base's rules,
never the head's — and shows each rule's result; --label gives the pull request's labels, among
which the policy's override label lets the change pass.

With --fleet FILE (kind Fleet: each cluster's name, path, region and workload file or status
branch), the change is planned for every cluster in one report: a summary row per cluster it
touches, the others listed as unchanged, then each touched cluster's plan; --post writes one
comment and a commit status per cluster ("karpool/plan: NAME").

Exit status: 0 planned, 1 the head revision does not build or validate (the output says
where), 2 usage or I/O error, 3 a blocking guardrail fails (and no override label).`,
		Example: `  karpool plan --base main --head HEAD --path pools --workload workload.yaml
  karpool plan --repo https://github.com/acme/pools --base main --head feature/t3-medium --output markdown
  karpool plan --base HEAD~1 --path examples/workshop --workload examples/workshop/workload --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return usageError{err}
			}
			return runPlan(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", ".", "repository: a directory of a work tree, or a URL")
	f.StringVar(&o.base, "base", "", "revision the change starts from (required)")
	f.StringVar(&o.head, "head", "HEAD", "revision with the change; with a URL --repo, a full reference such as refs/pull/7/head reads a pull request from a fork")
	f.StringVar(&o.path, "path", ".", "directory of the repository that PoolSync reads (spec.path)")
	f.StringVar(&o.workload, "workload", "", "workload: Kubernetes YAML file or directory, or a CSV of shapes")
	f.StringVar(&o.statusBranch, "status-branch", "", "read the workload snapshot of the status commits on this branch (e.g. karpool-status)")
	f.StringVar(&o.poolSync, "poolsync", "", "with --status-branch: name of the PoolSync whose snapshot to read")
	f.StringVar(&o.region, "region", "us-east-1", "catalog region for prices")
	f.StringVarP(&o.output, "output", "o", "text", "text, markdown or json")
	f.IntVar(&o.maxPods, "max-pods", simulate.DefaultMaxPods, "most pods a revision's workload may expand to")
	f.StringVar(&o.post, "post", "", "post the Markdown as the pull request's comment and a commit status on the head: github or gitea (token from GITHUB_TOKEN or GITEA_TOKEN)")
	f.IntVar(&o.pr, "pr", 0, "with --post: the pull request's number")
	f.StringVar(&o.repository, "repository", "", "with --post: OWNER/NAME on the forge (default: read from --repo's URL or its origin remote)")
	f.StringVar(&o.apiURL, "api-url", "", "with --post: the forge's address (GitHub Enterprise: https://HOST/api/v3; Gitea: https://HOST, default the origin's host)")
	f.BoolVar(&o.always, "always", false, "with --post: comment even when the change changes nothing")
	f.StringVar(&o.fleet, "fleet", "", "a Fleet file (kind Fleet): plan the change for every cluster it lists, in one report and one comment with a commit status per cluster")
	f.StringArrayVar(&o.labels, "label", nil, "a label of the pull request (repeat for each): the review policy's override label lets the change pass its blocking guardrails")
	return cmd
}

func (o planOptions) check() error {
	switch {
	case o.base == "":
		return errors.New("--base is required: the revision the change starts from, e.g. main")
	case !slices.Contains([]string{"text", "markdown", "json"}, o.output):
		return fmt.Errorf("--output %q: want text, markdown or json", o.output)
	case !slices.Contains(catalog.Regions(), o.region):
		return fmt.Errorf("--region %q: embedded catalogs: %s", o.region, strings.Join(catalog.Regions(), ", "))
	case o.maxPods <= 0:
		return fmt.Errorf("--max-pods %d: want a positive count", o.maxPods)
	case o.workload != "" && o.statusBranch != "":
		return errors.New("--workload and --status-branch both give the workload: choose one")
	case o.poolSync != "" && o.statusBranch == "":
		return errors.New("--poolsync selects a snapshot of --status-branch: give both")
	case o.post != "" && o.post != "github" && o.post != "gitea":
		return fmt.Errorf("--post %q: want github or gitea", o.post)
	case o.post != "" && o.pr <= 0:
		return errors.New("--post needs --pr N, the pull request's number")
	case o.post == "" && (o.pr != 0 || o.always || o.repository != "" || o.apiURL != ""):
		return errors.New("--pr, --always, --repository and --api-url go with --post")
	case o.fleet != "" && (o.path != "." || o.workload != "" || o.statusBranch != "" || o.region != "us-east-1"):
		return errors.New("--fleet gives each cluster its path, region and workload: drop --path, --workload, --status-branch and --region")
	}
	return nil
}

func runPlan(cmd *cobra.Command, o planOptions) error {
	if o.fleet != "" {
		return runFleetPlan(cmd, o)
	}
	base, head, err := readRevisions(cmd, o)
	if err != nil {
		return err
	}
	in := review.Input{
		Base: review.Tree{Revision: base.Revision, Files: base.Files},
		Head: review.Tree{Revision: head.Revision, Files: head.Files},
		Path: o.path, Region: o.region, MaxPods: o.maxPods, Labels: o.labels,
	}
	if o.workload != "" {
		w, warnings, err := simulate.LoadWorkload(cmd.Context(), o.workload, o.maxPods)
		if err != nil {
			return invalidInput{err.Error()}
		}
		for _, msg := range warnings {
			fmt.Fprintln(cmd.ErrOrStderr(), "warning:", msg)
		}
		in.Workload, in.WorkloadSource = w, o.workload
	}
	if o.statusBranch != "" {
		branch, err := readRevision(cmd, o.repo, o.statusBranch)
		if err != nil {
			return usageError{err}
		}
		w, from, err := snapshotOf(cmd.Context(), branch, o.path, o.poolSync, o.maxPods)
		if err != nil {
			return usageError{err}
		}
		in.Workload, in.WorkloadSource = w, from
	}
	plan, err := review.Make(cmd.Context(), in)
	if err != nil {
		return err
	}
	if err := writePlan(cmd.OutOrStdout(), plan, o.output); err != nil {
		return err
	}
	if o.post != "" {
		if err := postPlan(cmd, o, plan, head.Commit); err != nil {
			return usageError{err}
		}
	}
	if plan.Failed() {
		return invalidInput{fmt.Sprintf("the head revision %s does not validate", head.Revision)}
	}
	if plan.Blocked() {
		_, why := plan.CommitStatus()
		return blockedError{errors.New(why)}
	}
	return nil
}

// readRevisions reads --base and --head. Not finding the repository or a revision is an I/O
// error (exit 2), like vet's.
func readRevisions(cmd *cobra.Command, o planOptions) (base, head *source.Artifact, err error) {
	if base, err = readRevision(cmd, o.repo, o.base); err != nil {
		return nil, nil, usageError{err}
	}
	if head, err = readRevision(cmd, o.repo, o.head); err != nil {
		return nil, nil, usageError{err}
	}
	return base, head, nil
}

func writePlan(w io.Writer, p *review.Plan, output string) error {
	switch output {
	case "json":
		return p.WriteJSON(w)
	case "markdown":
		_, err := io.WriteString(w, p.Markdown(resolvedVersion()))
		return err
	}
	_, err := io.WriteString(w, p.Text())
	return err
}

var commitID = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// readRevision reads a revision of a work tree on disk, or clones it from a URL.
func readRevision(cmd *cobra.Command, repo, rev string) (*source.Artifact, error) {
	if !strings.Contains(repo, "://") {
		return source.ReadLocal(repo, rev)
	}
	ref := source.Ref{Branch: rev}
	switch {
	case commitID.MatchString(rev):
		ref = source.Ref{Commit: strings.ToLower(rev)}
	case strings.HasPrefix(rev, "refs/tags/"):
		ref = source.Ref{Tag: strings.TrimPrefix(rev, "refs/tags/")}
	case strings.HasPrefix(rev, "refs/"):
		ref = source.Ref{Name: rev} // e.g. refs/pull/7/head
	}
	return source.NewFetcher().Fetch(cmd.Context(), source.Request{URL: repo, Ref: ref})
}

// snapshotOf reads the workload snapshot that a PoolSync's status commits keep on a branch: the
// PoolSync named NAMESPACE/NAME, or the one whose spec.path is path.
func snapshotOf(ctx context.Context, branch *source.Artifact, path, poolSync string, maxPods int) (*simulate.Workload, string, error) {
	clean := func(p string) string { return strings.Trim(pathpkg.Clean("/"+p), "/") }
	want := clean(path)
	var found []string
	for name, data := range branch.Files {
		dir, file := pathpkg.Split(name)
		if file != status.ReportFile {
			continue
		}
		var r status.Report
		if json.Unmarshal(data, &r) != nil {
			continue
		}
		if poolSync == r.PoolSync || poolSync == "" && clean(r.Path) == want {
			found = append(found, dir)
		}
	}
	sort.Strings(found)
	switch {
	case len(found) == 0 && poolSync != "":
		return nil, "", fmt.Errorf("%s holds no status of PoolSync %s", branch.Revision, poolSync)
	case len(found) == 0:
		return nil, "", fmt.Errorf("%s holds no status of a PoolSync with path %q: name one with --poolsync NAME", branch.Revision, path)
	case len(found) > 1:
		return nil, "", fmt.Errorf("%s holds the status of several PoolSyncs with path %q (%s): choose one with --poolsync", branch.Revision, path, strings.Join(found, ", "))
	}
	name := found[0] + status.WorkloadFile
	from := fmt.Sprintf("the snapshot %s of %s", name, branch.Revision)
	objs, err := build.LoadFile(ctx, name, branch.Files[name])
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", from, err)
	}
	w, err := simulate.WorkloadOf(objs, maxPods)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", from, err)
	}
	return w, from, nil
}
