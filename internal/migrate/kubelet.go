package migrate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// class is an EC2NodeClass of the output: converted from v1beta1 or from an AWSNodeTemplate,
// created from a Provisioner's inline provider, or a v1 one passed through.
type class struct {
	name string
	f    *file
	c    *chunk     // the chunk holding it, or (inline) the Provisioner it is written after
	root *yaml.Node // the document's mapping node
	// existing is true for a v1 EC2NodeClass, which is only touched when a kubelet block must be
	// added to it.
	existing bool
	// inline is true for a class written after another document (made from a Provisioner's
	// provider block, or split off another class).
	inline bool
	// copies counts the split-off copies already written after it.
	copies int
}

// pool is a NodePool that came from a Provisioner or a v1beta1 NodePool. Its kubelet settings,
// if any, must move to the EC2NodeClass it references.
type pool struct {
	name      string
	f         *file
	c         *chunk
	className string
	// kubelet is the kubelet block in v1 shape (detached from the pool), nil when the pool had none.
	kubelet *yaml.Node
	// kubeletLine is where the kubelet block was.
	kubeletLine int
	// refName is the scalar holding nodeClassRef.name, updated when the class is split.
	refName *yaml.Node
	line    int
}

func (m *migrator) addClass(c *class) {
	m.classes[c.name] = c
	m.classNames[c.name] = true
	m.classOrder = append(m.classOrder, c.name)
}

// uniqueClassName returns base, or base-2, base-3, ... if base is taken by another node class.
func (m *migrator) uniqueClassName(base string) string {
	if !m.classNames[base] {
		return base
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s-%d", base, i)
		if !m.classNames[n] {
			return n
		}
	}
}

// kubeletV1 turns a v1alpha5 kubeletConfiguration or v1beta1 kubelet block into the v1
// EC2NodeClass kubelet block, in place. containerRuntime is dropped (v1 always uses containerd);
// reserved and eviction values become strings, as v1 wants.
func (m *migrator) kubeletV1(f *file, kub *yaml.Node) {
	if kub == nil || kub.Kind != yaml.MappingNode {
		return
	}
	if k, v := del(kub, "containerRuntime"); k != nil {
		msg := "kubeletConfiguration.containerRuntime dropped: v1 has no such setting and always uses containerd"
		if v.Value != "" && v.Value != "containerd" {
			msg += fmt.Sprintf(" (this provisioner asked for %q)", v.Value)
		}
		m.warn(f, k.Line, "%s", msg)
	}
	for _, key := range []string{"systemReserved", "kubeReserved", "evictionHard", "evictionSoft", "evictionSoftGracePeriod"} {
		stringifyValues(val(kub, key))
	}
}

// canonical is a comparable form of a kubelet block ("" for none).
func canonical(kub *yaml.Node) string {
	if kub == nil {
		return ""
	}
	var v any
	if err := kub.Decode(&v); err != nil {
		return fmt.Sprintf("undecodable:%p", kub)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("undecodable:%p", kub)
	}
	return string(data)
}

// placeKubelets moves the kubelet settings of the converted pools into the EC2NodeClasses they
// reference. Pools sharing a class but wanting different kubelet settings get their own copy of
// the class (named after the class and the pool), and the split is reported.
func (m *migrator) placeKubelets() {
	byClass := map[string][]*pool{}
	var order []string
	for _, p := range m.pools {
		if _, ok := byClass[p.className]; !ok {
			order = append(order, p.className)
		}
		byClass[p.className] = append(byClass[p.className], p)
	}
	for _, name := range order {
		pools := byClass[name]
		anyKubelet := false
		for _, p := range pools {
			anyKubelet = anyKubelet || p.kubelet != nil
		}
		if !anyKubelet {
			continue
		}
		if defs := m.classDefs[name]; len(defs) > 1 {
			for _, p := range pools {
				if p.kubelet != nil {
					m.errorf(p.f, p.kubeletLine, "NodePool %q: its kubelet settings must move to EC2NodeClass %q, but that name is defined %d times among the inputs (%s); migrate unrelated sets of manifests separately", p.name, name, len(defs), strings.Join(defs, ", "))
				}
			}
			continue
		}
		cl := m.classes[name]
		if cl == nil {
			for _, p := range pools {
				if p.kubelet != nil {
					m.errorf(p.f, p.kubeletLine, "NodePool %q: its kubelet settings must move to EC2NodeClass %q, which is not among the files being migrated; pass the file that defines it too (karpool migrate POOLS.yaml CLASSES.yaml)", p.name, name)
				}
			}
			continue
		}
		spec := mapping(val(cl.root, "spec"))
		if spec == nil {
			spec = newMap()
			set(cl.root, "spec", spec)
		}
		base := val(spec, "kubelet")
		baseCanon := canonical(base)
		// Group the pools by the kubelet settings they end up with (a pool without any keeps
		// what the class has).
		type group struct {
			canon string
			kub   *yaml.Node
			pools []*pool
		}
		var groups []*group
		find := map[string]*group{}
		for _, p := range pools {
			canon, kub := baseCanon, base
			if p.kubelet != nil {
				canon, kub = canonical(p.kubelet), p.kubelet
			}
			g := find[canon]
			if g == nil {
				g = &group{canon: canon, kub: kub}
				find[canon] = g
				groups = append(groups, g)
			}
			g.pools = append(g.pools, p)
		}
		// The group that keeps the class: the one with the class's own settings, else the largest
		// (the first in input order on a tie).
		keep := groups[0]
		for _, g := range groups {
			if g.canon == baseCanon {
				keep = g
				break
			}
			if len(g.pools) > len(keep.pools) {
				keep = g
			}
		}
		if keep.canon != baseCanon {
			m.setKubelet(cl, spec, keep.kub)
		}
		for _, p := range keep.pools {
			if p.kubelet != nil && keep.canon != baseCanon {
				m.warn(p.f, p.kubeletLine, "NodePool %q: kubelet settings moved to EC2NodeClass %q (v1 keeps them on the node class)", p.name, name)
			}
		}
		if len(groups) == 1 {
			continue
		}
		var names []string
		for _, g := range groups {
			if g == keep {
				continue
			}
			newName := m.uniqueClassName(name + "-" + g.pools[0].name)
			copyRoot := deepCopy(cl.root)
			if md := mapping(val(copyRoot, "metadata")); md != nil {
				set(md, "name", newStr(newName))
			}
			copySpec := mapping(val(copyRoot, "spec"))
			if g.kub == nil {
				del(copySpec, "kubelet")
			} else {
				set(copySpec, "kubelet", deepCopy(g.kub))
			}
			m.insertAfter(cl, copyRoot)
			nc := &class{name: newName, f: cl.f, c: cl.c, root: copyRoot, inline: true}
			m.addClass(nc)
			var poolNames []string
			for _, p := range g.pools {
				poolNames = append(poolNames, p.name)
				if p.refName != nil {
					setScalar(p.refName, newName, "!!str")
				}
				p.c.changed = true
			}
			for _, p := range g.pools {
				m.warn(p.f, lineOf(&yaml.Node{Line: p.kubeletLine}, p.refName, &yaml.Node{Line: p.line}),
					"NodePool %q: EC2NodeClass %q is shared by pools with different kubelet settings (v1 keeps kubelet on the node class), so it was split: this pool now uses the copy %q", p.name, name, newName)
			}
			names = append(names, fmt.Sprintf("%s (for %s)", newName, strings.Join(poolNames, ", ")))
		}
		sort.Strings(names)
		var kept []string
		for _, p := range keep.pools {
			kept = append(kept, p.name)
		}
		if !cl.inline {
			m.warn(cl.f, lineOf(val(mapping(val(cl.root, "metadata")), "name"), cl.root), "EC2NodeClass %q split because the pools using it want different kubelet settings: it stays with %s; copies: %s", name, strings.Join(kept, ", "), strings.Join(names, "; "))
		}
	}
}

// setKubelet writes the kubelet block into a class.
func (m *migrator) setKubelet(cl *class, spec, kub *yaml.Node) {
	if kub == nil {
		del(spec, "kubelet")
	} else {
		set(spec, "kubelet", kub)
	}
	if cl.existing {
		cl.c.changed = true
	}
}

// insertAfter writes a new document after the class's own document (and after earlier copies).
func (m *migrator) insertAfter(cl *class, doc *yaml.Node) {
	c := cl.c
	wrapped := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}
	at := cl.copies
	if cl.inline {
		at = len(c.after)
		for i, n := range c.after {
			if mapping(n) == cl.root {
				at = i + 1 + cl.copies
				break
			}
		}
	}
	cl.copies++
	if at > len(c.after) {
		at = len(c.after)
	}
	c.after = append(c.after[:at], append([]*yaml.Node{wrapped}, c.after[at:]...)...)
}
