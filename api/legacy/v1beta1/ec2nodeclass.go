package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EC2NodeClass is a karpenter.k8s.aws/v1beta1 EC2NodeClass: the AWS launch settings (AMI,
// subnets, security groups, IAM identity, disks, user data) that NodePools point at.
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EC2NodeClassSpec `json:"spec"`

	// Status is accepted so that dumps of live objects decode, but it is not interpreted.
	Status *runtime.RawExtension `json:"status,omitempty"`
}

// AMIFamily values known to v1beta1. In v1beta1 amiFamily is required; v1 instead derives the
// family from an amiSelectorTerms alias where it can.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyUbuntu       = "Ubuntu"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
)

// EC2NodeClassSpec is the desired state of a v1beta1 EC2NodeClass.
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms pick the subnets nodes may be launched into; terms are ORed.
	// Required, at least one term.
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`

	// SecurityGroupSelectorTerms pick the security groups attached to nodes; terms are ORed.
	// Required, at least one term.
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`

	// AssociatePublicIPAddress overrides the subnet's public-IP-on-launch behaviour.
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`

	// AMISelectorTerms pick the AMIs; when empty, the latest EKS-optimised AMI of AMIFamily is
	// used. Required when AMIFamily is Custom. There is no alias field in v1beta1.
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms,omitempty"`

	// AMIFamily decides the bootstrap mechanism and default AMI and block devices: one of the
	// AMIFamily* constants. Required by the v1beta1 schema.
	AMIFamily *string `json:"amiFamily,omitempty"`

	// UserData is merged with (or, for Custom, replaces) the user data Karpenter generates.
	// Its expected format depends on AMIFamily (shell/MIME for AL2, NodeConfig/MIME for AL2023,
	// TOML for Bottlerocket, PowerShell for Windows).
	UserData *string `json:"userData,omitempty"`

	// Role is the IAM role name Karpenter builds an instance profile for. Exactly one of Role
	// and InstanceProfile must be set; Role could not be changed after creation.
	Role *string `json:"role,omitempty"`

	// InstanceProfile is an existing instance profile to use instead of Role.
	InstanceProfile *string `json:"instanceProfile,omitempty"`

	// Tags are added to the instances, volumes and launch templates Karpenter creates. Some
	// keys (kubernetes.io/cluster/*, karpenter.sh/nodepool, ...) are reserved.
	Tags map[string]string `json:"tags,omitempty"`

	// MetadataOptions configures the instance metadata service. When unset, v1beta1 applied
	// httpEndpoint enabled, httpProtocolIPv6 disabled, hop limit 2 and httpTokens required.
	// v1 defaults the hop limit to 1, so a migrated class must spell the block out to keep the
	// old behaviour.
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// BlockDeviceMappings replaces the AMI family's default volumes.
	BlockDeviceMappings []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`

	// InstanceStorePolicy says how local NVMe instance stores are used; "RAID0" stripes them
	// and uses the array for kubelet and container storage.
	InstanceStorePolicy *string `json:"instanceStorePolicy,omitempty"`

	// DetailedMonitoring turns on one-minute CloudWatch metrics for the instances.
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`

	// Context is handed through unchanged as the Context parameter of the EC2 CreateFleet
	// calls, a field EC2 reserves for special arrangements with AWS.
	Context *string `json:"context,omitempty"`
}

// SubnetSelectorTerm matches subnets by tags or by ID; ID may not be combined with tags.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   *string           `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm matches security groups by tags, ID or name; ID and name each
// have to stand alone in their term.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   *string           `json:"id,omitempty"`
	Name *string           `json:"name,omitempty"`
}

// AMISelectorTerm matches AMIs by tags, ID, or name (optionally narrowed by owner). An ID term
// may not carry other fields.
type AMISelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   *string           `json:"id,omitempty"`
	Name *string           `json:"name,omitempty"`
	// Owner is an account ID or alias such as "self" or "amazon"; it narrows a name or tags
	// match.
	Owner *string `json:"owner,omitempty"`
}

// MetadataOptions mirrors the EC2 instance metadata options.
type MetadataOptions struct {
	// HTTPEndpoint is "enabled" or "disabled".
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// HTTPProtocolIPv6 is "enabled" or "disabled".
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit is the PUT response hop limit, 1 to 64.
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HTTPTokens is "required" (IMDSv2 only) or "optional".
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping attaches one EBS volume at a device name.
type BlockDeviceMapping struct {
	// DeviceName is the device path, for example /dev/xvda.
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the volume.
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume marks the mapping that holds the OS; at most one may be marked.
	RootVolume *bool `json:"rootVolume,omitempty"`
}

// BlockDevice describes an EBS volume. Either SnapshotID or VolumeSize must be given.
type BlockDevice struct {
	// DeleteOnTermination deletes the volume together with the instance.
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// Encrypted encrypts the volume.
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS is the provisioned IOPS, for io1/io2/gp3.
	IOPS *int64 `json:"iops,omitempty"`
	// KMSKeyID is the KMS key used when Encrypted is true.
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// SnapshotID creates the volume from this snapshot.
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput in MiB/s, for gp3.
	Throughput *int64 `json:"throughput,omitempty"`
	// VolumeSize is a quantity such as "20Gi"; the v1beta1 schema only accepted G/Gi/T/Ti units
	// written as strings.
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// VolumeType is one of standard, io1, io2, gp2, sc1, st1, gp3.
	VolumeType *string `json:"volumeType,omitempty"`
}
