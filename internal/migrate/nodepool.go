package migrate

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/karpool/karpool/api/legacy/v1beta1"
)

// convertNodePoolV1beta1 rewrites a karpenter.sh/v1beta1 NodePool in place.
func (m *migrator) convertNodePoolV1beta1(d docRef) {
	var np v1beta1.NodePool
	if !m.decodeStrict(d, &np) {
		return
	}
	root := d.c.root()
	owner := fmt.Sprintf("NodePool %q", d.name)
	specKey, spec, _ := get(root, "spec")
	spec = mapping(spec)
	template := mapping(val(spec, "template"))
	tspec := mapping(val(template, "spec"))
	if tspec == nil {
		m.errorf(d.f, lineOf(specKey, root), "%s has no spec.template.spec", owner)
		return
	}
	setAPI(root, apiV1, "")
	m.stripLive(d)

	pl := &pool{name: d.name, f: d.f, c: d.c, line: lineOf(val(root, "kind"))}
	var ok bool
	if pl.refName, ok = m.nodeClassRef(d, tspec, owner); !ok {
		return
	}
	pl.className = pl.refName.Value
	if k, v := del(tspec, "kubelet"); k != nil && !isNull(v) {
		m.kubeletV1(d.f, v)
		pl.kubelet, pl.kubeletLine = v, k.Line
	}
	if k, _ := del(tspec, "resources"); k != nil {
		m.warn(d.f, k.Line, "%s: spec.template.spec.resources removed (a NodePool may not set it; resources come from the pods)", owner)
	}
	tmeta := mapping(val(template, "metadata"))
	m.checkLabels(d.f, val(tmeta, "labels"))
	m.renameDisruptionAnnotations(d.f, val(tmeta, "annotations"), owner+" template")
	if isNull(val(tspec, "requirements")) {
		set(tspec, "requirements", newSeq()) // required in v1
	}
	m.checkRequirements(d.f, val(tspec, "requirements"))

	_, disruption, _ := get(spec, "disruption")
	disruption = mapping(disruption)
	if disruption == nil {
		// v1beta1's defaults (WhenUnderutilized, expireAfter 720h, one 10% budget) are what v1
		// defaults to as well.
		m.pools = append(m.pools, pl)
		return
	}
	if ek, ev := del(disruption, "expireAfter"); ek != nil {
		if ev.Kind == yaml.ScalarNode {
			ev.Tag = "!!str"
		}
		setPair(tspec, ek, ev)
	}
	pk, policy, pi := get(disruption, "consolidationPolicy")
	ck, after, _ := get(disruption, "consolidateAfter")
	switch {
	case policy == nil || policy.Value == string(v1beta1.ConsolidationPolicyWhenUnderutilized):
		if policy != nil {
			setScalar(policy, "WhenEmptyOrUnderutilized", "!!str")
		}
		if after == nil {
			// WhenUnderutilized acted at once; v1 needs the delay spelled out.
			at := len(disruption.Content)
			if pi >= 0 {
				at = pi + 2
			}
			insertAt(disruption, at, newKey("consolidateAfter"), newStr("0s"))
		} else {
			m.warn(d.f, ck.Line, "%s: consolidateAfter %s kept, but v1beta1 ignored it with WhenUnderutilized (v1 WhenEmptyOrUnderutilized honours it, delaying consolidation)", owner, after.Value)
		}
	case policy.Value == string(v1beta1.ConsolidationPolicyWhenEmpty) && after == nil:
		insertAt(disruption, pi+2, newKey("consolidateAfter"), newStr("0s"))
		m.warn(d.f, pk.Line, "%s: WhenEmpty without consolidateAfter (v1beta1 required it): consolidateAfter: 0s written", owner)
	}
	m.pools = append(m.pools, pl)
}

// nodeClassRef rewrites nodeClassRef {apiVersion, kind, name} to {group, kind, name} in place and
// returns its name node.
func (m *migrator) nodeClassRef(d docRef, tspec *yaml.Node, owner string) (*yaml.Node, bool) {
	rk, ref, _ := get(tspec, "nodeClassRef")
	ref = mapping(ref)
	if ref == nil {
		m.errorf(d.f, lineOf(rk, tspec), "%s has no nodeClassRef", owner)
		return nil, false
	}
	nameNode := val(ref, "name")
	if nameNode == nil || nameNode.Kind != yaml.ScalarNode || nameNode.Value == "" {
		m.errorf(d.f, lineOf(rk), "%s: nodeClassRef has no name", owner)
		return nil, false
	}
	group := groupAWS
	if ak, av, _ := get(ref, "apiVersion"); ak != nil {
		if g, _, _ := strings.Cut(av.Value, "/"); g != "" {
			group = g
		}
		rename(ak, "group")
		setScalar(av, group, "!!str")
	} else {
		prepend(ref, newKey("group"), newStr(group))
	}
	if group != groupAWS {
		m.errorf(d.f, lineOf(rk), "%s: nodeClassRef points to group %q; karpool only knows EC2NodeClass (%s)", owner, group, groupAWS)
		return nil, false
	}
	if kk, kv, _ := get(ref, "kind"); kk == nil {
		_, _, gi := get(ref, "group")
		insertAt(ref, gi+2, newKey("kind"), newStr(kindEC2NodeClass))
	} else if kv.Value != kindEC2NodeClass {
		m.errorf(d.f, kk.Line, "%s: nodeClassRef kind %q is not EC2NodeClass", owner, kv.Value)
		return nil, false
	}
	return nameNode, true
}

// convertNodeClaimV1beta1 rewrites a karpenter.sh/v1beta1 NodeClaim in place. NodeClaims are made
// by the controller and rarely belong in Git, but a dump of one converts like a pool template.
func (m *migrator) convertNodeClaimV1beta1(d docRef) {
	var nc v1beta1.NodeClaim
	if !m.decodeStrict(d, &nc) {
		return
	}
	root := d.c.root()
	owner := fmt.Sprintf("NodeClaim %q", d.name)
	specKey, spec, _ := get(root, "spec")
	spec = mapping(spec)
	if spec == nil {
		m.errorf(d.f, lineOf(specKey, root), "%s has no spec", owner)
		return
	}
	setAPI(root, apiV1, "")
	m.stripLive(d)
	if _, ok := m.nodeClassRef(d, spec, owner); !ok {
		return
	}
	if k, _ := del(spec, "kubelet"); k != nil {
		m.warn(d.f, k.Line, "%s: kubelet removed; in v1 kubelet settings live on the EC2NodeClass", owner)
	}
	m.warn(d.f, lineOf(val(root, "kind")), "%s: NodeClaims are created by the controller; consider removing this one from the manifests", owner)
}
