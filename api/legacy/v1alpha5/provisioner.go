package v1alpha5

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Provisioner is a karpenter.sh/v1alpha5 Provisioner, the predecessor of NodePool: node
// constraints and defaults, launch settings (inline via Provider or by reference via
// ProviderRef), limits and the TTL-based scale-down rules.
type Provisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProvisionerSpec `json:"spec,omitempty"`

	// Status is accepted so that dumps of live objects decode, but it is not interpreted.
	Status *runtime.RawExtension `json:"status,omitempty"`
}

// ProvisionerSpec is the desired state of a Provisioner.
type ProvisionerSpec struct {
	// Annotations are put on every node this provisioner launches.
	Annotations map[string]string `json:"annotations,omitempty"`

	// Labels are put on every node this provisioner launches, and pods may select on them.
	Labels map[string]string `json:"labels,omitempty"`

	// Taints are put on every node for its whole life.
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StartupTaints are put on new nodes and expected to be removed by another agent once the
	// node is ready for work; they are ignored when deciding whether a pod fits.
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`

	// Requirements constrain node labels such as instance type, zone, arch and capacity type.
	// There is no minValues in v1alpha5.
	Requirements []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`

	// KubeletConfiguration overrides kubelet settings on the nodes. It became
	// spec.template.spec.kubelet in v1beta1 and moved to EC2NodeClass in v1.
	KubeletConfiguration *KubeletConfiguration `json:"kubeletConfiguration,omitempty"`

	// Provider holds the AWS launch settings inline, in the shape of AWS (the embedded
	// provider of AWSNodeTemplate). It is mutually exclusive with ProviderRef. It is kept as
	// raw JSON, as the CRD declares it free-form; use AWSProvider to decode it.
	Provider *runtime.RawExtension `json:"provider,omitempty"`

	// ProviderRef names an AWSNodeTemplate holding the launch settings.
	ProviderRef *ProviderRef `json:"providerRef,omitempty"`

	// TTLSecondsAfterEmpty, when set, deletes a node this many seconds after its last
	// non-daemon pod went away. It cannot be combined with Consolidation enabled. nil means
	// empty nodes are not removed by this rule.
	TTLSecondsAfterEmpty *int64 `json:"ttlSecondsAfterEmpty,omitempty"`

	// TTLSecondsUntilExpired, when set, replaces nodes once they are this many seconds old.
	// nil means nodes never expire.
	TTLSecondsUntilExpired *int64 `json:"ttlSecondsUntilExpired,omitempty"`

	// Limits caps the total resources of all nodes of this provisioner.
	Limits *Limits `json:"limits,omitempty"`

	// Weight (1-100) orders provisioners when several could serve a pod; higher first.
	Weight *int32 `json:"weight,omitempty"`

	// Consolidation turns on active consolidation (removing or replacing under-used nodes).
	Consolidation *Consolidation `json:"consolidation,omitempty"`
}

// ProviderRef points at the AWSNodeTemplate a Provisioner uses.
type ProviderRef struct {
	// Kind of the referent; AWSNodeTemplate when unset.
	Kind *string `json:"kind,omitempty"`
	// Name of the referent. Required.
	Name string `json:"name"`
	// APIVersion of the referent, normally karpenter.k8s.aws/v1alpha1.
	APIVersion *string `json:"apiVersion,omitempty"`
}

// Limits wraps the resource caps of a Provisioner (v1beta1 dropped the extra level).
type Limits struct {
	// Resources maps resource names (cpu, memory, nvidia.com/gpu, ...) to the maximum total.
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// Consolidation is the v1alpha5 consolidation switch.
type Consolidation struct {
	// Enabled turns consolidation on. nil and false both mean off.
	Enabled *bool `json:"enabled,omitempty"`
}

// KubeletConfiguration holds the kubelet overrides of a v1alpha5 Provisioner.
type KubeletConfiguration struct {
	// ClusterDNS lists the DNS server addresses handed to pods instead of the cluster default.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ContainerRuntime selected the runtime on AMIs that offered a choice (dockerd or
	// containerd). Later API versions dropped it.
	ContainerRuntime *string `json:"containerRuntime,omitempty"`
	// MaxPods caps the number of pods on the node, replacing the provider's computed value.
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods per CPU core; the lower of this and MaxPods wins.
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved reserves resources for OS daemons. Quantities may be numbers or strings.
	SystemReserved corev1.ResourceList `json:"systemReserved,omitempty"`
	// KubeReserved reserves resources for Kubernetes daemons.
	KubeReserved corev1.ResourceList `json:"kubeReserved,omitempty"`
	// EvictionHard maps eviction signals to the threshold at which pods are evicted at once.
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft maps eviction signals to thresholds that evict after a grace period.
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod gives, per signal in EvictionSoft, how long the threshold must be
	// exceeded before eviction starts.
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod bounds, in seconds, the grace period of pods evicted because of
	// a soft threshold.
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage (0-100) above which image garbage
	// collection always runs.
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage (0-100) image garbage collection aims for.
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota turns CFS quota enforcement for containers with CPU limits on or off.
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// AWSProvider decodes the inline provider block, rejecting keys that the v1alpha5-era AWS
// provider did not define. It returns nil, nil when the Provisioner has no provider block.
//
// userData, amiSelector and detailedMonitoring are not accepted here: they only existed on
// AWSNodeTemplate, so a provider block that uses them is an error.
func (s *ProvisionerSpec) AWSProvider() (*AWS, error) {
	if s.Provider == nil || len(s.Provider.Raw) == 0 || bytes.Equal(bytes.TrimSpace(s.Provider.Raw), []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Provider.Raw))
	dec.DisallowUnknownFields()
	var p AWS
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decoding spec.provider: %w", err)
	}
	return &p, nil
}
