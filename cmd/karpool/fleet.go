package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/reconciler/forge"
	"github.com/karpool/karpool/reconciler/review"
	"github.com/karpool/karpool/schema"
)

// readFleet reads and validates a fleet file (errors at file:line:col).
func readFleet(file string) (*v1alpha1.Fleet, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError{err}
	}
	fs, err := schema.ValidateDocuments(file, data)
	if err != nil {
		return nil, err
	}
	if fs.Errors() > 0 {
		var msgs []string
		for _, f := range fs {
			msgs = append(msgs, f.String())
		}
		return nil, invalidInput{strings.Join(msgs, "\n")}
	}
	var f v1alpha1.Fleet
	if err := sigsyaml.UnmarshalStrict(data, &f); err != nil {
		return nil, invalidInput{fmt.Sprintf("%s: %v", file, err)}
	}
	if f.Kind != v1alpha1.FleetKind {
		return nil, invalidInput{fmt.Sprintf("%s: kind %q, want Fleet (apiVersion karpool.dev/v1alpha1)", file, f.Kind)}
	}
	return &f, nil
}

// runFleetPlan plans a change for every cluster of --fleet and writes one report.
func runFleetPlan(cmd *cobra.Command, o planOptions) error {
	f, err := readFleet(o.fleet)
	if err != nil {
		return err
	}
	base, head, err := readRevisions(cmd, o)
	if err != nil {
		return err
	}
	in := review.FleetInput{Base: review.Tree{Revision: base.Revision, Files: base.Files}, Head: review.Tree{Revision: head.Revision, Files: head.Files},
		MaxPods: o.maxPods, Labels: o.labels}
	for _, c := range f.Spec.Clusters {
		cl, err := fleetCluster(cmd, o, c)
		if err != nil {
			return err
		}
		in.Clusters = append(in.Clusters, cl)
	}
	fp := review.MakeFleet(cmd.Context(), in)
	if err := writeFleetPlan(cmd.OutOrStdout(), fp, f.Metadata.Name, o.output); err != nil {
		return err
	}
	if o.post != "" {
		if err := postFleetPlan(cmd, o, fp, f.Metadata.Name, head.Commit); err != nil {
			return usageError{err}
		}
	}
	switch {
	case fp.Failed():
		return invalidInput{fmt.Sprintf("the head revision %s does not validate for some clusters", head.Revision)}
	case fp.Blocked():
		return blockedError{errors.New("a blocking guardrail fails for some clusters")}
	}
	return nil
}

// fleetCluster resolves one cluster's workload: a file next to the fleet file, or the snapshot
// on a status branch.
func fleetCluster(cmd *cobra.Command, o planOptions, c v1alpha1.FleetCluster) (review.Cluster, error) {
	cl := review.Cluster{Name: c.Name, Path: c.Path, Region: c.Region}
	switch {
	case c.Workload != "":
		file := filepath.Join(filepath.Dir(o.fleet), c.Workload)
		w, warnings, err := simulate.LoadWorkload(cmd.Context(), file, o.maxPods)
		if err != nil {
			return cl, invalidInput{fmt.Sprintf("cluster %s: %v", c.Name, err)}
		}
		for _, msg := range warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: cluster %s: %s\n", c.Name, msg)
		}
		cl.Workload, cl.WorkloadSource = w, file
	case c.StatusBranch != "":
		branch, err := readRevision(cmd, o.repo, c.StatusBranch)
		if err != nil {
			return cl, usageError{fmt.Errorf("cluster %s: %w", c.Name, err)}
		}
		w, from, err := snapshotOf(cmd.Context(), branch, c.Path, c.PoolSync, o.maxPods)
		if err != nil {
			return cl, usageError{fmt.Errorf("cluster %s: %w", c.Name, err)}
		}
		cl.Workload, cl.WorkloadSource = w, from
	}
	return cl, nil
}

func writeFleetPlan(w io.Writer, fp *review.FleetPlan, name, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(fp)
	case "markdown":
		_, err := io.WriteString(w, fp.Markdown(name, resolvedVersion()))
		return err
	}
	_, err := io.WriteString(w, fleetText(fp))
	return err
}

// fleetText is one line per cluster for a terminal.
func fleetText(fp *review.FleetPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", fp)
	for _, c := range fp.Clusters {
		switch {
		case c.Unchanged:
			fmt.Fprintf(&b, "  %s: unchanged\n", c.Name)
		case c.Error != "":
			fmt.Fprintf(&b, "  %s: not planned: %s\n", c.Name, c.Error)
		default:
			_, why := c.Plan.CommitStatus()
			fmt.Fprintf(&b, "  %s: %s (%s → %s per month)\n", c.Name, strings.Trim(why, "*"), fleet.Monthly(c.Plan.Base.PerHour), fleet.Monthly(c.Plan.Head.PerHour))
		}
	}
	return b.String()
}

// postFleetPlan writes the fleet's one comment and a commit status per cluster (context
// "karpool/plan: NAME"), so that branch protection can require the clusters it cares about.
func postFleetPlan(cmd *cobra.Command, o planOptions, fp *review.FleetPlan, name, headSHA string) error {
	f, err := openForge(cmd, o)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	out, c, err := forge.Post(ctx, f, o.pr, review.FleetMarker(name), fp.Markdown(name, resolvedVersion()), fp.Changed() > 0 || fp.Failed(), o.always)
	if err != nil {
		return fmt.Errorf("--post %s: %w", o.post, err)
	}
	for _, cp := range fp.Clusters {
		st := forge.Status{State: "success", Context: "karpool/plan: " + cp.Name, Description: "unchanged", TargetURL: c.URL}
		switch {
		case cp.Error != "":
			st.State, st.Description = "error", forge.Description(cp.Error)
		case cp.Plan != nil:
			state, why := cp.Plan.CommitStatus()
			st.State, st.Description = state, forge.Description(why)
		}
		if err := f.SetStatus(ctx, headSHA, st); err != nil {
			return fmt.Errorf("--post %s: setting the commit status %q of %s: %w", o.post, st.Context, headSHA, err)
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "karpool plan: comment %s on pull request %d %s; %d statuses on %s\n", out, o.pr, c.URL, len(fp.Clusters), headSHA[:min(12, len(headSHA))])
	return nil
}
