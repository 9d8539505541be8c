// Package nodeview is `karpool nodes`: the cluster's nodes as eks-node-viewer shows them — per
// node its pool, instance type, capacity type, zone, price, cpu and memory requested against
// allocatable, pods, age and disruption state — and the fleet's cost. Build and Render are pure;
// Load reads the cluster.
package nodeview

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/internal/fleet"
)

// Node is one row.
type Node struct {
	Name         string `json:"name"`
	NodePool     string `json:"nodePool,omitempty"` // empty for nodes karpool does not manage
	InstanceType string `json:"instanceType,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	// PerHour is the instance's list price in USD; VolumesPerHour its EBS volumes' (the
	// EC2NodeClass's default root volume). Priced is false when the catalog lacks the offering.
	PerHour        float64 `json:"perHour"`
	VolumesPerHour float64 `json:"volumesPerHour"`
	Priced         bool    `json:"priced"`
	// Estimated marks a price that is not a current list price (the catalog's spot prices).
	Estimated bool `json:"estimated,omitempty"`
	// CPU in millicores, memory in bytes: what the node's pods request and what it offers.
	CPURequested    int64 `json:"cpuRequestedMillis"`
	CPUAllocatable  int64 `json:"cpuAllocatableMillis"`
	MemRequested    int64 `json:"memoryRequestedBytes"`
	MemAllocatable  int64 `json:"memoryAllocatableBytes"`
	Pods            int   `json:"pods"`
	PodsAllocatable int64 `json:"podsAllocatable"`
	AgeSeconds      int64 `json:"ageSeconds"`
	// State is Ready or NotReady, then what disruption is doing to it: deleting, disrupting
	// (tainted karpenter.sh/disrupted), drifted, or blocked with the reason consolidation
	// gives (the NodeClaim's Consolidatable condition).
	State string `json:"state"`
}

// View is the whole screen.
type View struct {
	Nodes    []Node  `json:"nodes"`
	PerHour  float64 `json:"perHour"` // instances and their volumes
	PerMonth float64 `json:"perMonth"`
	Unpriced int     `json:"unpriced,omitempty"`
	// Pending counts pods without a node.
	Pending int `json:"pendingPods"`
}

// Load reads nodes, NodeClaims and pods from the cluster and builds the view, pricing nodes
// from the embedded catalog of their region (the topology.kubernetes.io/region label, else
// region).
func Load(ctx context.Context, r client.Reader, region string, now time.Time) (*View, error) {
	var (
		nodes  corev1.NodeList
		claims karpv1.NodeClaimList
		pods   corev1.PodList
	)
	for _, l := range []client.ObjectList{&nodes, &claims, &pods} {
		if err := r.List(ctx, l); err != nil {
			return nil, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	return Build(state.New(state.Pointers(pods.Items), state.Pointers(nodes.Items), state.Pointers(claims.Items)), prices(region), now), nil
}

// prices returns the offering of a node by its labels, loading each region's catalog once.
func prices(fallbackRegion string) func(labels map[string]string) (catalog.Offering, bool) {
	byRegion := map[string][]catalog.InstanceType{}
	nco, _ := catalog.NodeClassOptionsFor(nil)
	return func(labels map[string]string) (catalog.Offering, bool) {
		region := labels[corev1.LabelTopologyRegion]
		if region == "" {
			region = fallbackRegion
		}
		its, ok := byRegion[region]
		if !ok {
			if cat, err := catalog.Load(region); err == nil {
				its = cat.InstanceTypes(nco)
			}
			byRegion[region] = its
		}
		return catalog.OfferingOf(its, labels)
	}
}

// Build makes the view of a snapshot; offering prices a node by its labels.
func Build(c *state.Cluster, offering func(map[string]string) (catalog.Offering, bool), now time.Time) *View {
	claimByNode := map[string]*karpv1.NodeClaim{}
	for _, nc := range c.NodeClaims {
		if n := c.NodeFor(nc); n != nil {
			claimByNode[n.Name] = nc
		}
	}
	v := &View{Nodes: []Node{}}
	for _, n := range c.Nodes {
		row := Node{Name: n.Name, NodePool: n.Labels[karpv1.LabelNodePool], InstanceType: n.Labels[corev1.LabelInstanceTypeStable],
			CapacityType: n.Labels[karpv1.LabelCapacityType], Zone: n.Labels[corev1.LabelTopologyZone],
			CPUAllocatable: n.Status.Allocatable.Cpu().MilliValue(), MemAllocatable: n.Status.Allocatable.Memory().Value(),
			PodsAllocatable: n.Status.Allocatable.Pods().Value(), AgeSeconds: int64(now.Sub(n.CreationTimestamp.Time).Seconds()),
			State: nodeState(n, claimByNode[n.Name])}
		if o, ok := offering(n.Labels); ok {
			row.Priced, row.PerHour, row.VolumesPerHour, row.Estimated = true, o.PricePerHour-o.VolumesPerHour, o.VolumesPerHour, o.Estimated
			v.PerHour += o.PricePerHour
		} else if row.InstanceType != "" {
			v.Unpriced++
		}
		for _, p := range c.PodsOn(n.Name) {
			if p.Spec.NodeName != n.Name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			req, _ := scheduling.PodRequests(p)
			row.CPURequested += req[catalog.CPU]
			row.MemRequested += req[catalog.Memory]
			row.Pods++
		}
		v.Nodes = append(v.Nodes, row)
	}
	for _, p := range c.Pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending {
			v.Pending++
		}
	}
	// Pools together, then by name; nodes no pool manages last.
	sort.SliceStable(v.Nodes, func(i, j int) bool {
		a, b := v.Nodes[i], v.Nodes[j]
		if (a.NodePool == "") != (b.NodePool == "") {
			return b.NodePool == ""
		}
		if a.NodePool != b.NodePool {
			return a.NodePool < b.NodePool
		}
		return a.Name < b.Name
	})
	v.PerMonth = v.PerHour * fleet.HoursPerMonth
	return v
}

// nodeState says whether the node is Ready and what disruption is doing to it.
func nodeState(n *corev1.Node, nc *karpv1.NodeClaim) string {
	s := "NotReady"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			s = "Ready"
		}
	}
	switch {
	case n.DeletionTimestamp != nil || (nc != nil && nc.DeletionTimestamp != nil):
		return s + ", deleting"
	case hasTaint(n, karpv1.TaintKeyDisrupted):
		return s + ", disrupting"
	case nc == nil:
		return s
	case state.IsTrue(nc, karpv1.ConditionTypeDrifted):
		return s + ", drifted"
	}
	if c := state.Condition(nc, karpv1.ConditionTypeConsolidatable); c != nil && c.Status == "False" && c.Reason != "" {
		return s + ", " + c.Reason
	}
	return s
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
