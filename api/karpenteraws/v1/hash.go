package v1

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// The annotations Karpenter puts on an EC2NodeClass and on each NodeClaim launched from it: the
// hash of the class's static fields and the version of the hashing. A NodeClaim whose hash
// differs from its class's under the same version has drifted; under another version (or none)
// it is re-stamped, not drifted.
const (
	AnnotationEC2NodeClassHash        = "karpenter.k8s.aws/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion = "karpenter.k8s.aws/ec2nodeclass-hash-version"
	// EC2NodeClassHashVersion is karpool's: its hash is not Karpenter's, so a cluster moving
	// between the two re-stamps its NodeClaims instead of replacing every node.
	EC2NodeClassHashVersion = "karpool-v1"
)

// Hash hashes what of the class a running instance cannot follow without being replaced: the
// spec (Karpenter's static fields) without the selector terms — drift compares the subnets,
// security groups and AMIs they resolve to with the instance instead — nor ipPrefixCount, and
// with the AMI family as resolved (amiFamily or the alias's), so writing out the family an
// alias implies does not replace every node. Block device mappings and network interfaces count
// as sets.
func (nc *EC2NodeClass) Hash() string {
	spec := *nc.Spec.DeepCopy()
	spec.SubnetSelectorTerms, spec.SecurityGroupSelectorTerms, spec.CapacityReservationSelectorTerms = nil, nil, nil
	spec.AMISelectorTerms, spec.AMIFamily, spec.IPPrefixCount = nil, nil, nil
	devices, nics := asSet(spec.BlockDeviceMappings), asSet(spec.NetworkInterfaces)
	spec.BlockDeviceMappings, spec.NetworkInterfaces = nil, nil
	b, _ := json.Marshal(struct {
		Spec                EC2NodeClassSpec
		Family              string
		BlockDeviceMappings []string
		NetworkInterfaces   []string
	}{spec, nc.resolvedFamily(), devices, nics})
	sum := sha256.Sum256(b)
	return strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
}

// resolvedFamily is the AMI family in lower case: amiFamily, else the family of the first
// alias term ("al2023@latest" → "al2023"), else "".
func (nc *EC2NodeClass) resolvedFamily() string {
	if nc.Spec.AMIFamily != nil {
		return strings.ToLower(*nc.Spec.AMIFamily)
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			family, _, _ := strings.Cut(t.Alias, "@")
			return strings.ToLower(family)
		}
	}
	return ""
}

// asSet encodes each element and sorts the encodings (the order of the list does not count).
func asSet[T any](items []T) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		b, _ := json.Marshal(it)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}
