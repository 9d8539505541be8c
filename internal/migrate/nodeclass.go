package migrate

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/karpool/karpool/api/legacy/v1alpha5"
	"github.com/karpool/karpool/api/legacy/v1beta1"
)

// convertEC2NodeClassV1beta1 rewrites a karpenter.k8s.aws/v1beta1 EC2NodeClass in place.
func (m *migrator) convertEC2NodeClassV1beta1(d docRef) {
	var nc v1beta1.EC2NodeClass
	if !m.decodeStrict(d, &nc) {
		return
	}
	root := d.c.root()
	setAPI(root, apiAWSV1, "")
	m.stripLive(d)
	specKey, spec, _ := get(root, "spec")
	spec = mapping(spec)
	if spec == nil {
		m.errorf(d.f, lineOf(specKey, root), "EC2NodeClass %q has no spec", d.name)
		return
	}
	famKey, famVal, famIdx := get(spec, "amiFamily")
	family := ""
	if famVal != nil {
		family = famVal.Value
		if !m.checkFamily(d.f, famVal.Line, family) {
			return
		}
	}
	if len(nc.Spec.AMISelectorTerms) == 0 {
		switch {
		case family == "":
			m.errorf(d.f, lineOf(specKey), "EC2NodeClass %q has neither amiFamily nor amiSelectorTerms (v1beta1 required amiFamily); add amiSelectorTerms, e.g. [{alias: al2023@latest}]", d.name)
			return
		case family == "Custom":
			m.errorf(d.f, famVal.Line, "EC2NodeClass %q: amiFamily Custom needs amiSelectorTerms naming the AMIs", d.name)
			return
		}
		// v1beta1 used the newest EKS-optimised AMI of the family; v1 spells that as an alias,
		// which also implies the family.
		del(spec, "amiFamily")
		k := newKey("amiSelectorTerms")
		mergeComments(k, famKey)
		k.LineComment = joinComment(k.LineComment, famVal.LineComment)
		insertAt(spec, famIdx, k, aliasTerms(aliasFamilies[family]))
	} else if family == "" {
		m.errorf(d.f, lineOf(specKey), "EC2NodeClass %q: amiFamily is required with amiSelectorTerms that name AMIs (it decides the bootstrap format); add it", d.name)
		return
	}
	m.hopLimitDefault(d.f, spec, lineOf(specKey), "v1beta1")
	m.addClass(&class{name: d.name, f: d.f, c: d.c, root: root})
}

// convertAWSNodeTemplate rewrites a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate in place into an
// EC2NodeClass of the same name.
func (m *migrator) convertAWSNodeTemplate(d docRef) {
	var t v1alpha5.AWSNodeTemplate
	if !m.decodeStrict(d, &t) {
		return
	}
	root := d.c.root()
	setAPI(root, apiAWSV1, kindEC2NodeClass)
	m.stripLive(d)
	specKey, spec, _ := get(root, "spec")
	if mapping(spec) == nil {
		m.errorf(d.f, lineOf(specKey, root), "AWSNodeTemplate %q has no spec: subnetSelector and securityGroupSelector are needed", d.name)
		return
	}
	m.convertAWSSpec(d.f, spec, t.Spec.AMISelector != nil, lineOf(specKey, root), "AWSNodeTemplate "+fmt.Sprintf("%q", d.name))
	m.addClass(&class{name: d.name, f: d.f, c: d.c, root: root})
}

// convertAWSSpec rewrites the v1alpha5-era AWS provider settings (an inline provider block or an
// AWSNodeTemplate spec) into an EC2NodeClass spec, in place.
func (m *migrator) convertAWSSpec(f *file, spec *yaml.Node, hasAMISelector bool, line int, owner string) {
	spec = mapping(spec)
	if spec == nil {
		m.errorf(f, line, "%s must be a mapping of AWS settings", owner)
		return
	}
	familySet := false
	var subnets, groups *yaml.Node
	for i := 0; i+1 < len(spec.Content); {
		k, v := spec.Content[i], spec.Content[i+1]
		switch k.Value {
		case "apiVersion", "kind":
			// The provider's own type meta (extensions.karpenter.sh/v1alpha1 AWS) has no place in v1.
			spec.Content = append(spec.Content[:i], spec.Content[i+2:]...)
			continue
		case "amiFamily":
			familySet = true
			family := v.Value
			if !m.checkFamily(f, v.Line, family) {
				break
			}
			if hasAMISelector {
				break
			}
			if family == "Custom" {
				m.errorf(f, v.Line, "%s: amiFamily Custom needs an amiSelector naming the AMIs", owner)
				break
			}
			// "amiFamily X without AMI selector → alias x@latest": the old controller used the
			// newest EKS-optimised AMI of the family, which is what the alias selects.
			lc := v.LineComment
			rename(k, "amiSelectorTerms")
			k.LineComment = joinComment(k.LineComment, lc)
			spec.Content[i+1] = aliasTerms(aliasFamilies[family])
		case "amiSelector":
			rename(k, "amiSelectorTerms")
			spec.Content[i+1] = m.amiTerms(f, v, owner)
		case "subnetSelector":
			rename(k, "subnetSelectorTerms")
			subnets = v
			spec.Content[i+1] = m.selectorTerms(f, v, owner, "subnetSelector")
		case "securityGroupSelector":
			rename(k, "securityGroupSelectorTerms")
			groups = v
			spec.Content[i+1] = m.selectorTerms(f, v, owner, "securityGroupSelector")
		case "tags":
			m.dropRestrictedTags(f, v)
		case "launchTemplate":
			m.errorf(f, k.Line, "%s: launchTemplate %q cannot be migrated: v1 always generates the launch template; move what it sets (AMI, security groups, user data, block devices, metadata options) into the EC2NodeClass fields and remove launchTemplate", owner, v.Value)
		case "blockDeviceMappings":
			m.fixVolumeSizes(f, v)
		}
		i += 2
	}
	if !familySet {
		if hasAMISelector {
			_, _, at := get(spec, "amiSelectorTerms")
			insertAt(spec, at, newKey("amiFamily"), newStr("AL2"))
			m.warn(f, line, "%s: amiFamily was not set, which meant AL2; amiFamily: AL2 written out (v1 requires it next to AMI selector terms)", owner)
		} else {
			prepend(spec, newKey("amiSelectorTerms"), aliasTerms("al2"))
			m.warn(f, line, "%s: amiFamily was not set, which meant AL2 with the newest EKS-optimised AMI; written out as amiSelectorTerms alias al2@latest (consider al2023@latest: Amazon Linux 2 is at end of life)", owner)
		}
	}
	if subnets == nil {
		m.errorf(f, line, "%s has no subnetSelector; v1 needs subnetSelectorTerms (for example tags karpenter.sh/discovery: <cluster>)", owner)
	}
	if groups == nil {
		m.errorf(f, line, "%s has no securityGroupSelector; v1 needs securityGroupSelectorTerms (for example tags karpenter.sh/discovery: <cluster>)", owner)
	}
	if v := val(spec, "instanceProfile"); isNull(v) {
		del(spec, "instanceProfile")
		role := "KarpenterNodeRole-" + clusterName(subnets, groups)
		_, _, at := get(spec, "tags")
		insertAt(spec, at, newKey("role"), newStr(role))
		m.warn(f, line, "%s sets no instanceProfile, so nodes used the controller's default instance profile (aws.defaultInstanceProfile), which v1 does not have: wrote the placeholder role %q; set it to the node IAM role name (or set instanceProfile instead)", owner, role)
	}
	m.hopLimitDefault(f, spec, line, "v1alpha5")
}

// clusterName guesses the cluster name from a karpenter.sh/discovery selector, for the placeholder
// node role name (KarpenterNodeRole-<cluster> is the name the Karpenter guides use).
func clusterName(selectors ...*yaml.Node) string {
	for _, s := range selectors {
		if v := str(mapping(s), "karpenter.sh/discovery"); v != "" && v != "*" {
			return v
		}
	}
	return "CLUSTER_NAME"
}

// idKeys are the reserved selector keys that selected by ID rather than by tag.
var idKeys = []string{"aws-ids", "aws::ids"}

// selectorTerms converts a v1alpha5 subnet or security group selector map into v1 selector
// terms: reserved ID keys become one id term per ID, the other keys one tags term.
func (m *migrator) selectorTerms(f *file, sel *yaml.Node, owner, what string) *yaml.Node {
	sel = mapping(sel)
	terms := newSeq()
	if sel == nil {
		return terms
	}
	var ids []string
	idLine := 0
	tags := newMap()
	for i := 0; i+1 < len(sel.Content); i += 2 {
		k, v := sel.Content[i], sel.Content[i+1]
		if isIDKey(k.Value) {
			ids = append(ids, splitList(v.Value)...)
			idLine = k.Line
			continue
		}
		if strings.HasPrefix(k.Value, "aws::") {
			m.warn(f, k.Line, "%s.%s: unknown reserved key, kept as a tag match", what, k.Value)
		}
		m.fixTagValue(f, what, k, v)
		tags.Content = append(tags.Content, k, v)
	}
	for _, id := range ids {
		terms.Content = append(terms.Content, newMap(pairs("id", id)...))
	}
	switch {
	case len(ids) > 0 && len(tags.Content) > 0:
		m.warn(f, idLine, "%s: %s combines IDs with tags, which v1 terms cannot do (an id term stands alone): kept the %d id term(s) and dropped the tag match", owner, what, len(ids))
	case len(tags.Content) > 0:
		terms.Content = append(terms.Content, newMap(newKey("tags"), tags))
	}
	if len(terms.Content) == 0 {
		m.errorf(f, lineOf(sel), "%s: %s is empty; v1 needs at least one selector term", owner, what)
	}
	return terms
}

// fixTagValue adapts one tag selector value: "" (the old wildcard) becomes "*", and comma lists
// are flagged because v1 matches them literally.
func (m *migrator) fixTagValue(f *file, what string, k, v *yaml.Node) {
	if v.Kind != yaml.ScalarNode {
		return
	}
	if v.Tag != "!!str" {
		v.Tag, v.Style = "!!str", 0
	}
	switch {
	case v.Value == "":
		setScalar(v, "*", "!!str")
		m.warn(f, k.Line, "%s.%s: an empty value was the v1alpha5 wildcard; written as \"*\"", what, k.Value)
	case strings.Contains(v.Value, ","):
		m.warn(f, k.Line, "%s.%s: value %q contains commas; v1 matches it as one literal tag value, not as a list of alternatives (write one term per value if that was meant)", what, k.Value, v.Value)
	}
}

func isIDKey(k string) bool {
	for _, id := range idKeys {
		if k == id {
			return true
		}
	}
	return false
}

// amiTerms converts a v1alpha1 amiSelector map into amiSelectorTerms: aws::ids / aws-ids become
// id terms, aws::name a name, aws::owners one term per owner, other keys tags.
func (m *migrator) amiTerms(f *file, sel *yaml.Node, owner string) *yaml.Node {
	sel = mapping(sel)
	terms := newSeq()
	if sel == nil {
		return terms
	}
	var ids, owners []string
	var name *yaml.Node
	idLine := 0
	tags := newMap()
	for i := 0; i+1 < len(sel.Content); i += 2 {
		k, v := sel.Content[i], sel.Content[i+1]
		switch k.Value {
		case "aws::ids", "aws-ids":
			ids = append(ids, splitList(v.Value)...)
			idLine = k.Line
		case "aws::name":
			name = v
			if v.Tag != "!!str" {
				v.Tag, v.Style = "!!str", 0
			}
		case "aws::owners":
			owners = append(owners, splitList(v.Value)...)
		default:
			m.fixTagValue(f, "amiSelector", k, v)
			tags.Content = append(tags.Content, k, v)
		}
	}
	for _, id := range ids {
		terms.Content = append(terms.Content, newMap(pairs("id", id)...))
	}
	if len(ids) > 0 {
		if name != nil || len(owners) > 0 || len(tags.Content) > 0 {
			m.warn(f, idLine, "%s: amiSelector combines aws::ids with other keys, which v1 terms cannot do (an id term stands alone): kept the id term(s), dropped the rest", owner)
		}
		return terms
	}
	base := func() *yaml.Node {
		t := newMap()
		if len(tags.Content) > 0 {
			t.Content = append(t.Content, newKey("tags"), deepCopy(tags))
		}
		if name != nil {
			t.Content = append(t.Content, newKey("name"), deepCopy(name))
		}
		return t
	}
	if name == nil && len(tags.Content) == 0 {
		m.errorf(f, lineOf(sel), "%s: amiSelector has no tags, name or ids; v1 AMI terms need one of them", owner)
		return terms
	}
	if len(owners) == 0 {
		terms.Content = append(terms.Content, base())
		return terms
	}
	for _, o := range owners {
		t := base()
		t.Content = append(t.Content, newKey("owner"), newStr(o))
		terms.Content = append(terms.Content, t)
	}
	return terms
}

var v1VolumeSize = regexp.MustCompile(`^[0-9]+(Gi|G|Ti|T)$`)

// fixVolumeSizes makes every ebs.volumeSize a string with a G/Gi/T/Ti suffix, as v1 demands
// (v1alpha1 also took plain numbers and other units).
func (m *migrator) fixVolumeSizes(f *file, bdms *yaml.Node) {
	if bdms == nil || bdms.Kind != yaml.SequenceNode {
		return
	}
	for _, bdm := range bdms.Content {
		k, v, _ := get(mapping(val(mapping(bdm), "ebs")), "volumeSize")
		if v == nil || v.Kind != yaml.ScalarNode {
			continue
		}
		if v1VolumeSize.MatchString(v.Value) {
			if v.Tag != "!!str" {
				v.Tag, v.Style = "!!str", 0
			}
			continue
		}
		q, err := resource.ParseQuantity(v.Value)
		if err != nil || q.Sign() <= 0 {
			m.errorf(f, k.Line, "ebs.volumeSize %q is not a valid size; write it like 20Gi", v.Value)
			continue
		}
		// AsDec gives unscaled * 10^-scale; compute ceil(bytes / Gi) on the exact value.
		dec := q.AsDec()
		scale := dec.Scale()
		if scale > 30 || scale < -30 {
			m.errorf(f, k.Line, "ebs.volumeSize %q is not a sensible size; write it like 20Gi", v.Value)
			continue
		}
		gi := new(big.Int).Lsh(big.NewInt(1), 30)
		bytes := dec.UnscaledBig()
		num := new(big.Int).Set(bytes)
		den := new(big.Int).Set(gi)
		if scale > 0 {
			den.Mul(den, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
		} else if scale < 0 {
			num.Mul(num, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-scale)), nil))
		}
		n, rem := new(big.Int).QuoRem(num, den, new(big.Int))
		exact := rem.Sign() == 0
		if !exact {
			n.Add(n, big.NewInt(1))
		}
		out := n.String() + "Gi"
		setScalar(v, out, "!!str")
		if exact {
			m.warn(f, k.Line, "ebs.volumeSize %s written as %s (v1 only accepts G, Gi, T and Ti units)", q.String(), out)
		} else {
			m.warn(f, k.Line, "ebs.volumeSize %s is not a whole number of GiB (a plain number is read as bytes); written as %s, check the intended size", q.String(), out)
		}
	}
}
