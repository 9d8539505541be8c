// Package scheduling is karpool's scheduling engine: a pure function from pending pods, the
// existing capacity and the NodePools (with their resolved instance types) to a plan — which pods
// go on existing nodes, which new NodeClaims to launch for the rest, and which pods cannot be
// scheduled and why.
//
// Solve does no I/O, reads no clock and is deterministic: the same Input gives the same Result.
// The same engine serves the provisioning controller, `karpool simulate` and the PR cost plan.
//
// How it works, in short (see DESIGN.md section 7 for the performance targets):
//   - Pods with identical scheduling-relevant specs form an equivalence class; the engine works on
//     classes and counts, never re-evaluating requirements per pod.
//   - Label requirements are evaluated once per (class signature, NodePool) into a bitset of
//     compatible instance types plus zone and capacity-type masks; fit checks in the hot path are
//     a handful of integer comparisons on fixed resource vectors.
//   - Pods with topology constraints (spread, pod affinity and anti-affinity) are placed first, in
//     batches, against domain counters; the remaining "free" pods are packed for cost: each new
//     node's instance type is chosen by how much of the remaining demand it packs per dollar, under
//     the dual prices of the LP relaxation, and every NodeClaim finally gets the cheapest instance
//     type that fits its pods.
package scheduling

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// Input is everything Solve looks at.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the existing nodes with the pods bound to them (daemonset pods included).
	Nodes []ExistingNode
	// NodeClaims are in-flight NodeClaims (launched or launching, not yet nodes) with the pods
	// already nominated to them.
	NodeClaims []InFlightNodeClaim
	// DaemonSets run a pod on every new node whose labels and taints they accept; their requests
	// are reserved on each new NodeClaim.
	DaemonSets []*appsv1.DaemonSet
	// Pools are the NodePools with the instance types each may launch.
	Pools []Pool
	// Namespaces are only needed to evaluate namespaceSelectors of pod affinity terms.
	Namespaces []*corev1.Namespace
	// PersistentVolumeClaims, PersistentVolumes and StorageClasses give the volume topology of
	// pending pods: a claim bound to a volume with node affinity confines the pod to it, an
	// unbound claim of a WaitForFirstConsumer class with allowedTopologies to those.
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// Region, if set, is the value of topology.kubernetes.io/region on new nodes.
	Region string
	// Options tune the solve.
	Options Options
}

// Options tune Solve.
type Options struct {
	// IgnorePreferences treats preferred node affinity, preferred pod (anti-)affinity and
	// ScheduleAnyway topology spread as absent.
	IgnorePreferences bool
	// MinValuesBestEffort is Karpenter's MIN_VALUES_POLICY=BestEffort: minValues do not hold
	// packing back; a NodeClaim lists what its pods leave and lowers a minValues it cannot meet
	// to what it has (MinValuesRelaxed). Otherwise (Strict) minValues hold.
	MinValuesBestEffort bool
	// MaxInstanceTypes caps the instance types listed per NodeClaim; 0 means 60.
	MaxInstanceTypes int
	// CostLimitSlack is, per NodePool, what the nodes a disruption would remove cost ($/h,
	// their pods being among Pods): their replacements may spend it even where the pool is at or
	// past its cost limit, so that consolidation can move such a pool toward its limit.
	CostLimitSlack map[string]float64
}

// Pool is a NodePool and the instance types it may launch, as the catalog resolved them for its
// node class (allocatable already accounts for the node class's kubelet settings).
type Pool struct {
	NodePool      *karpv1.NodePool
	InstanceTypes []catalog.InstanceType
}

// ExistingNode is a node of the cluster and the pods bound to it.
type ExistingNode struct {
	Node *corev1.Node
	Pods []*corev1.Pod
}

// InFlightNodeClaim is a NodeClaim that has no node yet (or whose node is not ready) and the pods
// nominated to it.
type InFlightNodeClaim struct {
	NodeClaim *karpv1.NodeClaim
	Pods      []*corev1.Pod
}

// Result is the plan.
type Result struct {
	// Bindings lists every scheduled pod once, in the order the engine placed them. Constraints
	// that depend on other pods (topology spread, pod affinity) hold when the pods are bound in
	// this order.
	Bindings []Binding
	// NodeClaims are the new nodes to launch.
	NodeClaims []NodeClaim
	// Unschedulable are the pods that fit nowhere, with the reason.
	Unschedulable []Unschedulable
}

// Binding places one pod.
type Binding struct {
	Pod *corev1.Pod
	// Node is the name of the existing node, of the in-flight NodeClaim, or of the new NodeClaim.
	Node string
	// NodeClaim indexes Result.NodeClaims when the pod goes to new capacity, else -1.
	NodeClaim int
}

// NodeClaim is one new node to launch.
type NodeClaim struct {
	// Name is a placeholder (pool name and a sequence number); the real name and hostname are
	// assigned at launch.
	Name string
	// Pool is the NodePool's name.
	Pool string
	// Pods are the pods planned onto the node, in binding order.
	Pods []*corev1.Pod
	// InstanceTypes are all instance types that are compatible with the pods and the pool and fit
	// the pods plus daemonsets, cheapest first, capped at Options.MaxInstanceTypes.
	InstanceTypes []InstanceTypeOption
	// Zones and CapacityTypes the NodeClaim may launch in (sorted).
	Zones         []string
	CapacityTypes []string
	// Requirements for the NodeClaim spec: the pool's requirements narrowed by the pods'.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// Labels the node will carry if launched as the cheapest option (instance type labels, zone,
	// capacity type, pool and template labels, hostname placeholder); the deprecated aliases the
	// kubelet, cloud controller and EBS CSI driver add (karpv1.NormalizedLabels) are left out.
	Labels map[string]string
	// Taints and StartupTaints come from the pool's template.
	Taints        []karpv1.Taint
	StartupTaints []karpv1.Taint
	// PodRequests is the sum of the pods' requests; DaemonSetRequests is what the daemonsets that
	// will run on the node (its cheapest option) request.
	PodRequests       catalog.Resources
	DaemonSetRequests catalog.Resources
	// MinValuesRelaxed: a minValues of the pool was lowered to what the NodeClaim's options
	// offer (Options.MinValuesBestEffort).
	MinValuesRelaxed bool
}

// InstanceTypeOption is one instance type a NodeClaim may launch as.
type InstanceTypeOption struct {
	Type *catalog.InstanceType
	// PricePerHour is the cheapest compatible, available offering.
	PricePerHour float64
	// Offerings are the compatible available offerings, cheapest first.
	Offerings []catalog.Offering
}

// Unschedulable is a pod that could not be placed.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// Cheapest returns the NodeClaim's cheapest instance type and offering.
func (nc *NodeClaim) Cheapest() (*catalog.InstanceType, catalog.Offering) {
	if len(nc.InstanceTypes) == 0 || len(nc.InstanceTypes[0].Offerings) == 0 {
		return nil, catalog.Offering{}
	}
	return nc.InstanceTypes[0].Type, nc.InstanceTypes[0].Offerings[0]
}

// PricePerHour is the price of the NodeClaim's cheapest option.
func (nc *NodeClaim) PricePerHour() float64 {
	if len(nc.InstanceTypes) == 0 {
		return 0
	}
	return nc.InstanceTypes[0].PricePerHour
}

// TotalPricePerHour sums the cheapest option of every new NodeClaim.
func (r *Result) TotalPricePerHour() float64 {
	total := 0.0
	for i := range r.NodeClaims {
		total += r.NodeClaims[i].PricePerHour()
	}
	return total
}

// Placements are the bindings onto existing nodes and in-flight NodeClaims.
func (r *Result) Placements() []Binding {
	var out []Binding
	for _, b := range r.Bindings {
		if b.NodeClaim < 0 {
			out = append(out, b)
		}
	}
	return out
}
