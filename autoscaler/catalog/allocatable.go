package catalog

import (
	"math"
)

// Byte sizes.
const (
	Mi = int64(1) << 20
	Gi = int64(1) << 30
)

// Karpenter's AL2023 allocatable arithmetic, reproduced exactly (pkg/providers/instancetype in
// aws/karpenter-provider-aws):
//
//	capacity.cpu     = vCPU × 1000m
//	capacity.memory  = M − ceil(M × 7.5 %), M = memory MiB − 64 MiB on arm64 (Graviton CMA)
//	capacity.pods    = kubelet maxPods if set, else ENIs × (IPv4 per ENI − 1) + 2 (110 without ENI
//	                   density), then min(podsPerCore × vCPU, pods) when podsPerCore > 0
//	capacity.ephemeral-storage = the root volume (default 20Gi), or the local NVMe total under
//	                   instanceStorePolicy RAID0
//	kube-reserved    = cpu 6 % of the first core, 1 % of the second, 0.5 % of cores 3–4, 0.25 % of
//	                   the rest; memory 11Mi × pods + 255Mi, where pods is the ENI-limited pod count
//	                   on AL2/AL2023 (not kubelet maxPods) and capacity.pods on Bottlerocket;
//	                   ephemeral-storage 1Gi; each replaced by kubelet kubeReserved when set
//	system-reserved  = kubelet systemReserved (none by default)
//	eviction         = memory 100Mi, ephemeral-storage ceil(10 % of the volume); each replaced by
//	                   kubelet evictionHard memory.available / nodefs.available (a quantity, or a
//	                   percentage of capacity). evictionSoft does not change allocatable.
//	allocatable      = capacity − kube-reserved − system-reserved − eviction, never below zero
//
// With the defaults (20Gi root volume): ephemeral-storage = 20Gi − 1Gi − 2Gi = 17Gi; in general
// size − 1Gi − ceil(size / 10).
const (
	// DefaultRootVolumeSize is the AL2023 (and AL2, Bottlerocket data volume) default: 20Gi.
	DefaultRootVolumeSize = 20 * Gi
	// VMMemoryOverheadPercent is Karpenter's default --vm-memory-overhead-percent.
	VMMemoryOverheadPercent = 0.075
	defaultKubeReservedDisk = 1 * Gi
	defaultEvictionMemory   = 100 * Mi
	defaultEvictionDiskPct  = 10.0
	defaultPodsNoENIDensity = 110
	kubeReservedMiBPerPod   = 11
	kubeReservedMiBBase     = 255
	armCMAReservedMiB       = 64
)

// AMI family names accepted in NodeClassOptions.AMIFamily (the values of spec.amiFamily).
const (
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyAL2          = "AL2"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
)

// windowsBuilds are the node.kubernetes.io/windows-build values of the Windows families.
var windowsBuilds = map[string]string{
	AMIFamilyWindows2019: "10.0.17763",
	AMIFamilyWindows2022: "10.0.20348",
	AMIFamilyWindows2025: "10.0.26100",
}

// WindowsBuild is the Windows build of a family ("10.0.20348" for Windows2022); false for the
// Linux families.
func WindowsBuild(family string) (string, bool) {
	b, ok := windowsBuilds[family]
	return b, ok
}

// windowsRootVolumeSize is the Windows families' default root volume (/dev/sda1).
const windowsRootVolumeSize = 50 * Gi

// Kubelet holds the EC2NodeClass kubelet settings that change a node's capacity or allocatable.
// Quantities are in base units (millicores, bytes). KubeletFromAPI builds one from the API type.
type Kubelet struct {
	// MaxPods replaces the ENI-limited pod count.
	MaxPods *int32
	// PodsPerCore caps pods at PodsPerCore × vCPU when > 0 (not on Bottlerocket).
	PodsPerCore *int32
	// KubeReserved replaces the computed kube-reserved cpu, memory or ephemeral-storage.
	KubeReserved Reserved
	// SystemReserved adds system-reserved cpu, memory or ephemeral-storage.
	SystemReserved Reserved
	// EvictionHard replaces the default hard eviction thresholds.
	EvictionHard Eviction
}

// Reserved is a kubelet reservation; a nil field is not set.
type Reserved struct {
	CPU              *int64 // millicores
	Memory           *int64 // bytes
	EphemeralStorage *int64 // bytes
}

// Eviction holds the kubelet hard-eviction thresholds that reduce allocatable; nil = not set.
type Eviction struct {
	MemoryAvailable *Threshold // memory.available
	NodeFSAvailable *Threshold // nodefs.available
}

// Threshold is an eviction threshold: an absolute quantity in bytes, or a percentage of capacity.
type Threshold struct {
	Bytes     int64
	Percent   float64
	IsPercent bool
}

// NodeClassOptions are the EC2NodeClass settings that shape the instance types a NodeClass
// offers. The zero value is an AL2023 NodeClass with default kubelet settings, a 20Gi root volume
// and all of the region's zones. NodeClassOptionsFor builds one from an EC2NodeClass spec.
type NodeClassOptions struct {
	// AMIFamily is AL2023 (default when empty), AL2, Bottlerocket or Custom. It decides whether
	// podsPerCore applies and which pod count sizes the kube-reserved memory.
	AMIFamily string
	Kubelet   Kubelet
	// RootVolumeSize is the size in bytes of the volume that holds the kubelet root directory:
	// the node's ephemeral-storage capacity. 0 means DefaultRootVolumeSize.
	RootVolumeSize int64
	// InstanceStoreRAID0 puts ephemeral storage on the local NVMe disks (instanceStorePolicy
	// RAID0) for types that have them; their total size replaces the root volume.
	InstanceStoreRAID0 bool
	// Zones restricts offerings to these zones (the zones of the NodeClass's subnets). Empty means
	// every zone of the region.
	Zones []string
	// ReservedENIs is Karpenter's --reserved-enis setting: ENIs kept out of the pod count.
	ReservedENIs int
	// VMMemoryOverheadPercent is Karpenter's --vm-memory-overhead-percent setting, the share of
	// memory the hypervisor keeps; nil is its default (VMMemoryOverheadPercent).
	VMMemoryOverheadPercent *float64
	// Volumes are the EBS volumes of every node; their price is part of every offering's.
	// NodeClassOptionsFor sets them (the family's defaults when the class has no mappings).
	Volumes []Volume
	// Interfaces are the class's spec.networkInterfaces, counted (nil when it lists none).
	Interfaces *Interfaces
	// ConnectionTracking is set when the class sets connection-tracking timeouts, which only
	// Nitro instances take.
	ConnectionTracking bool
}

// Interfaces counts the network interfaces a class launches with, as Karpenter reads them: the
// node offers one vpc.amazonaws.com/efa per EFA-only interface (instead of the type's EFA
// maximum), and the EFA-only interfaces on the default network card carry no pod IPs, so the
// VPC CNI's pod limit counts them like reserved ENIs.
type Interfaces struct {
	EFAOnly, EFAOnlyOnCard0 int
}

type familyFlags struct {
	usesENILimitedMemoryOverhead bool
	podsPerCoreEnabled           bool
	supportsENILimitedPodDensity bool
}

func flagsFor(family string) familyFlags {
	switch family {
	case AMIFamilyBottlerocket:
		return familyFlags{podsPerCoreEnabled: false, supportsENILimitedPodDensity: true}
	case AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025:
		// 110 pods unless maxPods says otherwise, and kube-reserved memory sized by them.
		return familyFlags{podsPerCoreEnabled: true}
	default: // AL2023, AL2, Custom
		return familyFlags{usesENILimitedMemoryOverhead: true, podsPerCoreEnabled: true, supportsENILimitedPodDensity: true}
	}
}

// eniLimitedPods is the VPC CNI pod limit: usable ENIs × (IPv4 per ENI − 1) + 2.
func eniLimitedPods(s *Spec, reservedENIs int) int64 {
	usable := s.MaxENIs - int64(reservedENIs)
	if usable <= 0 {
		return 0
	}
	return usable*(s.IPv4PerENI-1) + 2
}

func podCount(s *Spec, flags familyFlags, k *Kubelet, reservedENIs int) int64 {
	var count int64
	switch {
	case k.MaxPods != nil:
		count = int64(*k.MaxPods)
	case flags.supportsENILimitedPodDensity:
		count = eniLimitedPods(s, reservedENIs)
	default:
		count = defaultPodsNoENIDensity
	}
	if k.PodsPerCore != nil && *k.PodsPerCore > 0 && flags.podsPerCoreEnabled {
		count = min(int64(*k.PodsPerCore)*s.VCPU, count)
	}
	return count
}

// memoryCapacity is Karpenter's estimate of the memory the kubelet reports: the instance memory
// less the Graviton CMA reservation and the VM overhead. Same floating-point steps as Karpenter.
func memoryCapacity(s *Spec, o *NodeClassOptions) int64 {
	overhead := VMMemoryOverheadPercent
	if o.VMMemoryOverheadPercent != nil {
		overhead = *o.VMMemoryOverheadPercent
	}
	mib := s.MemoryMiB
	if s.Arch == "arm64" {
		mib -= armCMAReservedMiB
	}
	bytes := mib * Mi
	overheadMiB := int64(math.Ceil(float64(bytes) * overhead / 1024 / 1024))
	return bytes - overheadMiB*Mi
}

// kubeReservedCPU is the tiered kube-reserved cpu in millicores (tiers truncated like Karpenter).
func kubeReservedCPU(milli int64) int64 {
	var reserved int64
	for _, tier := range [...]struct {
		start, end int64
		percentage float64
	}{
		{0, 1000, 0.06},
		{1000, 2000, 0.01},
		{2000, 4000, 0.005},
		{4000, 1 << 31, 0.0025},
	} {
		if milli >= tier.start {
			r := float64(tier.end - tier.start)
			if milli < tier.end {
				r = float64(milli - tier.start)
			}
			reserved += int64(r * tier.percentage)
		}
	}
	return reserved
}

func evictionBytes(t *Threshold, capacity int64) int64 {
	if !t.IsPercent {
		return t.Bytes
	}
	p := t.Percent
	if p == 100 { // 100% disables the threshold (kubelet semantics, as Karpenter reads them)
		p = 0
	}
	return int64(math.Ceil(float64(capacity) / 100 * p))
}

// ephemeralStorage is the capacity of the node's ephemeral storage under the options.
func ephemeralStorage(s *Spec, o *NodeClassOptions) int64 {
	if o.InstanceStoreRAID0 && s.LocalNVMeGB > 0 {
		return s.LocalNVMeGB * 1_000_000_000
	}
	if o.RootVolumeSize > 0 {
		return o.RootVolumeSize
	}
	if _, windows := WindowsBuild(o.AMIFamily); windows {
		return windowsRootVolumeSize
	}
	return DefaultRootVolumeSize
}

// resources computes capacity and allocatable of a spec under the options.
func resources(s *Spec, o *NodeClassOptions) (capacity, allocatable Resources) {
	flags := flagsFor(o.AMIFamily)
	k := &o.Kubelet

	capacity[CPU] = s.VCPU * 1000
	capacity[Memory] = memoryCapacity(s, o)
	capacity[EphemeralStorage] = ephemeralStorage(s, o)
	capacity[PodENI] = s.PodENI
	capacity[EFA] = s.EFA
	unusableENIs := o.ReservedENIs
	if o.Interfaces != nil {
		capacity[EFA] = int64(o.Interfaces.EFAOnly)
		unusableENIs += o.Interfaces.EFAOnlyOnCard0
	}
	capacity[Pods] = podCount(s, flags, k, unusableENIs)
	if _, windows := WindowsBuild(o.AMIFamily); windows {
		// The VPC resource controller hands Windows pods secondary IPv4 addresses of the
		// primary interface, as Karpenter counts them.
		capacity[PrivateIPv4] = max(s.IPv4PerENI-1, 0)
	}
	switch s.GPUManufacturer {
	case "nvidia":
		capacity[NvidiaGPU] = s.GPUs
	case "amd":
		capacity[AMDGPU] = s.GPUs
	case "habana":
		capacity[HabanaGaudi] = s.GPUs
	}
	if s.AcceleratorManufacturer == "aws" {
		capacity[Neuron] = s.Accelerators
		capacity[NeuronCore] = s.NeuronCores
	}

	// kube-reserved
	var overhead Resources
	reservedPods := capacity[Pods]
	if flags.usesENILimitedMemoryOverhead {
		reservedPods = eniLimitedPods(s, 0)
	}
	overhead[CPU] = kubeReservedCPU(capacity[CPU])
	overhead[Memory] = (kubeReservedMiBPerPod*reservedPods + kubeReservedMiBBase) * Mi
	overhead[EphemeralStorage] = defaultKubeReservedDisk
	if v := k.KubeReserved.CPU; v != nil {
		overhead[CPU] = *v
	}
	if v := k.KubeReserved.Memory; v != nil {
		overhead[Memory] = *v
	}
	if v := k.KubeReserved.EphemeralStorage; v != nil {
		overhead[EphemeralStorage] = *v
	}
	// system-reserved
	if v := k.SystemReserved.CPU; v != nil {
		overhead[CPU] += *v
	}
	if v := k.SystemReserved.Memory; v != nil {
		overhead[Memory] += *v
	}
	if v := k.SystemReserved.EphemeralStorage; v != nil {
		overhead[EphemeralStorage] += *v
	}
	// eviction thresholds
	evictMem := defaultEvictionMemory
	if t := k.EvictionHard.MemoryAvailable; t != nil {
		evictMem = evictionBytes(t, capacity[Memory])
	}
	evictDisk := int64(math.Ceil(float64(capacity[EphemeralStorage]) / 100 * defaultEvictionDiskPct))
	if t := k.EvictionHard.NodeFSAvailable; t != nil {
		evictDisk = evictionBytes(t, capacity[EphemeralStorage])
	}
	overhead[Memory] += evictMem
	overhead[EphemeralStorage] += evictDisk

	for r := range allocatable {
		allocatable[r] = max(capacity[r]-overhead[r], 0)
	}
	return capacity, allocatable
}
