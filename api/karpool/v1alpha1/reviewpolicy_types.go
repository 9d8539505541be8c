package v1alpha1

// ReviewPolicyKind is the kind name of ReviewPolicy.
const ReviewPolicyKind = "ReviewPolicy"

// ReviewPolicyPath is where a pools repository keeps its ReviewPolicy, from its root. Plans read
// it from the base revision of a change only: a pull request cannot loosen the rules it is held
// to.
const ReviewPolicyPath = ".karpool/policy.yaml"

// ReviewPolicy holds the guardrails `karpool plan` and PoolSync's pull-request reviews check a
// change against. It is a file of the pools repository, not an object of the cluster (so it
// has no CRD, and only the metadata a manifest author writes).
type ReviewPolicy struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   FileMetadata     `json:"metadata"`
	Spec       ReviewPolicySpec `json:"spec"`
}

// FileMetadata names a file of karpool's own kinds (ReviewPolicy, Fleet).
type FileMetadata struct {
	Name string `json:"name"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ReviewPolicySpec lists the rules and how a reviewer overrides them.
type ReviewPolicySpec struct {
	// Rules are checked in order; each sets exactly one threshold.
	Rules []GuardrailRule `json:"rules"`
	// OverrideLabel is the pull-request label that lets a change pass the blocking rules it
	// fails (the comment records it). Labels are set by people with triage rights, not by the
	// change's author as such.
	// +optional
	OverrideLabel string `json:"overrideLabel,omitempty"`
}

// Enforcement says what a failed rule does.
type Enforcement string

// The enforcements: Block fails the plan (exit status 3, a failing commit status), Warn only
// says so in the comment.
const (
	EnforcementBlock Enforcement = "Block"
	EnforcementWarn  Enforcement = "Warn"
)

// GuardrailRule is one named threshold on a plan. A rule fails when the change goes above it.
type GuardrailRule struct {
	// Name is shown in the comment and the commit status.
	Name string `json:"name"`
	// MonthlyIncreaseAbove: the fleet's cost rises by more than this many USD per month (730 h).
	// +optional
	MonthlyIncreaseAbove *string `json:"monthlyIncreaseAbove,omitempty"`
	// MonthlyIncreasePercentAbove: the fleet's cost rises by more than this percentage.
	// +optional
	MonthlyIncreasePercentAbove *string `json:"monthlyIncreasePercentAbove,omitempty"`
	// CostOverBoundAbove: some NodePool of the head costs more than this multiple of its pods'
	// cost lower bound (1.3: 30 % above what any packing could cost).
	// +optional
	CostOverBoundAbove *string `json:"costOverBoundAbove,omitempty"`
	// UnschedulablePodsAbove: more pods than this no longer fit with the change.
	// +optional
	UnschedulablePodsAbove *int32 `json:"unschedulablePodsAbove,omitempty"`
	// NodesReplacedAbove: drift would replace more nodes than this.
	// +optional
	NodesReplacedAbove *int32 `json:"nodesReplacedAbove,omitempty"`
	// LimitRemoved: fails when a NodePool kept by the change loses a limit it had (spec.limits
	// or karpool.dev/limit-per-hour).
	// +optional
	LimitRemoved bool `json:"limitRemoved,omitempty"`
	// Enforcement is Block (default) or Warn.
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`
}
