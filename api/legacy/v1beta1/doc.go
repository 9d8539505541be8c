// Package v1beta1 describes, as plain Go structs, the manifests that Karpenter accepted before its
// v1 release: karpenter.sh/v1beta1 NodePool and NodeClaim, and karpenter.k8s.aws/v1beta1
// EC2NodeClass.
//
// These are read-only shapes for `karpool migrate`: the migrator decodes old manifests from Git
// into them (strictly, so a field we do not know about is an error rather than silently lost) and
// converts them to the v1 API. They are not registered with any scheme, carry no CRD markers and
// have no deepcopy functions; karpool never serves or stores them.
//
// Only the spec side is modelled. A status block, if present (for example in a `kubectl get -o
// yaml` dump), is kept as opaque JSON and ignored.
//
// Optional scalar fields are pointers so that the migrator can tell "not written" from an
// explicit zero value; this matters because v1beta1 and v1 apply different defaults to some of
// them (consolidation policy, expiry, metadata options). Required fields are plain values.
package v1beta1

import "k8s.io/apimachinery/pkg/runtime/schema"

var (
	// KarpenterGroupVersion is the group and version of NodePool and NodeClaim in this package.
	KarpenterGroupVersion = schema.GroupVersion{Group: "karpenter.sh", Version: "v1beta1"}

	// AWSGroupVersion is the group and version of EC2NodeClass in this package.
	AWSGroupVersion = schema.GroupVersion{Group: "karpenter.k8s.aws", Version: "v1beta1"}
)

// Kind names of the types in this package, as they appear in a manifest's `kind:` field.
const (
	NodePoolKind     = "NodePool"
	NodeClaimKind    = "NodeClaim"
	EC2NodeClassKind = "EC2NodeClass"
)
