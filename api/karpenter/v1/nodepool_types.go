package v1

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePoolSpec describes which nodes a NodePool may create and how they are disrupted.
//
// +kubebuilder:validation:XValidation:message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",rule="has(self.replicas) == has(oldSelf.replicas)"
// +kubebuilder:validation:XValidation:message="only 'limits.nodes' is supported on static NodePools",rule="!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))"
// +kubebuilder:validation:XValidation:message="'weight' is not supported on static NodePools",rule="!has(self.replicas) || !has(self.weight)"
type NodePoolSpec struct {
	// Template is stamped into every NodeClaim the pool creates; NodeClaims may narrow it further.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption configures consolidation and disruption budgets. Omitted, the API server
	// defaults it to consolidateAfter 0s.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption,omitzero"`
	// Limits caps the total resources of the pool's nodes. Static pools may only limit "nodes".
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Weight orders pools when several fit; higher goes first, unset counts as 0. Not allowed on
	// static pools.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the pool static: it keeps exactly this many nodes regardless of pending pods,
	// and consolidation settings are ignored (alpha).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// ConsolidationPolicy selects which nodes consolidation may remove or replace.
//
// +kubebuilder:validation:Enum:={WhenEmpty,WhenEmptyOrUnderutilized,Balanced}
type ConsolidationPolicy string

// DisruptionReason is a kind of voluntary disruption a budget can be limited to.
//
// +kubebuilder:validation:Enum:={Underutilized,Empty,Drifted}
type DisruptionReason string

// Disruption holds a NodePool's consolidation settings and disruption budgets.
type Disruption struct {
	// ConsolidateAfter is how long a node must be a consolidation candidate before it is acted on;
	// "Never" turns this off. The zero value is Never. Ignored for static pools.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +required
	ConsolidateAfter NillableDuration `json:"consolidateAfter"`
	// ConsolidationPolicy is WhenEmpty, WhenEmptyOrUnderutilized (the default) or Balanced.
	// Ignored for static pools.
	// +kubebuilder:default:=WhenEmptyOrUnderutilized
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many of the pool's nodes may be disrupted at once; the most restrictive
	// active budget applies. Defaults to a single budget of 10%.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits concurrent disruption of a NodePool's nodes, optionally only during a schedule
// window and only for some disruption reasons.
type Budget struct {
	// Reasons restricts the budget to these disruption reasons; empty means all reasons.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is the most nodes that may be disrupting at once, as a count ("5") or a percentage of
	// the pool ("10%").
	// +kubebuilder:validation:Pattern:=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +kubebuilder:default:="10%"
	// +required
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC, or a @daily-style macro) at which the budget becomes
	// active. Must be given together with Duration; unset means always active.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the budget stays active after each Schedule hit, in hours and/or
	// minutes. Must be given together with Schedule.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the metadata and spec that a NodePool gives the NodeClaims it creates.
type NodeClaimTemplate struct {
	// +optional
	ObjectMeta `json:"metadata,omitzero"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the part of object metadata a NodeClaimTemplate may set.
//
// Its deep copy is written by hand (below): controller-gen's deepcopy generator cannot handle the
// labelValue alias in a map.
//
// +kubebuilder:object:generate=false
type ObjectMeta struct {
	// Labels are put on the NodeClaim and its node. Keys in karpenter.sh and karpenter.k8s.aws
	// are reserved (except well-known ones), as are karpenter.sh/nodepool and
	// kubernetes.io/hostname.
	// +kubebuilder:validation:XValidation:message=`label domain "karpenter.sh" is restricted`,rule=`self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))`
	// +kubebuilder:validation:XValidation:message=`label "karpenter.sh/nodepool" is restricted`,rule=`self.all(x, x != "karpenter.sh/nodepool")`
	// +kubebuilder:validation:XValidation:message=`label "kubernetes.io/hostname" is restricted`,rule=`self.all(x, x != "kubernetes.io/hostname")`
	// +kubebuilder:validation:XValidation:message=`label domain "karpenter.k8s.aws" is restricted`,rule=`self.all(x, x in ["karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition"] || !x.find("^([^/]+)").endsWith("karpenter.k8s.aws"))`
	// +kubebuilder:validation:MaxProperties=100
	// +mapType=atomic
	// +optional
	Labels map[string]labelValue `json:"labels,omitempty"`
	// Annotations are put on the NodeClaim and its node.
	// +mapType=granular
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DeepCopyInto copies the receiver into out.
func (in *ObjectMeta) DeepCopyInto(out *ObjectMeta) {
	*out = *in
	out.Labels = maps.Clone(in.Labels)
	out.Annotations = maps.Clone(in.Annotations)
}

// DeepCopy returns a deep copy of the receiver.
func (in *ObjectMeta) DeepCopy() *ObjectMeta {
	if in == nil {
		return nil
	}
	out := new(ObjectMeta)
	in.DeepCopyInto(out)
	return out
}

// labelValue is a plain string; the alias only exists to attach the label-value validation to the
// values of ObjectMeta.Labels.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type labelValue = string

// NodeClaimTemplateSpec is the NodeClaim spec a NodePool hands out, without resource requests
// (those come from the pods being scheduled).
type NodeClaimTemplateSpec struct {
	// Taints are placed on the node when it registers.
	// +listType=atomic
	// +optional
	Taints []Taint `json:"taints,omitempty"`
	// StartupTaints are placed on the node at startup and are expected to be removed by
	// something else (typically a DaemonSet); pods need not tolerate them to be scheduled here.
	// +listType=atomic
	// +optional
	StartupTaints []Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the labels of the nodes the pool may launch.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +required
	Requirements []NodePoolRequirement `json:"requirements"`
	// NodeClassRef points at the provider-specific node class; its group and kind cannot change.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long draining may take once deletion started; after it,
	// remaining pods are deleted regardless of PDBs or do-not-disrupt. Unset means no bound.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type=string
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the node lifetime, counted from creation, after which the node is replaced;
	// "Never" disables expiry. Unset lets the API server default it.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ExpireAfter *NillableDuration `json:"expireAfter,omitempty"`
}

// NodePoolRequirement is one label requirement of a NodePool template. It has the same fields as
// NodeSelectorRequirementWithMinValues (convert with a plain Go conversion); in addition its key
// may not be karpenter.sh/nodepool, which the pool sets itself.
type NodePoolRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message=`label domain "karpenter.sh" is restricted`,rule=`self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")`
	// +kubebuilder:validation:XValidation:message=`label "karpenter.sh/nodepool" is restricted`,rule=`self != "karpenter.sh/nodepool"`
	// +kubebuilder:validation:XValidation:message=`label "kubernetes.io/hostname" is restricted`,rule=`self != "kubernetes.io/hostname"`
	// +kubebuilder:validation:XValidation:message=`label domain "karpenter.k8s.aws" is restricted`,rule=`self in ["karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition"] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")`
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values.
	// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values are the label values; In and NotIn need at least one, Exists and DoesNotExist none,
	// and the numeric operators exactly one integer.
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the least number of distinct values of this key the launch decision must keep
	// available (alpha).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodePoolStatus is what the controller observed about a NodePool.
type NodePoolStatus struct {
	// Resources totals the resources of the pool's nodes.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes counts the nodes that belong to the pool.
	// +kubebuilder:default:=0
	// +optional
	Nodes int64 `json:"nodes,omitempty"`
	// Conditions report the health and readiness of the pool.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// NodeClassObservedGeneration is the generation of the referenced node class last seen; when
	// the node class changes, the NodeRegistrationHealthy condition is reset.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
}

// NodePool describes a set of nodes karpool may launch: a template for their NodeClaims, resource
// limits and disruption settings.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodePool{}, &NodePoolList{})
}
