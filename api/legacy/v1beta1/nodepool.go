package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NodePool is a karpenter.sh/v1beta1 NodePool: a template for the nodes Karpenter may create,
// together with limits on how much it may create and rules for taking nodes away again.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodePoolSpec `json:"spec"`

	// Status is accepted so that dumps of live objects decode, but it is not interpreted.
	Status *runtime.RawExtension `json:"status,omitempty"`
}

// NodePoolSpec is the desired state of a v1beta1 NodePool.
type NodePoolSpec struct {
	// Template is stamped onto every NodeClaim launched for this pool. Required.
	Template NodeClaimTemplate `json:"template"`

	// Disruption controls consolidation, expiry and disruption budgets. When the block is
	// absent, v1beta1 defaulted it to consolidationPolicy WhenUnderutilized and expireAfter
	// 720h with a single 10% budget; nil here means the manifest relied on those defaults.
	Disruption *Disruption `json:"disruption,omitempty"`

	// Limits caps the total resources (cpu, memory, ...) of all nodes in the pool.
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// Weight (1-100) orders pools when several could serve a pod; higher is tried first.
	Weight *int32 `json:"weight,omitempty"`
}

// NodeClaimTemplate is the template part of a NodePool.
type NodeClaimTemplate struct {
	// Metadata holds the labels and annotations copied onto each node.
	Metadata *NodeClaimTemplateMetadata `json:"metadata,omitempty"`

	// Spec is the NodeClaim spec used for each node. Resources must not be set here.
	Spec NodeClaimSpec `json:"spec"`
}

// NodeClaimTemplateMetadata is the reduced object metadata a NodePool template may carry; the
// schema allows only labels and annotations.
type NodeClaimTemplateMetadata struct {
	// Labels are applied to every node. Some well-known keys are reserved by Kubernetes or
	// Karpenter and rejected by the v1beta1 schema.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are applied to every node.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ConsolidationPolicy names which nodes v1beta1 considers for consolidation.
type ConsolidationPolicy string

// The consolidation policies v1beta1 knows. v1 renamed WhenUnderutilized to
// WhenEmptyOrUnderutilized.
const (
	ConsolidationPolicyWhenEmpty         ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenUnderutilized ConsolidationPolicy = "WhenUnderutilized"
)

// Disruption groups the v1beta1 settings for voluntary node removal.
type Disruption struct {
	// ConsolidateAfter is how long a node must have been empty before it is removed. v1beta1
	// only allowed it (other than "Never") together with ConsolidationPolicy WhenEmpty, and
	// required it in that case.
	ConsolidateAfter *NillableDuration `json:"consolidateAfter,omitempty"`

	// ConsolidationPolicy is WhenEmpty or WhenUnderutilized; unset meant WhenUnderutilized.
	ConsolidationPolicy *ConsolidationPolicy `json:"consolidationPolicy,omitempty"`

	// ExpireAfter is the maximum node lifetime before replacement, or "Never"; unset meant 720h.
	// v1 moved this setting to spec.template.spec.expireAfter.
	ExpireAfter *NillableDuration `json:"expireAfter,omitempty"`

	// Budgets limit how many nodes may be disrupted at once, optionally only during a
	// scheduled window. Unset meant a single budget of 10%.
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits concurrent voluntary disruptions in a NodePool.
type Budget struct {
	// Nodes is a count ("5") or a percentage of the pool ("10%"). Required by the schema,
	// which defaulted it to "10%".
	Nodes string `json:"nodes"`

	// Schedule is a cron expression (or @daily-style macro) for when the budget window opens.
	// It must be given together with Duration.
	Schedule *string `json:"schedule,omitempty"`

	// Duration is how long the window stays open after each Schedule tick, in hours and/or
	// minutes.
	Duration *metav1.Duration `json:"duration,omitempty"`
}
