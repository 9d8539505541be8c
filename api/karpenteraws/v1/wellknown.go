package v1

// Node label keys in the karpenter.k8s.aws domain. NodePool and NodeClaim requirements may only
// use keys of this domain that appear in WellKnownLabels.
const (
	// LabelNodeClass holds the name of the EC2NodeClass a node was launched from.
	LabelNodeClass = "karpenter.k8s.aws/ec2nodeclass"

	LabelInstanceHypervisor                   = "karpenter.k8s.aws/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
	LabelInstanceCategory                     = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily                       = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration                   = "karpenter.k8s.aws/instance-generation"
	LabelInstanceLocalNVME                    = "karpenter.k8s.aws/instance-local-nvme"
	LabelInstanceSize                         = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU                          = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceCPUManufacturer              = "karpenter.k8s.aws/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz    = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                       = "karpenter.k8s.aws/instance-memory"
	LabelInstanceEBSBandwidth                 = "karpenter.k8s.aws/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = "karpenter.k8s.aws/instance-network-bandwidth"
	LabelInstanceGPUName                      = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUManufacturer              = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUMemory                    = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAcceleratorName              = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = "karpenter.k8s.aws/instance-accelerator-count"
	LabelInstanceCapabilityFlex               = "karpenter.k8s.aws/instance-capability-flex"
	LabelInstanceTenancy                      = "karpenter.k8s.aws/instance-tenancy"

	LabelCapacityReservationID            = "karpenter.k8s.aws/capacity-reservation-id"
	LabelCapacityReservationType          = "karpenter.k8s.aws/capacity-reservation-type"
	LabelCapacityReservationInterruptible = "karpenter.k8s.aws/capacity-reservation-interruptible"

	LabelPlacementGroupID        = "karpenter.k8s.aws/placement-group-id"
	LabelPlacementGroupPartition = "karpenter.k8s.aws/placement-group-partition"

	// LabelTopologyZoneID is the zone's ID (use1-az1), the same in every account.
	LabelTopologyZoneID = "topology.k8s.aws/zone-id"
)

// ReservationLabels are the labels of a node in a capacity reservation; it loses them when the
// reservation ends.
var ReservationLabels = []string{LabelCapacityReservationID, LabelCapacityReservationType, LabelCapacityReservationInterruptible}

// WellKnownLabels are the karpenter.k8s.aws label keys that the upstream NodePool and NodeClaim
// CRDs accept in requirements (the same list their CEL rules spell out).
var WellKnownLabels = []string{
	LabelInstanceTenancy,
	LabelCapacityReservationType,
	LabelCapacityReservationID,
	LabelCapacityReservationInterruptible,
	LabelNodeClass,
	LabelInstanceEncryptionInTransitSupported,
	LabelInstanceCategory,
	LabelInstanceHypervisor,
	LabelInstanceFamily,
	LabelInstanceGeneration,
	LabelInstanceLocalNVME,
	LabelInstanceSize,
	LabelInstanceCPU,
	LabelInstanceCPUManufacturer,
	LabelInstanceCPUSustainedClockSpeedMhz,
	LabelInstanceMemory,
	LabelInstanceEBSBandwidth,
	LabelInstanceNetworkBandwidth,
	LabelInstanceGPUName,
	LabelInstanceGPUManufacturer,
	LabelInstanceGPUCount,
	LabelInstanceGPUMemory,
	LabelInstanceAcceleratorName,
	LabelInstanceAcceleratorManufacturer,
	LabelInstanceAcceleratorCount,
	LabelInstanceCapabilityFlex,
	LabelPlacementGroupID,
	LabelPlacementGroupPartition,
}

// Values of spec.amiFamily.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
	AMIFamilyCustom       = "Custom"
)

// Families accepted before the "@" of an amiSelectorTerms alias ("family@version").
const (
	AliasFamilyAL2          = "al2"
	AliasFamilyAL2023       = "al2023"
	AliasFamilyBottlerocket = "bottlerocket"
	AliasFamilyWindows2019  = "windows2019"
	AliasFamilyWindows2022  = "windows2022"
	AliasFamilyWindows2025  = "windows2025"

	// AliasVersionLatest follows the newest release of the family (the only version Windows accepts).
	AliasVersionLatest = "latest"
)

// Condition types set in status.conditions. Ready summarises the others and is what the
// "Ready" printer column shows.
const (
	ConditionTypeReady                     = "Ready"
	ConditionTypeSubnetsReady              = "SubnetsReady"
	ConditionTypeSecurityGroupsReady       = "SecurityGroupsReady"
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	ConditionTypeAMIsReady                 = "AMIsReady"
	ConditionTypeInstanceProfileReady      = "InstanceProfileReady"
	ConditionTypeValidationSucceeded       = "ValidationSucceeded"
)
