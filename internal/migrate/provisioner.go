package migrate

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/karpool/karpool/api/legacy/v1alpha5"
)

// webhookDefault is a requirement the v0.31 AWS defaulting webhook added to a Provisioner unless
// one of skipIf was already constrained (by a requirement or a label).
type webhookDefault struct {
	key      string
	operator string
	values   []string
	skipIf   []string
}

var webhookDefaults = []webhookDefault{
	{labelCapacityType, "In", []string{"on-demand"}, []string{labelCapacityType}},
	{"kubernetes.io/arch", "In", []string{"amd64"}, []string{"kubernetes.io/arch", "beta.kubernetes.io/arch"}},
	{"kubernetes.io/os", "In", []string{"linux"}, []string{"kubernetes.io/os", "beta.kubernetes.io/os"}},
	{"karpenter.k8s.aws/instance-category", "In", []string{"c", "m", "r"},
		[]string{"node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-category"}},
	{"karpenter.k8s.aws/instance-generation", "Gt", []string{"2"},
		[]string{"node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation"}},
}

// convertProvisioner turns a karpenter.sh/v1alpha5 Provisioner into a v1 NodePool, in place, and
// an inline provider block into an EC2NodeClass written right after it.
func (m *migrator) convertProvisioner(d docRef) {
	var p v1alpha5.Provisioner
	if !m.decodeStrict(d, &p) {
		return
	}
	root := d.c.root()
	specKey, spec, _ := get(root, "spec")
	spec = mapping(spec)
	owner := fmt.Sprintf("Provisioner %q", d.name)
	if spec == nil {
		m.errorf(d.f, lineOf(specKey, root), "%s has no spec; it needs at least a provider or providerRef", owner)
		return
	}
	hasProvider := p.Spec.Provider != nil && len(p.Spec.Provider.Raw) > 0 && string(p.Spec.Provider.Raw) != "null"
	if hasProvider {
		var aws v1alpha5.AWS
		if !m.decodeStrictRaw(d, p.Spec.Provider.Raw, "spec.provider", &aws,
			" (the inline provider knew amiFamily, context, instanceProfile, subnetSelector, securityGroupSelector, tags, launchTemplate, metadataOptions and blockDeviceMappings; userData, amiSelector and detailedMonitoring need an AWSNodeTemplate)") {
			return
		}
	}
	switch {
	case hasProvider && p.Spec.ProviderRef != nil:
		m.errorf(d.f, pathLine(root, "spec.providerRef"), "%s sets both provider and providerRef; keep one", owner)
		return
	case !hasProvider && p.Spec.ProviderRef == nil:
		m.errorf(d.f, lineOf(specKey), "%s has neither provider nor providerRef, so there is nothing to build its EC2NodeClass from (subnets, security groups); add one", owner)
		return
	}
	consolidate := p.Spec.Consolidation != nil && p.Spec.Consolidation.Enabled != nil && *p.Spec.Consolidation.Enabled
	if consolidate && p.Spec.TTLSecondsAfterEmpty != nil {
		m.errorf(d.f, pathLine(root, "spec.ttlSecondsAfterEmpty"), "%s sets both ttlSecondsAfterEmpty and consolidation.enabled, which v1alpha5 rejected; keep one", owner)
		return
	}

	setAPI(root, apiV1, kindNodePool)
	m.stripLive(d)

	pl := &pool{name: d.name, f: d.f, c: d.c, line: lineOf(val(root, "kind"))}
	tmeta, tspec := newMap(), newMap()
	var limitsK, limitsV, weightK, weightV, ttlEmptyK, ttlEmptyV, consK *yaml.Node
	expireSet := false
	for i := 0; i+1 < len(spec.Content); i += 2 {
		k, v := spec.Content[i], spec.Content[i+1]
		if isNull(v) {
			continue // an explicit null is the same as leaving the field out
		}
		switch k.Value {
		case "annotations":
			m.renameDisruptionAnnotations(d.f, v, "NodePool "+fmt.Sprintf("%q", d.name)+" template")
			setPair(tmeta, k, v)
		case "labels":
			m.checkLabels(d.f, v)
			setPair(tmeta, k, v)
		case "taints", "startupTaints":
			setPair(tspec, k, v)
		case "requirements":
			m.checkRequirements(d.f, v)
			setPair(tspec, k, v)
		case "kubeletConfiguration":
			m.kubeletV1(d.f, v)
			pl.kubelet, pl.kubeletLine = v, k.Line
		case "provider":
			className := m.uniqueClassName(d.name)
			if className != d.name {
				m.warn(d.f, k.Line, "%s: the EC2NodeClass made from its provider block is named %q because %q is taken by another node class", owner, className, d.name)
			}
			m.convertAWSSpec(d.f, v, false, k.Line, owner+" provider")
			classRoot := newMap(pairs(
				"apiVersion", apiAWSV1,
				"kind", kindEC2NodeClass,
				"metadata", newMap(pairs("name", className)...),
				"spec", v)...)
			d.c.after = append(d.c.after, &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{classRoot}})
			m.addClass(&class{name: className, f: d.f, c: d.c, root: classRoot, inline: true})
			ref := newMap(pairs("group", groupAWS, "kind", kindEC2NodeClass, "name", className)...)
			nk := newKey("nodeClassRef")
			mergeComments(nk, k)
			setPair(tspec, nk, ref)
			pl.className, pl.refName = className, val(ref, "name")
		case "providerRef":
			refMap := mapping(v)
			if kind := str(refMap, "kind"); kind != "" && kind != kindAWSNodeTemplate {
				m.errorf(d.f, k.Line, "%s: providerRef kind %q is not AWSNodeTemplate; only AWS node templates can be migrated", owner, kind)
				return
			}
			if av := str(refMap, "apiVersion"); av != "" && av != apiAWSV1alpha1 {
				m.warn(d.f, k.Line, "%s: providerRef apiVersion %q is unusual (expected %s); it now refers to the EC2NodeClass %q", owner, av, apiAWSV1alpha1, p.Spec.ProviderRef.Name)
			}
			nameNode := val(refMap, "name")
			if nameNode == nil || nameNode.Kind != yaml.ScalarNode || nameNode.Value == "" {
				m.errorf(d.f, k.Line, "%s: providerRef has no name", owner)
				return
			}
			ref := newMap(pairs("group", groupAWS, "kind", kindEC2NodeClass)...)
			ref.Content = append(ref.Content, newKey("name"), nameNode)
			rename(k, "nodeClassRef")
			setPair(tspec, k, ref)
			pl.className, pl.refName = nameNode.Value, nameNode
		case "ttlSecondsAfterEmpty":
			ttlEmptyK, ttlEmptyV = k, v
		case "ttlSecondsUntilExpired":
			if p.Spec.TTLSecondsUntilExpired == nil {
				continue
			}
			rename(k, "expireAfter")
			setScalar(v, secondsDuration(*p.Spec.TTLSecondsUntilExpired), "!!str")
			setPair(tspec, k, v)
			expireSet = true
		case "limits":
			rk, rv, _ := get(mapping(v), "resources")
			if isNull(rv) {
				continue
			}
			mergeComments(k, rk)
			limitsK, limitsV = k, rv
		case "weight":
			weightK, weightV = k, v
		case "consolidation":
			consK = k
		}
	}

	// Requirements the old webhook added implicitly.
	reqsKey, reqs, _ := get(tspec, "requirements")
	var added []string
	for _, def := range webhookDefaults {
		if constrained(&p.Spec, def.skipIf) {
			continue
		}
		if reqs == nil || reqs.Kind != yaml.SequenceNode {
			reqs = newSeq()
			reqsKey = set(tspec, "requirements", reqs)
		}
		reqs.Content = append(reqs.Content, newMap(pairs("key", def.key, "operator", def.operator, "values", flowStrings(def.values...))...))
		added = append(added, fmt.Sprintf("%s %s [%s]", def.key, def.operator, strings.Join(def.values, ",")))
	}
	if reqs == nil {
		// Every key was fixed by a label; v1 still wants the (empty) list.
		set(tspec, "requirements", newSeq())
	}
	if len(added) > 0 {
		m.warn(d.f, lineOf(reqsKey, specKey), "%s: requirements the v1alpha5 webhook added implicitly are written out: %s", owner, strings.Join(added, "; "))
	}
	if !expireSet {
		set(tspec, "expireAfter", newStr("Never"))
		m.warn(d.f, lineOf(specKey), "%s has no ttlSecondsUntilExpired, so its nodes never expired: expireAfter: Never written out (v1 would default to 720h)", owner)
	}

	disruption := newMap()
	dk := newKey("disruption")
	switch {
	case consolidate:
		disruption.Content = pairs("consolidationPolicy", "WhenEmptyOrUnderutilized", "consolidateAfter", "0s")
		mergeComments(dk, consK)
	case ttlEmptyK != nil:
		disruption.Content = pairs("consolidationPolicy", "WhenEmpty")
		rename(ttlEmptyK, "consolidateAfter")
		setScalar(ttlEmptyV, secondsDuration(*p.Spec.TTLSecondsAfterEmpty), "!!str")
		disruption.Content = append(disruption.Content, ttlEmptyK, ttlEmptyV)
	default:
		disruption.Content = pairs("consolidationPolicy", "WhenEmpty", "consolidateAfter", "Never")
		mergeComments(dk, consK)
		m.warn(d.f, lineOf(consK, specKey), "%s has neither ttlSecondsAfterEmpty nor consolidation enabled, so its nodes were never removed for being empty or underused: consolidateAfter: Never written out (v1 would default to WhenEmptyOrUnderutilized after 0s)", owner)
	}

	template := newMap()
	if len(tmeta.Content) > 0 {
		template.Content = append(template.Content, newKey("metadata"), tmeta)
	}
	template.Content = append(template.Content, newKey("spec"), tspec)
	newSpec := newMap(newKey("template"), template, dk, disruption)
	if limitsK != nil {
		rename(limitsK, "limits")
		newSpec.Content = append(newSpec.Content, limitsK, limitsV)
	}
	if weightK != nil {
		newSpec.Content = append(newSpec.Content, weightK, weightV)
	}
	set(root, "spec", newSpec)
	m.pools = append(m.pools, pl)
}

// constrained is true when a requirement or label already mentions one of the keys.
func constrained(spec *v1alpha5.ProvisionerSpec, keys []string) bool {
	for _, k := range keys {
		if _, ok := spec.Labels[k]; ok {
			return true
		}
		for _, r := range spec.Requirements {
			if r.Key == k {
				return true
			}
		}
	}
	return false
}
