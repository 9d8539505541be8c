// Package catalog knows the EC2 instance types a NodePool can launch: their hardware, the
// allocatable resources a node of each type offers to pods (the same arithmetic Karpenter uses
// for AL2023), their well-known labels, and their offerings (zone × capacity type) with prices.
//
// It is pure data and arithmetic: no AWS calls and no clocks. The AWS cloud provider refreshes
// prices and offerings from the APIs and falls back to the catalog embedded here.
package catalog

// Resource indexes a Resources vector. A fixed vector (instead of a map keyed by resource name)
// keeps fit checks in the scheduling engine to a handful of integer comparisons.
type Resource int

// The resources karpool schedules on. Quantities are in base units: millicores for cpu, bytes
// for memory and ephemeral-storage, counts for the rest.
const (
	CPU Resource = iota
	Memory
	EphemeralStorage
	Pods
	NvidiaGPU // nvidia.com/gpu
	AMDGPU    // amd.com/gpu
	Neuron    // aws.amazon.com/neuron
	NeuronCore
	HabanaGaudi // habana.ai/gaudi
	PodENI      // vpc.amazonaws.com/pod-eni
	EFA         // vpc.amazonaws.com/efa
	PrivateIPv4 // vpc.amazonaws.com/PrivateIPv4Address (Windows nodes)
	NumResources
)

// ResourceNames are the Kubernetes names of the resources, by index.
var ResourceNames = [NumResources]string{
	CPU:              "cpu",
	Memory:           "memory",
	EphemeralStorage: "ephemeral-storage",
	Pods:             "pods",
	NvidiaGPU:        "nvidia.com/gpu",
	AMDGPU:           "amd.com/gpu",
	Neuron:           "aws.amazon.com/neuron",
	NeuronCore:       "aws.amazon.com/neuroncore",
	HabanaGaudi:      "habana.ai/gaudi",
	PodENI:           "vpc.amazonaws.com/pod-eni",
	EFA:              "vpc.amazonaws.com/efa",
	PrivateIPv4:      "vpc.amazonaws.com/PrivateIPv4Address",
}

// Resources is a quantity of each resource.
type Resources [NumResources]int64

// Capacity type values, as in the karpenter.sh/capacity-type label.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// Offering is one way to buy an instance type: a zone and a capacity type, at a price.
type Offering struct {
	Zone         string
	CapacityType string
	// PricePerHour in USD is what a node bought this way costs: the instance's price plus its
	// EBS volumes (VolumesPerHour). Per-node costs make few large nodes cheaper than many small
	// ones of the same total size, as they are.
	PricePerHour float64
	// VolumesPerHour is the part of PricePerHour paid for the node's EBS volumes.
	VolumesPerHour float64
	// Available is false while the offering is known to lack capacity (insufficient capacity
	// errors) or is not offered in the zone.
	Available bool
	// Estimated is true when PricePerHour is an estimate rather than a current list price: every
	// spot price of the embedded catalog (a 2025-04 average) and the on-demand prices of types
	// whose regional price was extrapolated. Cost reports should say so.
	Estimated bool
	// The reservation fields are set on offerings of capacity type "reserved" only: the
	// capacity reservation a node would launch into, its type ("default" or
	// "capacity-block"), and how many more instances it can take (a node planned onto it
	// takes one).
	ReservationID       string
	ReservationType     string
	ReservationCapacity int
}

// InstanceType is one EC2 instance type as a node of a given NodePool would see it.
type InstanceType struct {
	Name string
	// Labels are the well-known labels a node of this type carries: node.kubernetes.io/instance-type,
	// kubernetes.io/arch, kubernetes.io/os, karpenter.k8s.aws/instance-* (category, family,
	// generation, size, cpu, memory, hypervisor, gpu-*, ...) and topology.kubernetes.io/region.
	// Zone, capacity type and pool labels come from the offering and the NodePool, not from here.
	// The map may be shared between calls: do not modify it.
	Labels map[string]string
	// Capacity is what the node reports as capacity, as Karpenter estimates it: vCPU, memory
	// less the VM overhead (7.5 %) and, on arm64, the 64Mi CMA reservation, max pods, the
	// ephemeral-storage volume, and devices. Pool limits count this.
	Capacity Resources
	// Allocatable is Capacity minus kube-reserved, system-reserved and eviction thresholds: what
	// pods may request on a node of this type.
	Allocatable Resources
	// Offerings lists zone × capacity type with prices, sorted by price then zone.
	Offerings []Offering
}

// PriceOf is the hourly price of a node or NodeClaim with these labels (instance type, zone and
// capacity type) among the instance types its pool may launch; false when the offering is not
// among them.
func PriceOf(its []InstanceType, labels map[string]string) (float64, bool) {
	o, ok := OfferingOf(its, labels)
	return o.PricePerHour, ok
}

// OfferingOf finds the offering a node with these labels was bought as (instance type, zone,
// capacity type and reservation labels). A reserved node whose reservation the instance types
// do not list (views without the cluster's reservations) is priced from the on-demand offering
// of its zone, as ReservedPrice prices it.
func OfferingOf(its []InstanceType, labels map[string]string) (Offering, bool) {
	name, zone, ct, rid := labels[LabelInstanceType], labels[LabelZone], labels[LabelCapacityType], labels[LabelCapacityReservationID]
	for i := range its {
		if its[i].Name != name {
			continue
		}
		for _, o := range its[i].Offerings {
			if o.Zone == zone && o.CapacityType == ct && o.ReservationID == rid {
				return o, true
			}
		}
		if ct != CapacityTypeReserved {
			continue
		}
		for _, o := range its[i].Offerings {
			if o.Zone == zone && o.CapacityType == CapacityTypeOnDemand {
				return Offering{Zone: zone, CapacityType: ct, ReservationID: rid, PricePerHour: ReservedPrice(o),
					VolumesPerHour: o.VolumesPerHour, Estimated: o.Estimated}, true
			}
		}
	}
	return Offering{}, false
}

// ReservedPriceDivisor makes a reserved node cost its type's on-demand price divided by ten
// million, as Karpenter prices it: free next to anything else (the reservation is paid for
// whether used or not), while a larger type still costs more than a smaller one, so
// consolidation keeps its order among reserved nodes.
const ReservedPriceDivisor = 10_000_000.0

// ReservedPrice is what a node in a capacity reservation costs, given its on-demand offering
// in the same zone: the instance as ReservedPriceDivisor says, and its EBS volumes in full.
func ReservedPrice(onDemand Offering) float64 {
	return (onDemand.PricePerHour-onDemand.VolumesPerHour)/ReservedPriceDivisor + onDemand.VolumesPerHour
}
