package migrate

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// fixWorkload updates references to the old API in documents of other kinds (Pods, Deployments,
// Jobs, Nodes, ...): the do-not-evict / do-not-consolidate annotations become do-not-disrupt, and
// node selectors on karpenter.sh/provisioner-name select karpenter.sh/nodepool (the pools keep
// the provisioners' names). Documents without such references are not touched.
func (m *migrator) fixWorkload(d docRef) {
	root := d.c.root()
	what := fmt.Sprintf("%s %q", d.kind, d.name)
	if items := val(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
		for _, it := range items.Content {
			av := str(mapping(it), "apiVersion")
			switch av {
			case apiV1alpha5, apiAWSV1alpha1, apiV1beta1, apiAWSV1beta1:
				m.errorf(d.f, lineOf(it), "%s holds a %s %s; migrate does not look inside lists: write its items as separate documents", what, av, str(mapping(it), "kind"))
			}
		}
	}
	changed := false
	for _, path := range [][]string{
		{"metadata", "annotations"},
		{"spec", "template", "metadata", "annotations"},
		{"spec", "jobTemplate", "spec", "template", "metadata", "annotations"},
	} {
		if m.renameDisruptionAnnotations(d.f, lookup(root, path...), what) {
			changed = true
		}
	}
	for _, path := range [][]string{
		{"spec"},
		{"spec", "template", "spec"},
		{"spec", "jobTemplate", "spec", "template", "spec"},
	} {
		if m.fixPodSelectors(d.f, mapping(lookup(root, path...)), what) {
			changed = true
		}
	}
	if changed {
		d.c.changed = true
	}
}

// fixPodSelectors renames karpenter.sh/provisioner-name to karpenter.sh/nodepool in a pod spec's
// nodeSelector and node affinity.
func (m *migrator) fixPodSelectors(f *file, podSpec *yaml.Node, what string) bool {
	if podSpec == nil {
		return false
	}
	changed := false
	fix := func(k *yaml.Node) {
		if k == nil || k.Kind != yaml.ScalarNode || k.Value != labelProvisionerName {
			return
		}
		setScalar(k, labelNodePool, "!!str")
		changed = true
		m.warn(f, k.Line, "%s: node selector %s renamed to %s (NodePools keep the provisioners' names)", what, labelProvisionerName, labelNodePool)
	}
	if ns := mapping(val(podSpec, "nodeSelector")); ns != nil {
		k, _, _ := get(ns, labelProvisionerName)
		fix(k)
	}
	exprs := func(term *yaml.Node) {
		for _, field := range []string{"matchExpressions", "matchFields"} {
			list := val(mapping(term), field)
			if list == nil || list.Kind != yaml.SequenceNode {
				continue
			}
			for _, e := range list.Content {
				fix(val(mapping(e), "key"))
			}
		}
	}
	na := mapping(lookup(podSpec, "affinity", "nodeAffinity"))
	if terms := lookup(na, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"); terms != nil && terms.Kind == yaml.SequenceNode {
		for _, t := range terms.Content {
			exprs(t)
		}
	}
	if prefs := val(na, "preferredDuringSchedulingIgnoredDuringExecution"); prefs != nil && prefs.Kind == yaml.SequenceNode {
		for _, p := range prefs.Content {
			exprs(val(mapping(p), "preference"))
		}
	}
	return changed
}
