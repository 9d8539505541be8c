package v1alpha1

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PoolSyncKind is the kind name of PoolSync, used in events and inventory IDs.
const PoolSyncKind = "PoolSync"

// PoolSync keeps the NodePools and EC2NodeClasses of one path of a Git repository applied to the
// cluster, together with the AWS resources they need.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=karpool,shortName=ps
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastAppliedRevision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PoolSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PoolSyncSpec   `json:"spec,omitempty"`
	Status PoolSyncStatus `json:"status,omitempty"`
}

// PoolSyncSpec says where the pool definitions live and how to apply them.
type PoolSyncSpec struct {
	// URL of the Git repository: https://, ssh:// or file://.
	// +kubebuilder:validation:Pattern=`^(https?|ssh|file)://.+$`
	// +required
	URL string `json:"url"`

	// Ref selects the revision to follow; the default branch is "main".
	// +optional
	Ref *GitRef `json:"ref,omitempty"`

	// Path inside the repository holding the manifests or a kustomization; defaults to the root.
	// +kubebuilder:validation:XValidation:message="path must stay inside the repository",rule="!self.contains('..')"
	// +optional
	Path string `json:"path,omitempty"`

	// Interval between reconciliations, also the period of drift correction.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +required
	Interval metav1.Duration `json:"interval"`

	// RetryInterval is the wait after a failed reconciliation; defaults to Interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	RetryInterval *metav1.Duration `json:"retryInterval,omitempty"`

	// Timeout bounds one reconciliation (fetch, build, apply, health); defaults to Interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// SecretRef names a Secret in the controller's namespace with Git credentials: "username" and
	// "password" (or a token as password) for https, "identity" and "known_hosts" for ssh.
	// +optional
	SecretRef *meta.LocalObjectReference `json:"secretRef,omitempty"`

	// Suspend stops reconciliation; the objects already applied stay as they are.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Prune deletes objects that were applied from an earlier revision and are gone from Git.
	// +kubebuilder:default:=true
	// +optional
	Prune bool `json:"prune"`

	// DeletionPolicy says what happens to the applied objects when this PoolSync is deleted:
	// MirrorPrune deletes them if prune is true, Delete always deletes them, Orphan leaves them
	// in the cluster. A suspended PoolSync leaves them whatever the policy. Deleting a NodePool
	// drains and terminates its nodes.
	// +kubebuilder:validation:Enum=Delete;MirrorPrune;Orphan
	// +kubebuilder:default:=MirrorPrune
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// AWS configures the AWS resources rendered alongside the pools.
	// +optional
	AWS *AWSSpec `json:"aws,omitempty"`

	// Report configures where results are reported back to people.
	// +optional
	Report *ReportSpec `json:"report,omitempty"`
}

// GitRef names what to check out. At most one field may be set; commit wins in Flux, but here
// setting several is rejected so that the intent is never ambiguous.
// +kubebuilder:validation:XValidation:message="set at most one of branch, tag, semver and commit",rule="[has(self.branch), has(self.tag), has(self.semver), has(self.commit)].filter(x, x).size() <= 1"
type GitRef struct {
	// +optional
	Branch string `json:"branch,omitempty"`
	// +optional
	Tag string `json:"tag,omitempty"`
	// SemVer is a range (for example ">=1.2.0 <2.0.0"); the highest matching tag is used.
	// +optional
	SemVer string `json:"semver,omitempty"`
	// Commit is a full SHA-1 to pin to.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	// +optional
	Commit string `json:"commit,omitempty"`
}

// DeletionPolicy is what a PoolSync's deletion does to the objects it applied.
type DeletionPolicy string

const (
	// DeletionPolicyMirrorPrune deletes the objects when spec.prune is true.
	DeletionPolicyMirrorPrune DeletionPolicy = "MirrorPrune"
	// DeletionPolicyDelete deletes the objects.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan leaves the objects.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// AWSReadyCondition says whether the AWS account holds what spec.aws renders for the revision.
const AWSReadyCondition = "AWSReady"

// AWSMode says what karpool does with the AWS resources a set of pools needs.
// +kubebuilder:validation:Enum=off;plan;apply
type AWSMode string

const (
	// AWSModeOff renders nothing for AWS.
	AWSModeOff AWSMode = "off"
	// AWSModePlan computes the AWS changes and reports them without making them.
	AWSModePlan AWSMode = "plan"
	// AWSModeApply makes the AWS changes.
	AWSModeApply AWSMode = "apply"
)

// AWSSpec identifies the account context the pools run in and says what to do with the AWS
// resources they need (the ones `karpool render --aws` renders).
type AWSSpec struct {
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +required
	Region string `json:"region"`
	// ClusterName is the EKS cluster name, used for discovery tags and resource names.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +required
	ClusterName string `json:"clusterName"`
	// Mode: plan (the default) reports the changes in status, events and reports without making
	// them; apply makes them before the pools are applied; off does neither.
	// +kubebuilder:default:=plan
	// +optional
	Mode AWSMode `json:"mode,omitempty"`
	// AccountID is the account's 12-digit ID; default the account of the controller's
	// credentials (STS GetCallerIdentity).
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	// +optional
	AccountID string `json:"accountID,omitempty"`
	// PodIdentity makes the controller role trust EKS Pod Identity; by default it trusts the
	// controller's service account through IRSA, with the issuer EKS DescribeCluster reports.
	// +optional
	PodIdentity bool `json:"podIdentity,omitempty"`
	// NodeRole is the default node role; default KarpenterNodeRole-<clusterName>. Like an
	// EC2NodeClass's spec.role, it is a role name, optionally after its IAM path
	// (team/NodeRole), or the role's ARN (IAM's ARNs have at most 2048 characters).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^((arn:(aws|aws-cn|aws-us-gov):iam::([0-9]{12}):role/)|/)?(([A-Za-z0-9+=,.@_-]+/)*)([A-Za-z0-9+=,.@_-]{1,64})$`
	// +optional
	NodeRole string `json:"nodeRole,omitempty"`
	// AllowedAccounts are the accounts, besides the cluster's, whose roles the node role and the
	// EC2NodeClasses' spec.role may name by ARN. An ARN of any other account is refused.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:Pattern=`^[0-9]{12}$`
	// +listType=set
	// +optional
	AllowedAccounts []string `json:"allowedAccounts,omitempty"`
	// InterruptionQueue is the SQS queue's name; default the cluster name.
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`
	// +optional
	InterruptionQueue string `json:"interruptionQueue,omitempty"`
	// NodeAccess is how nodes join the cluster: an EKS access entry (the default) or an entry
	// of the aws-auth ConfigMap, which is reported to add by hand.
	// +kubebuilder:validation:Enum=access-entry;aws-auth
	// +optional
	NodeAccess string `json:"nodeAccess,omitempty"`
}

// ReportSpec configures feedback in Git.
type ReportSpec struct {
	// StatusCommits writes a status file to a branch of the repository after each reconciliation.
	// +optional
	StatusCommits *StatusCommitSpec `json:"statusCommits,omitempty"`
	// PullRequests posts a comment on open pull requests that change Path, showing the capacity
	// and cost the change would cause.
	// +optional
	PullRequests *PullRequestSpec `json:"pullRequests,omitempty"`
}

// StatusCommitSpec says where status commits go. They need a spec.secretRef allowed to push.
type StatusCommitSpec struct {
	// Branch receives the reports, in a directory named after the PoolSync. A branch of its
	// own keeps the commits out of the history PoolSync reconciles.
	// +kubebuilder:default:=karpool-status
	// +optional
	Branch string `json:"branch,omitempty"`
	// Author of the commits; default karpool <karpool@localhost>.
	// +optional
	Author *CommitAuthor `json:"author,omitempty"`
	// Message is the commit message; {revision} is replaced by the applied revision.
	// +kubebuilder:default:="karpool status for {revision}"
	// +optional
	Message string `json:"message,omitempty"`
}

// CommitAuthor names who writes a commit.
type CommitAuthor struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +required
	Email string `json:"email"`
}

// PullRequestSpec says which forge API to comment through.
type PullRequestSpec struct {
	// +kubebuilder:validation:Enum=github;gitea
	// +required
	Provider string `json:"provider"`
	// APIURL is the forge's API base; empty means the provider's public default.
	// +optional
	APIURL string `json:"apiURL,omitempty"`
	// SecretRef names a Secret with a "token" key allowed to comment.
	// +required
	SecretRef meta.LocalObjectReference `json:"secretRef"`
}

// PoolSyncStatus is the observed state, in Flux's conventions so that the same tooling reads it.
type PoolSyncStatus struct {
	meta.ReconcileRequestStatus `json:",inline"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastAttemptedRevision is the revision of the last reconciliation attempt, as branch@sha1:hex.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// LastAppliedRevision is the revision last applied successfully, as branch@sha1:hex.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// Inventory lists the objects applied from LastAppliedRevision; prune works from it.
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`

	// AWS is the outcome of the last plan or apply of the AWS resources (spec.aws).
	// +optional
	AWS *AWSStatus `json:"aws,omitempty"`
}

// AWSStatus is what the last reconciliation found in, or did to, the AWS account.
type AWSStatus struct {
	// Mode is the spec.aws.mode the outcome belongs to.
	Mode AWSMode `json:"mode"`
	// Revision is the revision whose EC2NodeClasses the resources were rendered from.
	Revision string `json:"revision"`
	// Changes are, in plan mode, what apply would do and, in apply mode, what the last
	// reconciliation did, one line each as `karpool render --aws --format plan` prints them
	// ("+ IAM role KarpenterNodeRole-demo"); at most 50, Summary counts them all.
	// +optional
	Changes []string `json:"changes,omitempty"`
	// Summary counts the changes, e.g. "2 to create, 1 to update, 0 to delete".
	Summary string `json:"summary"`
}

// Inventory is the set of objects a PoolSync owns.
type Inventory struct {
	Entries []InventoryEntry `json:"entries"`
}

// InventoryEntry identifies one applied object.
type InventoryEntry struct {
	// ID is namespace_name_group_kind, as Flux writes it.
	ID string `json:"id"`
	// Version is the object's API version.
	Version string `json:"v"`
}

// GetConditions lets fluxcd/pkg/runtime read the conditions.
func (in *PoolSync) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions lets fluxcd/pkg/runtime write the conditions.
func (in *PoolSync) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetRequeueAfter is how long to wait before the next reconciliation.
func (in *PoolSync) GetRequeueAfter() time.Duration { return in.Spec.Interval.Duration }

// +kubebuilder:object:root=true

// PoolSyncList is a list of PoolSyncs.
type PoolSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PoolSync `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PoolSync{}, &PoolSyncList{})
}
