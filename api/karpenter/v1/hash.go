package v1

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
)

// The annotations Karpenter puts on a NodePool and on each NodeClaim it creates: the hash of the
// NodePool's template, and the version of the hashing. A NodeClaim whose hash differs from its
// NodePool's under the same version has drifted; under another version it is re-stamped, not
// drifted (how Karpenter moves between hash versions).
const (
	AnnotationNodePoolHash        = "karpenter.sh/nodepool-hash"
	AnnotationNodePoolHashVersion = "karpenter.sh/nodepool-hash-version"
	// NodePoolHashVersion is karpool's: its hash is not Karpenter's (another function over the
	// same fields), so a cluster moving between the two re-stamps its NodeClaims instead of
	// replacing every node.
	NodePoolHashVersion = "karpool-v1"
)

// TemplateHash hashes what of the template a running node cannot follow without being
// replaced: labels, annotations, taints, startup taints, node class reference, expireAfter and
// terminationGracePeriod (Karpenter's hashed fields). Requirements are not hashed: a node that
// no longer meets them is drifted by a check of its labels instead. Taints count as a set.
func (np *NodePool) TemplateHash() string {
	t := np.Spec.Template
	sorted := func(ts []Taint) []Taint {
		out := slices.Clone(ts)
		slices.SortFunc(out, func(a, b Taint) int {
			return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value), cmp.Compare(string(a.Effect), string(b.Effect)))
		})
		return out
	}
	// encoding/json writes map keys sorted, so equal templates encode equally.
	b, _ := json.Marshal(struct {
		Labels        map[string]labelValue
		Annotations   map[string]string
		Taints        []Taint
		StartupTaints []Taint
		NodeClassRef  *NodeClassReference
		TGP           any
		ExpireAfter   *NillableDuration
	}{t.Labels, t.Annotations, sorted(t.Spec.Taints), sorted(t.Spec.StartupTaints), t.Spec.NodeClassRef, t.Spec.TerminationGracePeriod, t.Spec.ExpireAfter})
	sum := sha256.Sum256(b)
	return strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
}
