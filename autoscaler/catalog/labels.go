package catalog

import (
	"strconv"
	"strings"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Upstream well-known node label keys (k8s.io/api/core/v1 spells the same strings).
const (
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelArch         = "kubernetes.io/arch"
	LabelOS           = "kubernetes.io/os"
	LabelRegion       = "topology.kubernetes.io/region"
	LabelZone         = "topology.kubernetes.io/zone"
	// LabelWindowsBuild is the Windows build of a Windows node.
	LabelWindowsBuild = "node.kubernetes.io/windows-build"
	// LabelCapacityType is karpenter.sh/capacity-type (spot, on-demand, reserved).
	LabelCapacityType = "karpenter.sh/capacity-type"
	// LabelCapacityReservationID names the capacity reservation of a reserved node.
	LabelCapacityReservationID = "karpenter.k8s.aws/capacity-reservation-id"
)

// TenancyDefault is the only instance tenancy the catalog offers (shared hardware).
const TenancyDefault = "default"

// specLabels builds the well-known labels of a type, the way Karpenter derives them from
// DescribeInstanceTypes: keys whose value is unknown are left out (Karpenter's DoesNotExist),
// except the hypervisor, which is "" on bare metal as in Karpenter.
func specLabels(s *Spec, region string) map[string]string {
	l := make(map[string]string, 24)
	l[LabelInstanceType] = s.Name
	l[LabelArch] = s.Arch
	l[LabelOS] = "linux"
	l[LabelRegion] = region
	l[awsv1.LabelInstanceCategory] = s.Category
	l[awsv1.LabelInstanceFamily] = s.Family
	l[awsv1.LabelInstanceGeneration] = strconv.Itoa(s.Generation)
	l[awsv1.LabelInstanceSize] = s.Size
	l[awsv1.LabelInstanceCPU] = strconv.FormatInt(s.VCPU, 10)
	l[awsv1.LabelInstanceMemory] = strconv.FormatInt(s.MemoryMiB, 10)
	l[awsv1.LabelInstanceHypervisor] = s.Hypervisor
	l[awsv1.LabelInstanceTenancy] = TenancyDefault
	flex := s.CapabilityFlex
	if flex == "" {
		flex = strconv.FormatBool(strings.Contains(s.Family, "-flex"))
	}
	l[awsv1.LabelInstanceCapabilityFlex] = flex
	setIf := func(key, v string) {
		if v != "" {
			l[key] = v
		}
	}
	setIfPositive := func(key string, v int64) {
		if v > 0 {
			l[key] = strconv.FormatInt(v, 10)
		}
	}
	setIf(awsv1.LabelInstanceEncryptionInTransitSupported, s.EncryptionInTransitSupported)
	if s.CPUManufacturer != "" {
		// Known processor: Karpenter labels both, the clock speed even when EC2 reports 0.
		l[awsv1.LabelInstanceCPUManufacturer] = s.CPUManufacturer
		l[awsv1.LabelInstanceCPUSustainedClockSpeedMhz] = strconv.FormatInt(s.CPUSustainedClockSpeedMhz, 10)
	}
	setIfPositive(awsv1.LabelInstanceEBSBandwidth, s.EBSBandwidthMbps)
	setIfPositive(awsv1.LabelInstanceNetworkBandwidth, s.NetworkBandwidthMbps)
	setIfPositive(awsv1.LabelInstanceLocalNVME, s.LocalNVMeGB)
	if s.GPUName != "" {
		// Fractional-GPU types (g6f) carry the name and memory with a count of 0, like Karpenter.
		l[awsv1.LabelInstanceGPUName] = s.GPUName
		setIf(awsv1.LabelInstanceGPUManufacturer, s.GPUManufacturer)
		l[awsv1.LabelInstanceGPUCount] = strconv.FormatInt(s.GPUs, 10)
		l[awsv1.LabelInstanceGPUMemory] = strconv.FormatInt(s.GPUMemoryMiB, 10)
	}
	if s.AcceleratorName != "" {
		l[awsv1.LabelInstanceAcceleratorName] = s.AcceleratorName
		setIf(awsv1.LabelInstanceAcceleratorManufacturer, s.AcceleratorManufacturer)
		l[awsv1.LabelInstanceAcceleratorCount] = strconv.FormatInt(s.Accelerators, 10)
	}
	return l
}

// osLabels are a type's labels for a node of the family: the shared Linux labels, or a copy
// saying windows with the family's build (node.kubernetes.io/windows-build).
func osLabels(linux map[string]string, family string) map[string]string {
	build, windows := WindowsBuild(family)
	if !windows {
		return linux
	}
	l := make(map[string]string, len(linux)+1)
	for k, v := range linux {
		l[k] = v
	}
	l[LabelOS] = "windows"
	l[LabelWindowsBuild] = build
	return l
}
