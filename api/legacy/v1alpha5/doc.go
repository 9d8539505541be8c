// Package v1alpha5 describes, as plain Go structs, the oldest Karpenter manifests karpool can
// migrate: karpenter.sh/v1alpha5 Provisioner and karpenter.k8s.aws/v1alpha1 AWSNodeTemplate
// (the AWS template lived in its own group version but was only ever used together with
// v1alpha5 Provisioners, so both are kept here).
//
// These are read-only shapes for `karpool migrate`: the migrator decodes old manifests from Git
// into them (strictly, so a field we do not know about is an error rather than silently lost) and
// converts them to the v1 API. They are not registered with any scheme, carry no CRD markers and
// have no deepcopy functions; karpool never serves or stores them.
//
// Only the spec side is modelled. A status block, if present, is kept as opaque JSON and
// ignored.
//
// Optional scalar fields are pointers so that the migrator can tell "not written" from an
// explicit zero (ttlSecondsAfterEmpty: 0 is not the same as leaving empty nodes alone).
// Required fields are plain values.
package v1alpha5

import "k8s.io/apimachinery/pkg/runtime/schema"

var (
	// ProvisionerGroupVersion is the group and version of Provisioner.
	ProvisionerGroupVersion = schema.GroupVersion{Group: "karpenter.sh", Version: "v1alpha5"}

	// AWSNodeTemplateGroupVersion is the group and version of AWSNodeTemplate. Note the
	// version: v1alpha1, not v1alpha5.
	AWSNodeTemplateGroupVersion = schema.GroupVersion{Group: "karpenter.k8s.aws", Version: "v1alpha1"}
)

// Kind names of the types in this package, as they appear in a manifest's `kind:` field.
const (
	ProvisionerKind     = "Provisioner"
	AWSNodeTemplateKind = "AWSNodeTemplate"
)
