// Package status writes what a PoolSync runs back to its Git repository: after each
// reconciliation, a report per PoolSync — a page for people (Markdown), a file for machines
// (JSON) and a workload snapshot that `karpool plan --status-branch` reads — committed to a
// branch of its own, and only when something changed.
//
// Building the report is pure (Build, Markdown, Snapshot); the commit is the only I/O
// (Commit).
package status

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/nodepool"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/internal/fleet"
)

// Input is the cluster as the report sees it.
type Input struct {
	PoolSync *v1alpha1.PoolSync
	// NodePools are the PoolSync's pools (those in its inventory), NodeClaims and Pods every
	// one in the cluster: the report keeps what belongs to the pools.
	NodePools  []karpv1.NodePool
	NodeClaims []karpv1.NodeClaim
	Pods       []corev1.Pod
	// Price is the hourly price of a node with these labels; false when unknown.
	Price func(labels map[string]string) (float64, bool)
}

// Report is what the JSON file holds. It has no timestamps: an unchanged cluster gives the same
// bytes, and so no commit.
type Report struct {
	PoolSync          string `json:"poolSync"` // its name
	Path              string `json:"path"`
	AppliedRevision   string `json:"appliedRevision,omitempty"`
	AttemptedRevision string `json:"attemptedRevision,omitempty"`
	Ready             string `json:"ready"` // the Ready condition's status
	// Message is the Ready condition's message: the validation errors when the last revision
	// was refused.
	Message string       `json:"message,omitempty"`
	Pools   []PoolStatus `json:"pools"`
	Nodes   int          `json:"nodes"`
	PerHour float64      `json:"perHour"`
	// PendingPods are pods without a node, which the pools may have to serve.
	PendingPods int `json:"pendingPods"`
	// AWS is what spec.aws planned or applied in the account, when it is set.
	AWS *AWSReport `json:"aws,omitempty"`

	// pods are the pods counted: on the pools' nodes, and pending.
	pods []corev1.Pod
}

// PoolStatus is one NodePool's nodes (fleet.Pool) as the cluster runs them, with what the
// report adds.
type PoolStatus struct {
	fleet.Pool
	// Unpriced counts nodes whose offering the catalog does not know.
	Unpriced    int  `json:"unpriced,omitempty"`
	Requested   Pair `json:"requested"`
	Allocatable Pair `json:"allocatable"`
	Limits      Pair `json:"limits"`
	// Rollout is the RolledOut condition's message ("" when the pool has none).
	Rollout string `json:"rollout,omitempty"`
	// Drifted counts nodes marked Drifted; Blocked counts, by reason, the nodes that
	// consolidation may not touch (the Consolidatable condition's reasons).
	Drifted int            `json:"drifted"`
	Blocked map[string]int `json:"blocked,omitempty"`
}

// AWSReport is status.aws with the AWSReady condition.
type AWSReport struct {
	v1alpha1.AWSStatus
	Ready   string `json:"ready"` // the AWSReady condition's status
	Message string `json:"message,omitempty"`
}

// Pair is cpu and memory as quantities, for the JSON file.
type Pair struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// Build makes the report of one PoolSync.
func Build(in Input) *Report {
	ps := in.PoolSync
	r := &Report{PoolSync: ps.Name, Path: ps.Spec.Path, AppliedRevision: ps.Status.LastAppliedRevision,
		AttemptedRevision: ps.Status.LastAttemptedRevision, Ready: string(metav1.ConditionUnknown), Pools: []PoolStatus{}}
	if c := meta(ps.Status.Conditions, "Ready"); c != nil {
		r.Ready, r.Message = string(c.Status), c.Message
	}
	if ps.Status.AWS != nil {
		r.AWS = &AWSReport{AWSStatus: *ps.Status.AWS, Ready: string(metav1.ConditionUnknown)}
		if c := meta(ps.Status.Conditions, v1alpha1.AWSReadyCondition); c != nil {
			r.AWS.Ready, r.AWS.Message = string(c.Status), c.Message
		}
	}
	byPool := map[string]*PoolStatus{}
	for i := range in.NodePools {
		byPool[in.NodePools[i].Name] = poolStatus(&in.NodePools[i])
	}
	nodePool := map[string]string{} // node name -> pool
	for i := range in.NodeClaims {
		nc := &in.NodeClaims[i]
		p := byPool[nc.Labels[karpv1.LabelNodePool]]
		if p == nil || !nc.DeletionTimestamp.IsZero() && nc.Status.NodeName == "" {
			continue
		}
		addClaim(p, nc, in.Price)
		if nc.Status.NodeName != "" {
			nodePool[nc.Status.NodeName] = p.Name
		}
	}
	for i := range in.Pods {
		pod := &in.Pods[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod.Spec.NodeName == "" {
			r.PendingPods++
			r.pods = append(r.pods, *pod)
			continue
		}
		if p := byPool[nodePool[pod.Spec.NodeName]]; p != nil {
			r.pods = append(r.pods, *pod)
			req, _ := scheduling.PodRequests(pod)
			p.Pods++
			p.ReqCPU += req[catalog.CPU]
			p.ReqMem += req[catalog.Memory]
		}
	}
	names := make([]string, 0, len(byPool))
	for n := range byPool {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := byPool[n]
		finish(p)
		r.Pools = append(r.Pools, *p)
		r.Nodes += p.Nodes
		r.PerHour += p.PerHour
	}
	return r
}

func poolStatus(np *karpv1.NodePool) *PoolStatus {
	p := &PoolStatus{Pool: fleet.NewPool(np)}
	if c := meta(np.Status.Conditions, nodepool.ConditionTypeRolledOut); c != nil {
		p.Rollout = c.Message
	}
	return p
}

// addClaim counts a NodeClaim in its pool: its group, price, resources and disruption state.
func addClaim(p *PoolStatus, nc *karpv1.NodeClaim, price func(map[string]string) (float64, bool)) {
	n := fleet.Node{InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], CapacityType: nc.Labels[karpv1.LabelCapacityType],
		Zone: nc.Labels[corev1.LabelTopologyZone], AllocCPU: nc.Status.Allocatable.Cpu().MilliValue(), AllocMem: nc.Status.Allocatable.Memory().Value(),
		CapCPU: nc.Status.Capacity.Cpu().MilliValue(), CapMem: nc.Status.Capacity.Memory().Value()}
	if v, ok := price(nc.Labels); ok {
		n.PerHour = v
	} else {
		p.Unpriced++
	}
	p.Add(n)
	for _, c := range nc.Status.Conditions {
		switch {
		case c.Type == karpv1.ConditionTypeDrifted && c.Status == metav1.ConditionTrue:
			p.Drifted++
		case c.Type == karpv1.ConditionTypeConsolidatable && c.Status == metav1.ConditionFalse:
			if p.Blocked == nil {
				p.Blocked = map[string]int{}
			}
			p.Blocked[c.Reason]++
		}
	}
}

// finish orders the groups and fills the JSON quantities.
func finish(p *PoolStatus) {
	p.Sort()
	p.Requested = Pair{CPU: scheduling.FormatQuantity(catalog.CPU, p.ReqCPU), Memory: scheduling.FormatQuantity(catalog.Memory, p.ReqMem)}
	p.Allocatable = Pair{CPU: scheduling.FormatQuantity(catalog.CPU, p.AllocCPU), Memory: scheduling.FormatQuantity(catalog.Memory, p.AllocMem)}
	if p.LimitCPU >= 0 {
		p.Limits.CPU = scheduling.FormatQuantity(catalog.CPU, p.LimitCPU)
	}
	if p.LimitMem >= 0 {
		p.Limits.Memory = scheduling.FormatQuantity(catalog.Memory, p.LimitMem)
	}
}

// meta finds a condition by type.
func meta(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// Dir is where a PoolSync's files go on the status branch: its name (PoolSyncs are
// cluster-scoped).
func Dir(ps *v1alpha1.PoolSync) string { return ps.Name }

// CatalogPrices prices nodes from the embedded EC2 catalog of region, with the default root
// volume; every node is unpriced when the region has no catalog.
func CatalogPrices(region string) func(labels map[string]string) (float64, bool) {
	cat, err := catalog.Load(region)
	if err != nil {
		return func(map[string]string) (float64, bool) { return 0, false }
	}
	nco, _ := catalog.NodeClassOptionsFor(nil)
	its := cat.InstanceTypes(nco)
	return func(labels map[string]string) (float64, bool) { return catalog.PriceOf(its, labels) }
}
