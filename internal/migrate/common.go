package migrate

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Annotations and labels that changed names.
const (
	annotationDoNotEvict       = "karpenter.sh/do-not-evict"
	annotationDoNotConsolidate = "karpenter.sh/do-not-consolidate"
	annotationDoNotDisrupt     = "karpenter.sh/do-not-disrupt"
	labelProvisionerName       = "karpenter.sh/provisioner-name"
	labelNodePool              = "karpenter.sh/nodepool"
	labelCapacityType          = "karpenter.sh/capacity-type"
	labelLastApplied           = "kubectl.kubernetes.io/last-applied-configuration"
)

// setAPI rewrites apiVersion and kind in place.
func setAPI(root *yaml.Node, apiVersion, kind string) {
	if v := val(root, "apiVersion"); v != nil {
		setScalar(v, apiVersion, "!!str")
	} else {
		prepend(root, newKey("apiVersion"), newStr(apiVersion))
	}
	if kind == "" {
		return
	}
	if v := val(root, "kind"); v != nil {
		setScalar(v, kind, "!!str")
	}
}

// stripLive removes what the API server adds to stored objects (a `kubectl get -o yaml` dump) and
// what must not be sent when creating the v1 object: status, uid, resourceVersion, generation,
// creationTimestamp, managedFields, selfLink, and the last-applied annotation (it holds the old
// manifest).
func (m *migrator) stripLive(d docRef) {
	root := d.c.root()
	var dropped []string
	line := 0
	note := func(k *yaml.Node, what string) {
		dropped = append(dropped, what)
		if line == 0 || (k.Line > 0 && k.Line < line) {
			line = k.Line
		}
	}
	md := mapping(val(root, "metadata"))
	for _, key := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		if k, _ := del(md, key); k != nil {
			note(k, "metadata."+key)
		}
	}
	if ann := mapping(val(md, "annotations")); ann != nil {
		if k, _ := del(ann, labelLastApplied); k != nil {
			note(k, "the "+labelLastApplied+" annotation")
		}
		if len(ann.Content) == 0 {
			del(md, "annotations")
		}
	}
	if k, _ := del(root, "status"); k != nil {
		note(k, "status")
	}
	if len(dropped) > 0 {
		m.warn(d.f, line, "%s %q looks like a dump of a live object: dropped %s", d.kind, d.name, strings.Join(dropped, ", "))
	}
}

// checkLabelKeys validates the label keys of a NodePool template (labels or requirement keys)
// against the v1 rules. Keys v1 rejects are errors, except karpenter.sh/provisioner-name, which
// is removed with a warning (v1 sets karpenter.sh/nodepool itself). It returns the keys to drop.
func (m *migrator) badLabelKey(f *file, line int, what, key string) (drop bool) {
	switch {
	case key == labelProvisionerName:
		m.warn(f, line, "%s %s removed: v1 has no provisioners; every node carries %s=<pool name> set by the controller, and a NodePool may not constrain it", what, key, labelNodePool)
		return true
	case key == labelNodePool || key == "kubernetes.io/hostname":
		m.errorf(f, line, "%s %s is not allowed in a v1 NodePool (the controller sets it); remove it", what, key)
	case domainOf(key) == groupKarpenter || strings.HasSuffix(domainOf(key), "."+groupKarpenter):
		if key != labelCapacityType {
			m.errorf(f, line, "%s %s: the karpenter.sh label domain is restricted in v1 (only %s is allowed); remove it or use your own label domain", what, key, labelCapacityType)
		}
	case domainOf(key) == groupAWS || strings.HasSuffix(domainOf(key), "."+groupAWS):
		if !slices.Contains(awsv1.WellKnownLabels, key) {
			m.errorf(f, line, "%s %s: no such karpenter.k8s.aws label in v1 (known ones: instance-category, instance-family, instance-generation, instance-size, instance-cpu, instance-memory, ...); remove or replace it", what, key)
		}
	}
	return false
}

func domainOf(key string) string {
	d, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return d
}

// checkRequirements validates the requirement keys of a pool in place, dropping
// karpenter.sh/provisioner-name.
func (m *migrator) checkRequirements(f *file, reqs *yaml.Node) {
	if reqs == nil || reqs.Kind != yaml.SequenceNode {
		return
	}
	kept := reqs.Content[:0]
	for _, r := range reqs.Content {
		k, v, _ := get(mapping(r), "key")
		if v != nil && m.badLabelKey(f, lineOf(v, k, r), "requirement key", v.Value) {
			continue
		}
		kept = append(kept, r)
	}
	reqs.Content = kept
}

// checkLabels validates template label keys in place.
func (m *migrator) checkLabels(f *file, labels *yaml.Node) {
	labels = mapping(labels)
	if labels == nil {
		return
	}
	for i := 0; i+1 < len(labels.Content); {
		k := labels.Content[i]
		if m.badLabelKey(f, k.Line, "label", k.Value) {
			labels.Content = append(labels.Content[:i], labels.Content[i+2:]...)
			continue
		}
		i += 2
	}
}

// renameDisruptionAnnotations rewrites karpenter.sh/do-not-evict and do-not-consolidate to
// karpenter.sh/do-not-disrupt in an annotation map. It returns true when it changed something.
func (m *migrator) renameDisruptionAnnotations(f *file, ann *yaml.Node, where string) bool {
	ann = mapping(ann)
	if ann == nil {
		return false
	}
	changed := false
	for _, old := range []string{annotationDoNotEvict, annotationDoNotConsolidate} {
		k, v, i := get(ann, old)
		if k == nil {
			continue
		}
		changed = true
		meaning := "it also blocks drift and expiration, not only eviction"
		if old == annotationDoNotConsolidate {
			meaning = "it also blocks drift and expiration, not only consolidation"
		}
		if _, _, j := get(ann, annotationDoNotDisrupt); j >= 0 {
			ann.Content = append(ann.Content[:i], ann.Content[i+2:]...)
			m.warn(f, k.Line, "%s: annotation %s removed (v1 ignores it; %s is already set)", where, old, annotationDoNotDisrupt)
			continue
		}
		rename(k, annotationDoNotDisrupt)
		if v.Kind == yaml.ScalarNode && v.Tag != "!!str" {
			v.Tag, v.Style = "!!str", 0
		}
		m.warn(f, k.Line, "%s: annotation %s renamed to %s (%s)", where, old, annotationDoNotDisrupt, meaning)
	}
	return changed
}

// hopLimitDefault writes out the instance metadata options the old APIs applied implicitly: hop
// limit 2 (v1 defaults to 1, which breaks pods that reach IMDS through a bridge network).
func (m *migrator) hopLimitDefault(f *file, spec *yaml.Node, line int, api string) {
	k, mo, _ := get(spec, "metadataOptions")
	if k != nil {
		line = k.Line
	}
	if isNull(mo) {
		block := newMap(pairs(
			"httpEndpoint", "enabled",
			"httpProtocolIPv6", "disabled",
			"httpPutResponseHopLimit", newInt("2"),
			"httpTokens", "required")...)
		set(spec, "metadataOptions", block)
		m.warn(f, line, "metadataOptions written out with the %s defaults (httpEndpoint enabled, httpProtocolIPv6 disabled, httpPutResponseHopLimit 2, httpTokens required): v1 defaults the hop limit to 1", api)
		return
	}
	mo = mapping(mo)
	if mo == nil {
		return
	}
	if val(mo, "httpPutResponseHopLimit") == nil {
		set(mo, "httpPutResponseHopLimit", newInt("2"))
		m.warn(f, line, "metadataOptions.httpPutResponseHopLimit: 2 written out (the %s default; v1 defaults to 1)", api)
	}
}

// aliasFamilies maps the amiFamily values that have an EKS-optimised AMI alias.
var aliasFamilies = map[string]string{
	awsv1.AMIFamilyAL2:          awsv1.AliasFamilyAL2,
	awsv1.AMIFamilyAL2023:       awsv1.AliasFamilyAL2023,
	awsv1.AMIFamilyBottlerocket: awsv1.AliasFamilyBottlerocket,
	awsv1.AMIFamilyWindows2019:  awsv1.AliasFamilyWindows2019,
	awsv1.AMIFamilyWindows2022:  awsv1.AliasFamilyWindows2022,
}

// aliasTerms is amiSelectorTerms: [{alias: family@latest}].
func aliasTerms(alias string) *yaml.Node {
	return newSeq(newMap(pairs("alias", alias+"@"+awsv1.AliasVersionLatest)...))
}

// checkFamily reports amiFamily values that v1 does not have. It returns false for them.
func (m *migrator) checkFamily(f *file, line int, family string) bool {
	switch family {
	case "Ubuntu":
		m.errorf(f, line, "amiFamily Ubuntu no longer exists in v1 (there is no Ubuntu EKS-optimised AMI support); pick AL2023, Bottlerocket, or Custom with your own amiSelectorTerms and userData")
		return false
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyCustom,
		awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022:
		return true
	}
	m.errorf(f, line, "amiFamily %q is unknown (v1 accepts AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025)", family)
	return false
}

// restrictedTag reports tag keys v1 reserves for itself.
func restrictedTag(k string) bool {
	return k == "" || k == "eks:eks-cluster-name" || strings.HasPrefix(k, "kubernetes.io/cluster") ||
		k == labelNodePool || k == "karpenter.sh/nodeclaim" || k == awsv1.LabelNodeClass
}

// dropRestrictedTags removes tags v1 reserves (Karpenter sets them itself), with a warning each.
func (m *migrator) dropRestrictedTags(f *file, tags *yaml.Node) {
	tags = mapping(tags)
	if tags == nil {
		return
	}
	for i := 0; i+1 < len(tags.Content); {
		k := tags.Content[i]
		if restrictedTag(k.Value) {
			m.warn(f, k.Line, "tag %q removed: v1 reserves it (the controller tags instances with the cluster, pool, node claim and node class itself)", k.Value)
			tags.Content = append(tags.Content[:i], tags.Content[i+2:]...)
			continue
		}
		i += 2
	}
}

// secondsDuration renders a number of seconds as a v1 duration string in the largest whole unit:
// 30 → "30s", 300 → "5m", 2592000 → "720h".
func secondsDuration(n int64) string {
	switch {
	case n != 0 && n%3600 == 0:
		return fmt.Sprintf("%dh", n/3600)
	case n != 0 && n%60 == 0:
		return fmt.Sprintf("%dm", n/60)
	}
	return fmt.Sprintf("%ds", n)
}
