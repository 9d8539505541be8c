// Package migrate converts Karpenter manifests of the retired APIs to the v1 API that karpool
// speaks: karpenter.sh/v1alpha5 Provisioner (with an inline `provider:` block or a
// karpenter.k8s.aws/v1alpha1 AWSNodeTemplate), karpenter.sh/v1beta1 NodePool and NodeClaim, and
// karpenter.k8s.aws/v1beta1 EC2NodeClass become karpenter.sh/v1 NodePool/NodeClaim and
// karpenter.k8s.aws/v1 EC2NodeClass, following the migration rules of DESIGN.md section 5.
//
// It is pure: bytes in, bytes and diagnostics out. The YAML is edited as a tree (kyaml's RNode,
// which wraps go-yaml v3 nodes) rather than decoded into structs and re-encoded, so key order and
// comments survive; documents that need no change (v1 manifests, Deployments, ...) are copied
// byte for byte. Old documents are first decoded strictly into the legacy Go shapes
// (api/legacy), so a field the old API did not have is an error rather than silently lost.
//
// Several files may be migrated together (Files): a pool's kubelet block moves into the
// EC2NodeClass it references, and a Provisioner's providerRef names an AWSNodeTemplate, and those
// may live in other files.
//
// # Rules
//
// Provisioner (v1alpha5) → NodePool, in place:
//   - labels, annotations → template.metadata; taints, startupTaints, requirements →
//     template.spec; limits.resources → limits; weight kept.
//   - Requirements the v0.31 defaulting webhook added implicitly are written out (warning):
//     karpenter.sh/capacity-type In [on-demand], kubernetes.io/arch In [amd64],
//     kubernetes.io/os In [linux], instance-category In [c,m,r] (unless instance type, family or
//     category is constrained), instance-generation Gt [2] (unless instance type, family or
//     generation is). A key fixed by a label counts as constrained.
//   - ttlSecondsAfterEmpty N → WhenEmpty + consolidateAfter N (as "30s", "5m", "1h");
//     consolidation.enabled → WhenEmptyOrUnderutilized + 0s; neither → WhenEmpty + Never
//     (warning); both → error.
//   - ttlSecondsUntilExpired N → template.spec.expireAfter; absent → Never (warning).
//   - providerRef → nodeClassRef {group: karpenter.k8s.aws, kind: EC2NodeClass, name}.
//   - provider → a new EC2NodeClass named after the provisioner (suffixed if taken), written after
//     the NodePool.
//   - kubeletConfiguration → the EC2NodeClass's kubelet (containerRuntime dropped with a
//     warning; reserved and eviction values become strings).
//   - do-not-evict / do-not-consolidate annotations → karpenter.sh/do-not-disrupt (warning);
//     requirement or label karpenter.sh/provisioner-name removed (warning); keys v1 restricts
//     (other karpenter.sh keys, unknown karpenter.k8s.aws keys) are errors.
//
// AWSNodeTemplate (v1alpha1) or inline provider → EC2NodeClass:
//   - subnetSelector, securityGroupSelector → selector terms: tags, with aws-ids / aws::ids
//     becoming one id term each; "" (old wildcard) → "*" and comma lists flagged (warnings).
//   - amiFamily X without amiSelector → amiSelectorTerms [{alias: x@latest}]; no amiFamily meant
//     AL2 (warning); amiSelector → amiSelectorTerms (aws::ids, aws::name, aws::owners understood)
//     with amiFamily kept or written out; Ubuntu, Custom without selector → error.
//   - no instanceProfile → placeholder role KarpenterNodeRole-<cluster from the discovery tag>
//     (warning); metadataOptions' implicit hop limit 2 written out (warning); reserved tags
//     (kubernetes.io/cluster/*, ...) dropped (warning); volumeSize normalised to Gi (warning);
//     launchTemplate → error.
//
// NodePool (v1beta1), in place:
//   - nodeClassRef.apiVersion → group (kind added if missing); disruption.expireAfter →
//     template.spec.expireAfter; WhenUnderutilized (or no policy) → WhenEmptyOrUnderutilized
//     with consolidateAfter 0s; template.spec.kubelet → the EC2NodeClass's kubelet;
//     template.spec.resources dropped (warning).
//
// EC2NodeClass (v1beta1), in place: amiFamily without amiSelectorTerms → alias; the implicit hop
// limit 2 written out (warning); Ubuntu → error.
//
// Kubelet placement: pools sharing a class with different kubelet settings split it: the class
// stays with one group and copies named <class>-<pool> are written after it (warnings on the
// pools and the class). A class that is not among the inputs, or whose name is defined more than
// once, cannot receive a kubelet block (error).
//
// Other documents: do-not-evict / do-not-consolidate annotations (object and pod template) and
// karpenter.sh/provisioner-name node selectors and affinities are renamed (warnings); everything
// else is copied verbatim. Live-object fields (status, uid, resourceVersion, managedFields, ...)
// are dropped from converted documents (warning). Anchors and aliases in documents to convert,
// v1alpha5 Machines, unknown Karpenter API versions and old documents inside a List are errors.
package migrate
