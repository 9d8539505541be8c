package v1alpha5

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AWSNodeTemplate is a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate, the predecessor of
// EC2NodeClass, referenced from a Provisioner's providerRef.
type AWSNodeTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AWSNodeTemplateSpec `json:"spec,omitempty"`

	// Status is accepted so that dumps of live objects decode, but it is not interpreted.
	Status *runtime.RawExtension `json:"status,omitempty"`
}

// AWSNodeTemplateSpec is the inline AWS provider settings plus the fields that only the
// template form supported.
type AWSNodeTemplateSpec struct {
	AWS `json:",inline"`

	// UserData is merged with the user data Karpenter generates for the AMI family
	// (MIME multi-part shell for AL2, TOML for Bottlerocket).
	UserData *string `json:"userData,omitempty"`

	// AMISelector picks AMIs by EC2 tag. Later v1alpha1 releases also understood reserved keys
	// ("aws::ids", "aws::name", "aws::owners", and earlier "aws-ids") that select by ID, name
	// or owner; the migrator must map those to the matching AMI selector term fields.
	AMISelector map[string]string `json:"amiSelector,omitempty"`

	// DetailedMonitoring turns on one-minute CloudWatch metrics for the instances.
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
}

// AWS is the v1alpha5-era AWS provider configuration: the body of a Provisioner's inline
// provider block, and the common part of an AWSNodeTemplate spec.
//
// The apiVersion/kind pair is optional and, when present, is usually
// extensions.karpenter.sh/v1alpha1 and AWS.
type AWS struct {
	metav1.TypeMeta `json:",inline"`

	// AMIFamily selects bootstrap mechanism and default AMI: AL2, Bottlerocket, Ubuntu, Custom,
	// Windows2019 or Windows2022. Unset meant AL2.
	AMIFamily *string `json:"amiFamily,omitempty"`

	// Context is handed through as the Context parameter of EC2 CreateFleet calls, a field EC2
	// reserves for special arrangements with AWS.
	Context *string `json:"context,omitempty"`

	// InstanceProfile is the instance profile for nodes; unset meant the controller-wide
	// default (settings aws.defaultInstanceProfile).
	InstanceProfile *string `json:"instanceProfile,omitempty"`

	// SubnetSelector picks subnets by EC2 tag (all pairs must match). Some releases also
	// understood reserved keys that select by ID rather than tag (for example "aws-ids" with a
	// comma-separated list); the migrator must turn those into ID terms, not tag terms.
	SubnetSelector map[string]string `json:"subnetSelector,omitempty"`

	// SecurityGroupSelector picks security groups by EC2 tag, with the same reserved-key
	// caveat as SubnetSelector.
	SecurityGroupSelector map[string]string `json:"securityGroupSelector,omitempty"`

	// Tags are added to the instances, volumes and launch templates Karpenter creates.
	Tags map[string]string `json:"tags,omitempty"`

	// LaunchTemplateName names a user-managed EC2 launch template to use instead of the one
	// Karpenter would generate. v1beta1 and v1 have no equivalent; migration must expand it.
	LaunchTemplateName *string `json:"launchTemplate,omitempty"`

	// MetadataOptions configures the instance metadata service.
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// BlockDeviceMappings replaces the AMI family's default volumes.
	BlockDeviceMappings []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
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
}

// BlockDevice describes an EBS volume.
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
	// VolumeSize is a quantity; v1alpha1 accepted plain numbers as well as strings like "20Gi".
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// VolumeType is an EBS volume type such as gp3.
	VolumeType *string `json:"volumeType,omitempty"`
}
