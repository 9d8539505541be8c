package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NodeClaim is a karpenter.sh/v1beta1 NodeClaim: a request for one node, normally created by
// Karpenter from a NodePool's template rather than written by hand. Migration reads only its
// spec; it is here mainly because NodePool.spec.template.spec has the same shape.
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodeClaimSpec `json:"spec"`

	// Status is accepted so that dumps of live objects decode, but it is not interpreted.
	Status *runtime.RawExtension `json:"status,omitempty"`
}

// NodeClaimSpec says what kind of node is wanted and how it should be set up. NodePool templates
// reuse it, except that a NodePool may not set Resources.
type NodeClaimSpec struct {
	// Taints are put on the node for its whole life; pods need a matching toleration.
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StartupTaints are put on the node at creation and are expected to be removed by some other
	// agent (a CNI or device plugin, say) once it has finished preparing the node. Karpenter does
	// not count them when deciding whether a pending pod fits.
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`

	// Requirements constrain the node's labels (instance type, zone, capacity type, arch, ...),
	// using the node-affinity operators plus an optional minimum of distinct values.
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`

	// Resources holds the requests the node must be able to satisfy. Only NodeClaims carry it;
	// the NodePool schema forbids it in the template.
	Resources *ResourceRequirements `json:"resources,omitempty"`

	// Kubelet overrides kubelet settings on the node. In v1 this moved to EC2NodeClass.
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`

	// NodeClassRef names the provider-specific class (an EC2NodeClass on AWS) that holds the
	// launch settings.
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
}

// NodeSelectorRequirementWithMinValues is a standard node-selector requirement with an extra,
// optional lower bound on how many distinct values of the key must remain available, so that
// Karpenter keeps a certain amount of instance-type flexibility.
type NodeSelectorRequirementWithMinValues struct {
	corev1.NodeSelectorRequirement `json:",inline"`

	// MinValues, when set, asks for at least this many distinct values (1..50) of Key.
	MinValues *int `json:"minValues,omitempty"`
}

// ResourceRequirements is the resources block of a NodeClaim; only requests are defined.
type ResourceRequirements struct {
	// Requests are the minimum amounts of each resource the node must offer.
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClassReference points at the cloud-provider node class a NodeClaim or NodePool uses.
// In v1beta1 it is identified by apiVersion/kind/name; v1 replaced apiVersion with group.
type NodeClassReference struct {
	// Kind of the referenced object, normally "EC2NodeClass".
	Kind *string `json:"kind,omitempty"`
	// Name of the referenced object. Required.
	Name string `json:"name"`
	// APIVersion of the referenced object, normally "karpenter.k8s.aws/v1beta1".
	APIVersion *string `json:"apiVersion,omitempty"`
}

// KubeletConfiguration holds the kubelet settings v1beta1 lets a NodePool override. The
// reserved-resource and eviction maps are string-valued here (quantities or percentages as
// written), unlike v1alpha5 which used resource lists for the reserved maps.
type KubeletConfiguration struct {
	// ClusterDNS lists the DNS server addresses handed to pods instead of the cluster default.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// MaxPods caps the number of pods on the node, replacing the provider's computed value.
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods per CPU core; the lower of this and MaxPods wins.
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved reserves cpu, memory, ephemeral-storage or pid for OS daemons.
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved reserves cpu, memory, ephemeral-storage or pid for Kubernetes daemons.
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard maps eviction signals (memory.available, nodefs.available, ...) to the
	// threshold at which pods are evicted immediately.
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft maps eviction signals to thresholds that evict only after a grace period.
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod gives, per signal in EvictionSoft, how long the threshold must be
	// exceeded before eviction starts. Its keys must match EvictionSoft's.
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod bounds, in seconds, the termination grace period used for pods
	// evicted because of a soft threshold.
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage (0-100) above which image garbage collection
	// always runs.
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage (0-100) image garbage collection tries to get
	// back down to. It must be below the high threshold.
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota turns CFS quota enforcement for containers with CPU limits on or off.
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}
