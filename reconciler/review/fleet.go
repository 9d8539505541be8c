package review

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/manifests/build"
)

// Cluster is one cluster of a fleet: the kustomize path of its pools (its overlay), its region
// and its workload.
type Cluster struct {
	Name, Path, Region string
	Workload           *simulate.Workload
	WorkloadSource     string
}

// FleetInput is a change to a repository that holds the pools of many clusters.
type FleetInput struct {
	Base, Head Tree
	Clusters   []Cluster
	MaxPods    int
	Now        time.Time
	// Labels are the pull request's labels (the review policy's override).
	Labels []string
	// Workers plans that many clusters at once (0: one per CPU).
	Workers int
}

// FleetPlan is the review of a change across the clusters of a fleet, in the fleet's order.
type FleetPlan struct {
	Base, Head string
	Clusters   []ClusterPlan `json:"clusters"`
}

// ClusterPlan is one cluster's part: Unchanged when the change renders the same objects for
// it (it is not planned), else its Plan.
type ClusterPlan struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	Unchanged bool   `json:"unchanged,omitempty"`
	Plan      *Plan  `json:"plan,omitempty"`
	// Error is what kept the cluster from being planned (a bad region), not the revisions'
	// fault: their problems are in the Plan.
	Error string `json:"error,omitempty"`
}

// MakeFleet reviews a change for every cluster of a fleet, Workers at a time. A cluster whose
// path renders the same objects in both revisions is only said to be unchanged: the change
// cannot alter its nodes.
func MakeFleet(ctx context.Context, in FleetInput) *FleetPlan {
	fp := &FleetPlan{Base: in.Base.Revision, Head: in.Head.Revision, Clusters: make([]ClusterPlan, len(in.Clusters))}
	workers := in.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, c := range in.Clusters {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fp.Clusters[i] = planCluster(ctx, in, c)
		}()
	}
	wg.Wait()
	return fp
}

// planCluster plans one cluster, or finds it unchanged.
func planCluster(ctx context.Context, in FleetInput, c Cluster) ClusterPlan {
	cp := ClusterPlan{Name: c.Name, Path: c.Path}
	if same(ctx, in.Base.Files, in.Head.Files, c.Path) {
		cp.Unchanged = true
		return cp
	}
	p, err := Make(ctx, Input{Base: in.Base, Head: in.Head, Path: c.Path, Workload: c.Workload, WorkloadSource: c.WorkloadSource,
		Region: c.Region, MaxPods: in.MaxPods, Now: in.Now, Labels: in.Labels})
	if err != nil {
		cp.Error = err.Error()
		return cp
	}
	p.drop()
	cp.Plan = p
	return cp
}

// same reports whether both revisions build the path into the same objects (both failing the
// same way counts as the same).
func same(ctx context.Context, base, head map[string][]byte, path string) bool {
	a, errA := build.Build(ctx, base, path)
	b, errB := build.Build(ctx, head, path)
	if errA != nil || errB != nil {
		return errA != nil && errB != nil && errA.Error() == errB.Error()
	}
	return len(diffObjects(a, b)) == 0
}

// drop lets go of what the plan keeps only to be made (objects, reports, workloads), so that a
// fleet of large clusters holds only what its comment shows.
func (p *Plan) drop() {
	for _, s := range []*Side{p.Base, p.Head} {
		s.objs, s.report, s.pools, s.workload = nil, nil, nil, nil
	}
}

// Blocked says whether some cluster's plan is blocked by a guardrail.
func (fp *FleetPlan) Blocked() bool {
	for _, c := range fp.Clusters {
		if c.Plan != nil && c.Plan.Blocked() {
			return true
		}
	}
	return false
}

// Failed says whether some cluster's head does not validate or could not be planned.
func (fp *FleetPlan) Failed() bool {
	for _, c := range fp.Clusters {
		if c.Error != "" || c.Plan != nil && c.Plan.Failed() {
			return true
		}
	}
	return false
}

// Changed counts the clusters the change touches.
func (fp *FleetPlan) Changed() int {
	n := 0
	for _, c := range fp.Clusters {
		if !c.Unchanged {
			n++
		}
	}
	return n
}

// String names the plan for logs.
func (fp *FleetPlan) String() string {
	return fmt.Sprintf("fleet plan of %d clusters (%d changed) %s → %s", len(fp.Clusters), fp.Changed(), fp.Base, fp.Head)
}
