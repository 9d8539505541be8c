package v1

import corev1 "k8s.io/api/core/v1"

// Labels karpool puts on NodeClaims and nodes.
const (
	// LabelNodePool names the NodePool a NodeClaim or node belongs to.
	LabelNodePool = "karpenter.sh/nodepool"
	// LabelCapacityType holds the capacity type of a node (CapacityTypeSpot, ...).
	LabelCapacityType = "karpenter.sh/capacity-type"
	// LabelNodeRegistered is set to "true" once the node joined the cluster.
	LabelNodeRegistered = "karpenter.sh/registered"
	// LabelDoNotSyncTaints "true" on a Node (set by its provider) keeps registration from
	// copying the NodeClaim's taints onto it.
	LabelDoNotSyncTaints = "karpenter.sh/do-not-sync-taints"
	// LabelNodeInitialized is set to "true" once the node is ready, its startup taints are gone
	// and its extended resources are registered.
	LabelNodeInitialized = "karpenter.sh/initialized"
)

// Values of LabelCapacityType.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// AnnotationDoNotDisrupt, set to "true" on a pod or node, keeps the node from being voluntarily
// disrupted (consolidation, drift, expiry).
const AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"

// AnnotationTerminationTimestamp on a NodeClaim is when (RFC 3339) its drain stops waiting:
// the pods still on the node are deleted instead of evicted. Node repair sets it to the moment
// it replaces an unhealthy node.
const AnnotationTerminationTimestamp = "karpenter.sh/nodeclaim-termination-timestamp"

// AnnotationMinValuesRelaxed on a NodeClaim is "true" when the scheduler lowered one of its
// minValues to what its instance types offer (MIN_VALUES_POLICY=BestEffort), "false" otherwise.
const AnnotationMinValuesRelaxed = "karpenter.sh/nodeclaim-min-values-relaxed"

// TerminationFinalizer is the finalizer karpool keeps on NodeClaims and nodes until the instance
// is gone.
const TerminationFinalizer = "karpenter.sh/termination"

// Taints karpool manages on its nodes.
const (
	// TaintKeyDisrupted marks a node that is being disrupted, so no new pods land on it.
	TaintKeyDisrupted = "karpenter.sh/disrupted"
	// TaintKeyUnregistered is put on nodes at launch and removed when karpool registers them.
	TaintKeyUnregistered = "karpenter.sh/unregistered"
)

// DisruptedNoScheduleTaint is the taint put on a node while it is being disrupted.
var DisruptedNoScheduleTaint = corev1.Taint{Key: TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}

// Values of Disruption.ConsolidationPolicy.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 ConsolidationPolicy = "Balanced"
)

// Values of Budget.Reasons.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// NodeClaim condition types. Ready summarises the others and is what the "Ready" printer column
// shows.
const (
	ConditionTypeLaunched       = "Launched"
	ConditionTypeRegistered     = "Registered"
	ConditionTypeInitialized    = "Initialized"
	ConditionTypeReady          = "Ready"
	ConditionTypeDrifted        = "Drifted"
	ConditionTypeConsolidatable = "Consolidatable"
)

// NodePool condition types (besides ConditionTypeReady).
const (
	ConditionTypeValidationSucceeded     = "ValidationSucceeded"
	ConditionTypeNodeClassReady          = "NodeClassReady"
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
)

// NormalizedLabels maps deprecated or provider-specific aliases of well-known node labels to the
// label they stand for. Nodes carry both (the kubelet sets the beta arch and os labels, the cloud
// controller the beta zone, region and instance type, the EBS CSI driver its zone key), so a
// pod's requirement or topology key on an alias means the same as one on the stable label.
// Karpenter normalizes the same keys; the EBS CSI zone key is its AWS provider's addition.
var NormalizedLabels = map[string]string{
	corev1.LabelFailureDomainBetaZone:   corev1.LabelTopologyZone,
	corev1.LabelFailureDomainBetaRegion: corev1.LabelTopologyRegion,
	"beta.kubernetes.io/arch":           corev1.LabelArchStable,
	"beta.kubernetes.io/os":             corev1.LabelOSStable,
	corev1.LabelInstanceType:            corev1.LabelInstanceTypeStable,
	"topology.ebs.csi.aws.com/zone":     corev1.LabelTopologyZone,
}

// NormalizeLabel returns the label a key stands for (the key itself unless it is an alias).
func NormalizeLabel(key string) string {
	if n, ok := NormalizedLabels[key]; ok {
		return n
	}
	return key
}

// WithLabelAliases adds to a node's labels every alias of the well-known labels it carries, as
// the kubelet, the cloud controller and the EBS CSI driver do on a real node. It modifies and
// returns labels.
func WithLabelAliases(labels map[string]string) map[string]string {
	for alias, key := range NormalizedLabels {
		if v, ok := labels[key]; ok {
			labels[alias] = v
		}
	}
	return labels
}
