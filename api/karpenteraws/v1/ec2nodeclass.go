package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass holds the AWS launch settings (AMIs, networking, IAM, storage, kubelet) that
// NodePools point at through their nodeClassRef.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired launch configuration.
	Spec EC2NodeClassSpec `json:"spec,omitempty"`
	// Status reports what the selectors currently resolve to.
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClass objects.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EC2NodeClass{}, &EC2NodeClassList{})
}

// EC2NodeClassSpec describes how instances for this class are launched.
//
// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'bottlerocket') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)"
// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms pick the subnets nodes may launch into; a subnet matching any term is used.
	//
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!self.all(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MaxItems=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`

	// SecurityGroupSelectorTerms pick the security groups attached to nodes; terms are ORed.
	//
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MaxItems=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`

	// CapacityReservationSelectorTerms pick the capacity reservations nodes may use; terms are ORed.
	//
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))"
	// +kubebuilder:validation:MaxItems=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`

	// AssociatePublicIPAddress, when set, decides whether launched instances get a public IPv4 address.
	//
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`

	// IPPrefixCount is how many IPv4 prefixes to assign to the primary network interface.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`

	// AMISelectorTerms pick the AMIs nodes boot from; terms are ORed. An alias term must stand alone.
	//
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`

	// AMIFamily selects the user data format and default block devices. It may be omitted when an
	// alias term is used (the family then comes from the alias); otherwise it is mandatory.
	//
	// +kubebuilder:validation:Enum=AL2;AL2023;Bottlerocket;Custom;Windows2019;Windows2022;Windows2025
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`

	// UserData is extra bootstrap data in the format of the AMI family; karpool merges its own
	// settings into it.
	//
	// +optional
	UserData *string `json:"userData,omitempty"`

	// Role is the IAM role name for nodes; karpool manages an instance profile for it.
	// Exactly one of role and instanceProfile is set.
	//
	// +kubebuilder:validation:XValidation:message="role cannot be empty",rule="self != ''"
	// +optional
	Role string `json:"role,omitempty"`

	// InstanceProfile names an existing IAM instance profile to launch with, instead of role.
	//
	// +kubebuilder:validation:XValidation:message="instanceProfile cannot be empty",rule="self != ''"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`

	// Kubelet holds kubelet settings rendered into the node's bootstrap configuration.
	//
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`

	// Tags are added to the EC2 resources (instances, volumes, launch templates) karpool creates.
	// Keys that karpool or EKS reserve are rejected.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="self.all(k, k !='eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster') )"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="self.all(k, k !='karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// BlockDeviceMappings overrides the AMI family's default volumes.
	//
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`

	// InstanceStorePolicy says what to do with local instance-store disks.
	//
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`

	// DetailedMonitoring turns on one-minute CloudWatch monitoring for launched instances.
	//
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`

	// MetadataOptions configures the instance metadata service (IMDS) on launched instances.
	// When omitted, IMDS is enabled over IPv4 only, requires session tokens and allows one hop.
	//
	// +kubebuilder:default={httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1, httpTokens: required}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// Context is passed through unchanged as the reserved Context parameter of EC2 CreateFleet.
	//
	// +optional
	Context *string `json:"context,omitempty"`

	// CPUOptions sets processor features on launched instances.
	//
	// +optional
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`

	// ConnectionTracking sets idle connection-tracking timeouts on the network interfaces in the
	// launch template (EFA-only interfaces are left alone).
	//
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`

	// NetworkInterfaces lists the interfaces to attach; when set, it must include the primary one
	// (card 0, device 0, type interface).
	//
	// +kubebuilder:validation:XValidation:message="networkInterfaces must include a primary interface with interfaceType='interface'",rule="self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')"
	// +kubebuilder:validation:XValidation:message="networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card",rule="self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))"
	// +kubebuilder:validation:MaxItems=150
	// +optional
	NetworkInterfaces []*NetworkInterface `json:"networkInterfaces,omitempty"`

	// PlacementGroupSelector names the placement group (by name or by id) to launch into.
	//
	// +optional
	PlacementGroupSelector *PlacementGroupSelectorTerm `json:"placementGroupSelector,omitempty"`
}

// SubnetSelectorTerm matches subnets; all fields set in one term must match.
type SubnetSelectorTerm struct {
	// Tags match subnet tags; the value "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is a subnet id (subnet-...).
	//
	// +kubebuilder:validation:Pattern=`subnet-[0-9a-z]+`
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm matches security groups; all fields set in one term must match.
type SecurityGroupSelectorTerm struct {
	// Tags match security group tags; the value "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is a security group id (sg-...).
	//
	// +kubebuilder:validation:Pattern=`sg-[0-9a-z]+`
	// +optional
	ID string `json:"id,omitempty"`

	// Name is the group's GroupName attribute (not its Name tag).
	//
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm matches capacity reservations; all fields set in one term must match.
type CapacityReservationSelectorTerm struct {
	// Tags match reservation tags; the value "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is a capacity reservation id (cr-...).
	//
	// +kubebuilder:validation:Pattern=`^cr-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`

	// OwnerID is the 12-digit AWS account id that owns the reservation.
	//
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	// +optional
	OwnerID string `json:"ownerID,omitempty"`

	// InstanceMatchCriteria matches reservations by how they accept launches (open or targeted).
	//
	// +kubebuilder:validation:Enum=open;targeted
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// AMISelectorTerm matches AMIs; all fields set in one term must match.
type AMISelectorTerm struct {
	// Alias selects an EKS-optimized AMI as "family@version", e.g. "al2023@latest" or
	// "bottlerocket@v1.10.0". Windows families only accept "latest".
	//
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",rule="self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`

	// Tags match AMI tags; the value "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is an AMI id (ami-...).
	//
	// +kubebuilder:validation:Pattern=`ami-[0-9a-z]+`
	// +optional
	ID string `json:"id,omitempty"`

	// Name is the image's Name attribute (not its Name tag).
	//
	// +optional
	Name string `json:"name,omitempty"`

	// Owner restricts matches to an account id or to "self", "amazon" or "aws-marketplace".
	//
	// +optional
	Owner string `json:"owner,omitempty"`

	// SSMParameter is the name or ARN of an SSM parameter whose value is an AMI id.
	//
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// PlacementGroupSelectorTerm identifies one placement group by name or by id.
//
// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['name', 'id']",rule="has(self.name) || has(self.id)"
// +kubebuilder:validation:XValidation:message="'name' and 'id' are mutually exclusive",rule="!(has(self.name) && has(self.id))"
type PlacementGroupSelectorTerm struct {
	// Name is the placement group name.
	//
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`

	// ID is the placement group id (pg-...).
	//
	// +kubebuilder:validation:Pattern=`^pg-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`
}

// KubeletConfiguration is the subset of kubelet settings karpool passes to nodes. Field names
// follow the kubelet's own configuration file.
//
// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true"
// +kubebuilder:validation:XValidation:message="evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",rule="has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true"
// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",rule="has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true"
type KubeletConfiguration struct {
	// ClusterDNS lists cluster DNS server addresses for pods.
	//
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`

	// MaxPods caps the number of pods on the node.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`

	// PodsPerCore caps pods per CPU core; the lower of this and maxPods wins.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`

	// SystemReserved reserves cpu, memory, ephemeral-storage or pid for OS daemons.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="systemReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	SystemReserved map[string]ReservedQuantity `json:"systemReserved,omitempty"`

	// KubeReserved reserves cpu, memory, ephemeral-storage or pid for Kubernetes daemons.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="kubeReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	KubeReserved map[string]ReservedQuantity `json:"kubeReserved,omitempty"`

	// EvictionHard maps eviction signals to thresholds (quantity or percentage) that evict immediately.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionHard map[string]EvictionThreshold `json:"evictionHard,omitempty"`

	// EvictionSoft maps eviction signals to thresholds that evict after their grace period.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionSoft map[string]EvictionThreshold `json:"evictionSoft,omitempty"`

	// EvictionSoftGracePeriod gives, per signal in evictionSoft, how long it must hold before eviction.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`

	// EvictionMaxPodGracePeriod caps, in seconds, the termination grace period granted on soft eviction.
	//
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`

	// ImageGCHighThresholdPercent is the disk usage percentage above which image GC always runs;
	// it must exceed imageGCLowThresholdPercent.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`

	// ImageGCLowThresholdPercent is the disk usage percentage that image GC frees space down to.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`

	// CPUCFSQuota turns CFS quota enforcement on or off for containers with CPU limits.
	//
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// ReservedQuantity is a non-negative resource quantity such as "100m" or "1Gi", kept as a string.
//
// +kubebuilder:validation:Pattern=`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
type ReservedQuantity string

// EvictionThreshold is an eviction threshold: a percentage like "10%" or a quantity like "500Mi".
//
// +kubebuilder:validation:Pattern=`^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
type EvictionThreshold string

// MetadataOptions configures the EC2 instance metadata service.
type MetadataOptions struct {
	// HTTPEndpoint turns the metadata endpoint on or off (default enabled).
	//
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum=enabled;disabled
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`

	// HTTPProtocolIPv6 turns the IPv6 metadata endpoint on or off (default disabled).
	//
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum=enabled;disabled
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`

	// HTTPPutResponseHopLimit is how many network hops a metadata PUT response may travel
	// (1-64, default 1). Containers not on the host network typically need 2.
	//
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`

	// HTTPTokens is "required" to allow only IMDSv2 session-token requests, or "optional" to also
	// allow IMDSv1 (default required).
	//
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum=required;optional
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping attaches one volume to launched instances.
type BlockDeviceMapping struct {
	// DeviceName is the device path, e.g. /dev/xvda.
	//
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`

	// EBS describes the EBS volume created for this device.
	//
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`

	// RootVolume marks the volume that holds the kubelet root directory; at most one may be marked.
	//
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// These markers sit in their own comment group, apart from the doc comment, because gofmt would
// rewrite the two single quotes in the second rule into a typographic quote inside a doc comment.
// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
// +kubebuilder:validation:XValidation:message="snapshotID must be set when volumeInitializationRate is set",rule="!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')"

// BlockDevice describes an EBS volume.
type BlockDevice struct {
	// DeleteOnTermination removes the volume when the instance terminates.
	//
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`

	// Encrypted requests an encrypted volume (the instance type must support EBS encryption).
	//
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`

	// IOPS provisions I/O operations per second; only meaningful for gp3, io1 and io2.
	//
	// +optional
	IOPS *int64 `json:"iops,omitempty"`

	// KMSKeyID is the KMS key (id, alias or ARN) used for encryption.
	//
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`

	// SnapshotID is the EBS snapshot the volume is created from.
	//
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`

	// Throughput provisions MiB/s for gp3 volumes (125-1000).
	//
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`

	// VolumeInitializationRate is the MiB/s rate (100-300) at which snapshot blocks are loaded
	// into the new volume; requires snapshotID.
	//
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`

	// VolumeSize is the volume size with a Gi, G, Ti or T suffix. Either this or snapshotID is needed.
	//
	// +kubebuilder:validation:Pattern=`^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`

	// VolumeType is the EBS volume type.
	//
	// +kubebuilder:validation:Enum=standard;io1;io2;gp2;sc1;st1;gp3
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// InstanceStorePolicy says how local instance-store disks are used.
//
// +kubebuilder:validation:Enum=RAID0
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes all instance-store disks into one RAID0 array used for
// ephemeral storage.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"

// CPUOptions sets processor features on launched instances.
type CPUOptions struct {
	// NestedVirtualization turns nested virtualization on or off; when enabled only instance types
	// that support it are considered.
	//
	// +kubebuilder:validation:Enum=enabled;disabled
	// +optional
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}

// ConnectionTracking holds idle timeouts, in seconds, for tracked connections. Unset values
// leave EC2's defaults in place.
//
// +kubebuilder:validation:XValidation:message="at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
type ConnectionTracking struct {
	// TCPEstablishedTimeout applies to idle established TCP connections (60-432000).
	//
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`

	// UDPStreamTimeout applies to idle UDP flows that have exchanged more than one
	// request and response (60-180).
	//
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`

	// UDPTimeout applies to idle UDP flows seen in one direction only or with a single
	// request and response (30-60).
	//
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// Network interface types of spec.networkInterfaces.
const (
	InterfaceTypeInterface = "interface"
	InterfaceTypeEFAOnly   = "efa-only"
)

// NetworkInterface places one network interface on a network card of the instance.
type NetworkInterface struct {
	// NetworkCardIndex is the network card the interface goes on.
	//
	// +kubebuilder:validation:Minimum=0
	// +required
	NetworkCardIndex int32 `json:"networkCardIndex"`

	// DeviceIndex is the attachment position of the interface on its card.
	//
	// +kubebuilder:validation:Minimum=0
	// +required
	DeviceIndex int32 `json:"deviceIndex"`

	// InterfaceType is "interface" for a regular ENI or "efa-only" for an EFA-only interface.
	//
	// +kubebuilder:validation:Enum=interface;efa-only
	// +required
	InterfaceType string `json:"interfaceType"`
}
