package provisioning

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// input builds the scheduling engine's input from a snapshot: pending pods (minus those
// nominated to in-flight NodeClaims or to nodes still starting), existing nodes with their pods,
// in-flight NodeClaims with their planned pods (handed off at launch or not yet), daemonsets,
// volume claims, volumes and storage classes, and the pools whose node class is ready with the
// instance types the cloud offers for it. planned gives each pod's planned NodeClaim (state.Nominations.Planned). The engine sizes
// in-flight NodeClaims that have not launched yet from their instance-type options.
func input(c *state.Cluster, pools []scheduling.Pool, planned map[types.UID]string, region string) *scheduling.Input {
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
	nodeIdx := make(map[string]int, len(c.Nodes))
	for _, n := range c.Nodes {
		nodeIdx[n.Name] = len(in.Nodes)
		in.Nodes = append(in.Nodes, scheduling.ExistingNode{Node: n, Pods: c.PodsOn(n.Name)})
	}
	inFlight, starting := map[string]int{}, map[string]int{}
	for _, nc := range c.NodeClaims {
		if nc.DeletionTimestamp != nil {
			continue // deleting claims take no pods
		}
		if node := c.NodeFor(nc); node != nil {
			// Until the node is initialized, the pods planned onto it may not carry their
			// hand-off (nominatedNodeName) yet: they still take its room, or the next round
			// would pack them again, differently, and open claims for the ones left over.
			if node.Labels[karpv1.LabelNodeInitialized] != "true" {
				starting[nc.Name] = nodeIdx[node.Name]
			}
			continue
		}
		inFlight[nc.Name] = len(in.NodeClaims)
		in.NodeClaims = append(in.NodeClaims, scheduling.InFlightNodeClaim{NodeClaim: nc})
	}
	for _, p := range c.Pods {
		// Handed off at launch to the node its NodeClaim's instance is booting as: the pod is
		// not provisionable (it is nominated) and no node of that name exists yet, so only its
		// planned NodeClaim can count its room.
		_, nodeExists := nodeIdx[p.Status.NominatedNodeName]
		if i, ok := inFlight[planned[p.UID]]; ok && !nodeExists && p.Status.NominatedNodeName != "" && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			in.NodeClaims[i].Pods = append(in.NodeClaims[i].Pods, p)
		}
	}
	for _, p := range c.ProvisionablePods() {
		claim := planned[p.UID]
		if i, ok := inFlight[claim]; ok {
			in.NodeClaims[i].Pods = append(in.NodeClaims[i].Pods, p)
			continue
		}
		if i, ok := starting[claim]; ok {
			n := &in.Nodes[i]
			n.Pods = append(slices.Clip(n.Pods), p) // the snapshot's slice is not ours to grow
			continue
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}
