package provisioning

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// Nominations remembers which in-flight NodeClaim each pod was planned onto. The scheduling
// engine needs them while a NodeClaim has no node: those pods are not pending any more as far as
// the autoscaler is concerned (their capacity is on its way), and the room they take on the
// NodeClaim is not free. Once the NodeClaim's node exists the kube-scheduler binds the pods and
// the nominations are no longer consulted.
type Nominations map[types.UID]string

// input builds the scheduling engine's input from a snapshot: pending pods (minus those
// nominated to in-flight NodeClaims), existing nodes with their pods, in-flight NodeClaims with
// their nominated pods, daemonsets, volume claims, volumes and storage classes, and the pools
// whose node class is ready with the instance types the cloud offers for it.
func input(c *state.Cluster, pools []scheduling.Pool, noms Nominations, region string) *scheduling.Input {
	in := &scheduling.Input{
		Nodes:      make([]scheduling.ExistingNode, 0, len(c.Nodes)),
		DaemonSets: c.DaemonSets,
		Pools:      pools,
		Namespaces: c.Namespaces,
		Region:     region,

		PersistentVolumeClaims: c.VolumeClaims,
		PersistentVolumes:      c.Volumes,
		StorageClasses:         c.StorageClasses,
	}
	for _, n := range c.Nodes {
		in.Nodes = append(in.Nodes, scheduling.ExistingNode{Node: n, Pods: c.PodsOn(n.Name)})
	}
	typesOf := map[string][]catalog.InstanceType{}
	for _, p := range pools {
		typesOf[p.NodePool.Name] = p.InstanceTypes
	}
	inFlight := map[string]int{}
	for _, nc := range c.NodeClaims {
		if nc.DeletionTimestamp != nil || c.NodeFor(nc) != nil {
			// Deleting claims take no pods; registered ones are counted through their Node.
			continue
		}
		inFlight[nc.Name] = len(in.NodeClaims)
		in.NodeClaims = append(in.NodeClaims, scheduling.InFlightNodeClaim{NodeClaim: nc})
	}
	for _, p := range c.ProvisionablePods() {
		if i, ok := inFlight[noms[p.UID]]; ok {
			in.NodeClaims[i].Pods = append(in.NodeClaims[i].Pods, p)
			continue
		}
		in.Pods = append(in.Pods, p)
	}
	for i := range in.NodeClaims {
		f := &in.NodeClaims[i]
		f.NodeClaim = presentable(f.NodeClaim, typesOf[f.NodeClaim.Labels[karpv1.LabelNodePool]], f.Pods)
	}
	return in
}

// presentable returns the NodeClaim as the engine should see it. A launched NodeClaim carries
// its instance type label and allocatable, which is all the engine needs. One that is not
// launched yet and may still become any of several instance types has no size yet: the engine
// would count it as zero capacity against the pool's limits. It is shown with the largest
// capacity among its options (limits are never exceeded, whichever type launches) and with the
// allocatable its nominated pods already take (so no further pod is planned onto it before its
// size is known).
func presentable(nc *karpv1.NodeClaim, its []catalog.InstanceType, nominated []*corev1.Pod) *karpv1.NodeClaim {
	if state.Launched(nc) || len(nc.Status.Allocatable) > 0 {
		return nc
	}
	var options []string
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
			options = r.Values
		}
	}
	if len(options) == 1 {
		return nc // the engine sizes single-type NodeClaims itself
	}
	allowed := make(map[string]bool, len(options))
	for _, o := range options {
		allowed[o] = true
	}
	var largest catalog.Resources
	for i := range its {
		if !allowed[its[i].Name] {
			continue
		}
		for r, v := range its[i].Capacity {
			largest[r] = max(largest[r], v)
		}
	}
	var taken catalog.Resources
	for _, p := range nominated {
		r, _ := scheduling.PodRequests(p)
		for i, v := range r {
			taken[i] += v
		}
	}
	out := nc.DeepCopy()
	out.Status.Capacity = largest.ResourceList()
	out.Status.Allocatable = taken.ResourceList()
	if len(out.Status.Allocatable) == 0 {
		// Nothing nominated (e.g. after a restart): still show it as full.
		out.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	}
	return out
}
