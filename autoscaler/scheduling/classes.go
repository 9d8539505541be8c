package scheduling

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/internal/requirements"
)

// class is a set of pending pods that are interchangeable for scheduling: same namespace and
// labels, same requests, same node requirements, tolerations and topology constraints.
type class struct {
	id       int
	pods     []int32 // indexes into Input.Pods, in input order
	req      catalog.Resources
	ns       string
	labels   map[string]string
	labelKey string
	priority int32
	// blocked says why no node can take the class's pods whatever the plan (a resource no
	// instance type offers, a volume claim that does not exist), "" otherwise.
	blocked string
	// vols are the node requirements the pods' volumes add (alternatives, see volumeTerms).
	vols     [][]req
	variants []*variant
	v        int // current variant (relaxation level)
	// countedBy are the counters whose selector matches the class's pods.
	countedBy []int32
	// owns are the anti-affinity counters the class's required anti-affinity terms feed.
	owns []int32
	// antiSel are the anti-affinity counters whose selector matches the class: pods owning
	// those terms repel this class (symmetry of anti-affinity).
	antiSel []int32
	// needZone: placing the class must decide an undecided zone (it is counted per zone).
	needZone  bool
	free      bool
	affTarget bool
	placed    int
	reason    string
	cursors   []int32 // per zone (+1; slot 0 = any zone): bins before it never take the class
	// reqSigs are the required node terms (no preferences) with the pod's tolerations, and
	// tolerating everything; topology spread domains are computed from them.
	reqSigs, reqSigsAll []*nodeSig
	domZones            [4]uint32
	domKnown            uint8
	launch              int8 // 0 unknown, 1 a pool can launch a node for the pod, 2 none
	// size orders classes, largest first.
	size float64
	// ports are the class's host ports (interned); portSet holds them, portConf the ports that
	// conflict with them (nil when the pods use none).
	ports             []int
	portSet, portConf bitset
}

func (c *class) remaining() int { return len(c.pods) - c.placed }

// variant is one relaxation level of a class: a node signature and the topology constraints
// in force.
type variant struct {
	sig     *nodeSig
	spreads []spreadC
	affs    []affC // pod affinity
	antis   []affC // pod anti-affinity
	// zoneCons: some constraint is keyed on the zone; hostCons: on the hostname; labelCons: on
	// another label.
	zoneCons, hostCons, labelCons bool
}

type spreadC struct {
	ctr        int32
	maxSkew    int32
	minDomains int32
	self       bool
	// honorAffinity: only domains of nodes matching the pod's node requirements count (default).
	honorAffinity bool
	honorTaints   bool
}

type affC struct {
	ctr  int32
	self bool
}

const (
	keyZone = iota
	keyHost
	keyLabel
)

// counter counts, per topology domain, the pods matching a selector (and, for anti-affinity
// terms, the pods owning the term).
type counter struct {
	id    int32
	kind  uint8
	label string // for keyLabel
	ns    nsMatcher
	sel   labels.Selector
	anti  bool // an anti-affinity term: owners matter
	zone  []int32
	host  []int32
	other map[string]int32
	total int32
	// owners of the anti-affinity term per domain.
	ownZone  []int32
	ownHost  []int32
	ownOther map[string]int32
	used     bool // referenced by a pending class (its counts are maintained)
	// filter, for topology spread with nodeAffinityPolicy Honor: only pods on nodes matching
	// one of these signatures (labels only) count.
	filter []*nodeSig
}

type nsMatcher struct {
	all   bool
	names []string
}

func (m *nsMatcher) matches(ns string) bool { return m.all || slices.Contains(m.names, ns) }

func (m *nsMatcher) key() string {
	if m.all {
		return "*"
	}
	return strings.Join(m.names, ",")
}

func topoKind(key string) (uint8, string) {
	key = karpv1.NormalizeLabel(key)
	switch key {
	case labelZone:
		return keyZone, ""
	case labelHostname:
		return keyHost, ""
	}
	return keyLabel, key
}

// counterFor interns a counter.
func (s *solver) counterFor(topologyKey string, ns nsMatcher, sel labels.Selector, anti bool) int32 {
	return s.counterWith(topologyKey, ns, sel, anti, nil)
}

func (s *solver) counterWith(topologyKey string, ns nsMatcher, sel labels.Selector, anti bool, filter []*nodeSig) int32 {
	kind, label := topoKind(topologyKey)
	key := strconv.Itoa(int(kind)) + "\x00" + label + "\x00" + ns.key() + "\x00" + sel.String()
	if anti {
		key += "\x00anti"
	}
	for _, f := range filter {
		key += "\x00f" + strconv.Itoa(f.id)
	}
	if id, ok := s.counterIdx[key]; ok {
		return id
	}
	c := &counter{id: int32(len(s.counters)), kind: kind, label: label, ns: ns, sel: sel, anti: anti, filter: filter}
	switch kind {
	case keyZone:
		c.zone = make([]int32, len(s.zones))
		if anti {
			c.ownZone = make([]int32, len(s.zones))
		}
	case keyLabel:
		c.other = map[string]int32{}
		if anti {
			c.ownOther = map[string]int32{}
		}
	}
	s.counters = append(s.counters, c)
	s.counterIdx[key] = c.id
	return c.id
}

// classKey writes everything scheduling-relevant about a pod into buf; resources is the pod's
// resourceKey (pods whose specs differ but request the same land in different classes, which
// costs a class, not a wrong plan).
func classKey(buf []byte, pod *corev1.Pod, resources []byte) []byte {
	buf = append(buf, pod.Namespace...)
	buf = append(buf, 0)
	buf = appendSortedMap(buf, pod.Labels)
	buf = append(buf, resources...)
	buf = append(buf, 1)
	if pod.Spec.Priority != nil {
		buf = strconv.AppendInt(buf, int64(*pod.Spec.Priority), 10)
	}
	buf = append(buf, 1)
	buf = appendSortedMap(buf, pod.Spec.NodeSelector)
	for i := range pod.Spec.Tolerations {
		t := &pod.Spec.Tolerations[i]
		buf = append(buf, t.Key...)
		buf = append(buf, 0)
		buf = append(buf, t.Operator...)
		buf = append(buf, 0)
		buf = append(buf, t.Value...)
		buf = append(buf, 0)
		buf = append(buf, t.Effect...)
		buf = append(buf, 2)
	}
	buf = append(buf, 3)
	if a := pod.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			buf = append(buf, 'N')
			if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
				for i := range r.NodeSelectorTerms {
					buf = appendTerm(buf, &r.NodeSelectorTerms[i])
				}
			}
			buf = append(buf, 'P')
			for i := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				p := &na.PreferredDuringSchedulingIgnoredDuringExecution[i]
				buf = strconv.AppendInt(buf, int64(p.Weight), 10)
				buf = appendTerm(buf, &p.Preference)
			}
		}
		if pa := a.PodAffinity; pa != nil {
			buf = appendPodAffinity(buf, 'A', pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			buf = appendPodAffinity(buf, 'X', pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	buf = append(buf, 4)
	for _, hp := range hostPortsOf(&pod.Spec) {
		buf = append(buf, hp.ip...)
		buf = append(buf, '/')
		buf = strconv.AppendInt(buf, int64(hp.port), 10)
		buf = append(buf, hp.proto...)
		buf = append(buf, 0)
	}
	buf = append(buf, 4)
	for i := range pod.Spec.TopologySpreadConstraints {
		t := &pod.Spec.TopologySpreadConstraints[i]
		buf = strconv.AppendInt(buf, int64(t.MaxSkew), 10)
		buf = append(buf, 0)
		buf = append(buf, t.TopologyKey...)
		buf = append(buf, 0)
		buf = append(buf, t.WhenUnsatisfiable...)
		buf = append(buf, 0)
		buf = appendSelector(buf, t.LabelSelector)
		if t.MinDomains != nil {
			buf = strconv.AppendInt(buf, int64(*t.MinDomains), 10)
		}
		buf = append(buf, 0)
		if t.NodeAffinityPolicy != nil {
			buf = append(buf, *t.NodeAffinityPolicy...)
		}
		buf = append(buf, 0)
		if t.NodeTaintsPolicy != nil {
			buf = append(buf, *t.NodeTaintsPolicy...)
		}
		for _, k := range t.MatchLabelKeys {
			buf = append(buf, k...)
			buf = append(buf, 1)
		}
		buf = append(buf, 5)
	}
	return buf
}

func appendSortedMap(buf []byte, m map[string]string) []byte {
	switch len(m) {
	case 0:
	case 1:
		for k, v := range m {
			buf = append(buf, k...)
			buf = append(buf, '=')
			buf = append(buf, v...)
			buf = append(buf, 0)
		}
	default:
		var arr [8]string
		keys := arr[:0]
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			buf = append(buf, k...)
			buf = append(buf, '=')
			buf = append(buf, m[k]...)
			buf = append(buf, 0)
		}
	}
	buf = append(buf, 1)
	return buf
}

func appendTerm(buf []byte, t *corev1.NodeSelectorTerm) []byte {
	for _, e := range t.MatchExpressions {
		buf = appendReq(buf, e.Key, e.Operator, e.Values)
	}
	for _, e := range t.MatchFields {
		buf = appendReq(append(buf, 'F'), e.Key, e.Operator, e.Values)
	}
	return append(buf, 2)
}

// appendReq encodes one requirement into a class key.
func appendReq(buf []byte, key string, op corev1.NodeSelectorOperator, values []string) []byte {
	buf = append(buf, key...)
	buf = append(buf, 0)
	buf = append(buf, op...)
	for _, v := range values {
		buf = append(buf, 0)
		buf = append(buf, v...)
	}
	return append(buf, 1)
}

func appendSelector(buf []byte, sel *metav1.LabelSelector) []byte {
	if sel == nil {
		return append(buf, '~')
	}
	buf = appendSortedMap(buf, sel.MatchLabels)
	for _, e := range sel.MatchExpressions {
		buf = append(buf, e.Key...)
		buf = append(buf, 0)
		buf = append(buf, e.Operator...)
		for _, v := range e.Values {
			buf = append(buf, 0)
			buf = append(buf, v...)
		}
		buf = append(buf, 1)
	}
	return append(buf, 2)
}

// appendPodAffinity encodes pod affinity or anti-affinity (told apart by tag) into a signature:
// the required terms, a separator, then each preferred term with its weight.
func appendPodAffinity(buf []byte, tag byte, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) []byte {
	buf = append(buf, tag)
	for i := range required {
		buf = appendPodTerm(buf, &required[i])
	}
	buf = append(buf, tag+('a'-'A'))
	for i := range preferred {
		buf = strconv.AppendInt(buf, int64(preferred[i].Weight), 10)
		buf = appendPodTerm(buf, &preferred[i].PodAffinityTerm)
	}
	return buf
}

func appendPodTerm(buf []byte, t *corev1.PodAffinityTerm) []byte {
	buf = appendSelector(buf, t.LabelSelector)
	buf = append(buf, t.TopologyKey...)
	buf = append(buf, 0)
	for _, n := range t.Namespaces {
		buf = append(buf, n...)
		buf = append(buf, 1)
	}
	if t.NamespaceSelector != nil {
		buf = append(buf, 'S')
		buf = appendSelector(buf, t.NamespaceSelector)
	}
	for _, k := range t.MatchLabelKeys {
		buf = append(buf, 'M')
		buf = append(buf, k...)
	}
	for _, k := range t.MismatchLabelKeys {
		buf = append(buf, 'm')
		buf = append(buf, k...)
	}
	return append(buf, 3)
}

// buildClasses groups the pending pods into classes.
func (s *solver) buildClasses() {
	s.buildVolumeIndex()
	s.podClass = make([]*class, len(s.in.Pods))
	idx := make(map[string]*class, 64)
	var buf []byte
	for i, pod := range s.in.Pods {
		if pod == nil {
			continue
		}
		s.resBuf = resourceKey(s.resBuf[:0], pod)
		buf = classKey(buf[:0], pod, s.resBuf)
		var vols [][]req
		var volWhy string
		if len(pod.Spec.Volumes) > 0 {
			vols, volWhy = s.volumeTerms(pod)
			buf = appendVolumeKey(buf, vols, volWhy)
		}
		c, ok := idx[string(buf)]
		if !ok {
			requests, unknown := s.requestsFor(s.resBuf, pod)
			c = &class{id: len(s.classes), req: requests, ns: pod.Namespace, labels: pod.Labels, vols: vols, blocked: volWhy}
			if unknown != "" {
				c.blocked = fmt.Sprintf("requests resource %s, which no instance type offers", unknown)
			}
			if pod.Spec.Priority != nil {
				c.priority = *pod.Spec.Priority
			}
			c.ports = s.portTab.intern(hostPortsOf(&pod.Spec))
			idx[string(buf)] = c
			s.classes = append(s.classes, c)
			s.classPods = append(s.classPods, pod)
		}
		c.pods = append(c.pods, int32(i))
		s.podClass[i] = c
	}
	for _, c := range s.classes {
		s.buildVariants(c, s.classPods[c.id])
	}
}

// buildVariants parses a class's constraints into relaxation levels, Karpenter's order: drop
// preferred pod affinity terms (heaviest first), then preferred anti-affinity terms, then preferred
// node affinity terms, then ScheduleAnyway spread constraints, then tolerate PreferNoSchedule
// taints; for each level try the required node affinity terms in order.
func (s *solver) buildVariants(c *class, pod *corev1.Pod) {
	spec := &pod.Spec
	terms := nodeTerms(spec)
	for _, term := range terms {
		c.reqSigs = append(c.reqSigs, s.sigFor(term, spec.Tolerations, false))
		c.reqSigsAll = append(c.reqSigsAll, s.sigFor(term, tolerateAll, false))
	}
	// Volume topology confines where the pods run, not which nodes their spread constraints
	// count (the kube-scheduler counts by the pod's own node affinity): it joins the variants'
	// terms only.
	placeTerms := withVolumeTerms(terms, c.vols)
	var prefNode []corev1.PreferredSchedulingTerm
	var prefAff, prefAnti []corev1.WeightedPodAffinityTerm
	var reqAff, reqAnti []corev1.PodAffinityTerm
	if a := spec.Affinity; a != nil {
		if a.NodeAffinity != nil {
			prefNode = slices.Clone(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAffinity != nil {
			reqAff = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			prefAff = slices.Clone(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			reqAnti = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			prefAnti = slices.Clone(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	var hard, soft []corev1.TopologySpreadConstraint
	for _, t := range spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.ScheduleAnyway {
			soft = append(soft, t)
		} else {
			hard = append(hard, t)
		}
	}
	if s.in.Options.IgnorePreferences {
		prefNode, prefAff, prefAnti, soft = nil, nil, nil, nil
	}
	byWeight := func(a, b corev1.WeightedPodAffinityTerm) int { return int(b.Weight) - int(a.Weight) }
	slices.SortStableFunc(prefAff, byWeight)
	slices.SortStableFunc(prefAnti, byWeight)
	slices.SortStableFunc(prefNode, func(a, b corev1.PreferredSchedulingTerm) int { return int(b.Weight) - int(a.Weight) })

	// The always-on parts.
	var hardSpreads []spreadC
	for i := range hard {
		hardSpreads = append(hardSpreads, s.spreadFor(c, pod, &hard[i]))
	}
	var hardAffs, hardAntis []affC
	for i := range reqAff {
		hardAffs = append(hardAffs, s.affFor(c, pod, &reqAff[i], false))
	}
	for i := range reqAnti {
		a := s.affFor(c, pod, &reqAnti[i], true)
		hardAntis = append(hardAntis, a)
		c.owns = append(c.owns, a.ctr)
	}
	softSpreads := make([]spreadC, len(soft))
	for i := range soft {
		softSpreads[i] = s.spreadFor(c, pod, &soft[i])
	}
	prefAffC := make([]affC, len(prefAff))
	for i := range prefAff {
		prefAffC[i] = s.affFor(c, pod, &prefAff[i].PodAffinityTerm, false)
	}
	prefAntiC := make([]affC, len(prefAnti))
	for i := range prefAnti {
		// Preferred anti-affinity is not symmetric: a plain counter, without owners.
		prefAntiC[i] = s.affFor(c, pod, &prefAnti[i].PodAffinityTerm, false)
	}

	// PreferNoSchedule taints (when some pool or node has one) are avoided at every level and
	// tolerated at one more, the last, as Karpenter's final relaxation does.
	steps := len(prefAff) + len(prefAnti) + len(prefNode) + len(soft)
	avoidUpTo := -1
	if s.preferTaints && !s.in.Options.IgnorePreferences {
		avoidUpTo = steps
		steps++
	}
	for level := 0; level <= steps; level++ {
		// How many of each preference kind are dropped at this level.
		rem := level
		dAff := min(rem, len(prefAff))
		rem -= dAff
		dAnti := min(rem, len(prefAnti))
		rem -= dAnti
		dNode := min(rem, len(prefNode))
		rem -= dNode
		dSoft := min(rem, len(soft))
		for _, term := range placeTerms {
			v := &variant{}
			reqs := term
			if dNode < len(prefNode) {
				reqs = slices.Clone(term)
				for _, e := range prefNode[dNode].Preference.MatchExpressions {
					reqs = append(reqs, newReq(e.Key, e.Operator, e.Values))
				}
			}
			v.sig = s.sigFor(reqs, spec.Tolerations, level <= avoidUpTo)
			v.spreads = append(slices.Clone(hardSpreads), softSpreads[dSoft:]...)
			v.affs = append(slices.Clone(hardAffs), prefAffC[dAff:]...)
			v.antis = append(slices.Clone(hardAntis), prefAntiC[dAnti:]...)
			for _, sp := range v.spreads {
				v.markKey(s.counters[sp.ctr].kind)
			}
			for _, a := range v.affs {
				v.markKey(s.counters[a.ctr].kind)
			}
			for _, a := range v.antis {
				v.markKey(s.counters[a.ctr].kind)
			}
			c.variants = append(c.variants, v)
		}
	}
}

var tolerateAll = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}

func (v *variant) markKey(kind uint8) {
	switch kind {
	case keyZone:
		v.zoneCons = true
	case keyHost:
		v.hostCons = true
	default:
		v.labelCons = true
	}
}

func (v *variant) constrained() bool { return len(v.spreads)+len(v.affs)+len(v.antis) > 0 }

func (s *solver) spreadFor(c *class, pod *corev1.Pod, t *corev1.TopologySpreadConstraint) spreadC {
	ls := t.LabelSelector
	if len(t.MatchLabelKeys) > 0 && ls != nil {
		ls = ls.DeepCopy()
		for _, k := range t.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	sel := selectorOf(ls)
	honor := t.NodeAffinityPolicy == nil || *t.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
	var filter []*nodeSig
	if honor {
		for _, sig := range c.reqSigsAll {
			if len(sig.reqs) == 0 {
				filter = nil // some term matches every node
				break
			}
			filter = append(filter, sig)
		}
	}
	sc := spreadC{
		ctr:           s.counterWith(t.TopologyKey, nsMatcher{names: []string{pod.Namespace}}, sel, false, filter),
		maxSkew:       t.MaxSkew,
		self:          sel.Matches(labels.Set(pod.Labels)),
		honorAffinity: honor,
		honorTaints:   t.NodeTaintsPolicy != nil && *t.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
	}
	if sc.maxSkew < 1 {
		sc.maxSkew = 1
	}
	if t.MinDomains != nil {
		sc.minDomains = *t.MinDomains
	}
	s.counters[sc.ctr].used = true
	return sc
}

func (s *solver) affFor(c *class, pod *corev1.Pod, t *corev1.PodAffinityTerm, anti bool) affC {
	ls := t.LabelSelector
	if ls != nil && (len(t.MatchLabelKeys) > 0 || len(t.MismatchLabelKeys) > 0) {
		ls = ls.DeepCopy()
		for _, k := range t.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
		for _, k := range t.MismatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}})
			}
		}
	}
	sel := selectorOf(ls)
	ns := s.termNamespaces(pod.Namespace, t)
	a := affC{ctr: s.counterFor(t.TopologyKey, ns, sel, anti)}
	a.self = ns.matches(pod.Namespace) && sel.Matches(labels.Set(pod.Labels))
	s.counters[a.ctr].used = true
	return a
}

func selectorOf(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// termNamespaces resolves the namespaces a pod affinity term applies to.
func (s *solver) termNamespaces(podNS string, t *corev1.PodAffinityTerm) nsMatcher {
	if t.NamespaceSelector == nil && len(t.Namespaces) == 0 {
		return nsMatcher{names: []string{podNS}}
	}
	names := slices.Clone(t.Namespaces)
	if t.NamespaceSelector != nil {
		if len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
			return nsMatcher{all: true}
		}
		sel := selectorOf(t.NamespaceSelector)
		for _, n := range s.in.Namespaces {
			if n != nil && sel.Matches(labels.Set(n.Labels)) {
				names = append(names, n.Name)
			}
		}
	}
	slices.Sort(names)
	return nsMatcher{names: slices.Compact(names)}
}

// labelSetKey identifies a namespace and label set.
func labelSetKey(ns string, l map[string]string) string {
	buf := append([]byte(ns), 0)
	return string(appendSortedMap(buf, l))
}

// matchCounters returns the counters matching a namespace and label set (cached).
func (s *solver) matchCounters(ns string, l map[string]string) []int32 {
	key := labelSetKey(ns, l)
	if m, ok := s.labelSetMatch[key]; ok {
		return m
	}
	var out []int32
	set := labels.Set(l)
	for _, c := range s.counters {
		if c.ns.matches(ns) && c.sel.Matches(set) {
			out = append(out, c.id)
		}
	}
	s.labelSetMatch[key] = out
	return out
}

// prepareTopology wires classes to counters and counts the pods already bound.
func (s *solver) prepareTopology() {
	// Required anti-affinity terms of bound pods repel pending pods (symmetry).
	type owner struct {
		bin int
		ctr int32
	}
	var owners []owner
	for bi, pods := range s.existingPods {
		for _, p := range pods {
			if p == nil || isTerminal(p) || p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
				continue
			}
			for i := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				t := &p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
				id := s.counterFor(t.TopologyKey, s.termNamespaces(p.Namespace, t), selectorOf(t.LabelSelector), true)
				owners = append(owners, owner{bi, id})
			}
		}
	}
	for _, c := range s.counters {
		if c.kind == keyHost {
			c.host = make([]int32, len(s.bins), len(s.bins)+64)
			if c.anti {
				c.ownHost = make([]int32, len(s.bins), len(s.bins)+64)
			}
		}
	}
	for _, o := range owners {
		s.counters[o.ctr].addOwner(s, s.bins[o.bin], 1)
	}
	// Bound pods count in their domains.
	if len(s.counters) > 0 {
		for bi, pods := range s.existingPods {
			b := s.bins[bi]
			for _, p := range pods {
				if p == nil || isTerminal(p) {
					continue
				}
				for _, id := range s.matchCounters(p.Namespace, p.Labels) {
					s.counters[id].add(s, b, 1)
				}
			}
		}
	}
	for _, c := range s.classes {
		c.countedBy = s.matchCounters(c.ns, c.labels)
		for _, id := range c.countedBy {
			ctr := s.counters[id]
			if ctr.anti {
				c.antiSel = append(c.antiSel, id)
			}
			if ctr.kind == keyZone {
				c.needZone = true
			}
		}
		for _, id := range c.owns {
			if s.counters[id].kind == keyZone {
				c.needZone = true
			}
		}
	}
	// Classes some other class's pod affinity points at are placed first.
	affUsers := map[int32][]int{}
	for _, c := range s.classes {
		for _, v := range c.variants {
			for _, a := range v.affs {
				if u := affUsers[a.ctr]; len(u) == 0 || u[len(u)-1] != c.id {
					affUsers[a.ctr] = append(u, c.id)
				}
			}
		}
	}
	if len(affUsers) > 0 {
		for _, o := range s.classes {
			for _, id := range o.countedBy {
				for _, user := range affUsers[id] {
					if user != o.id {
						o.affTarget = true
					}
				}
			}
		}
	}
	for _, c := range s.classes {
		// Pods with host ports take one node each (per conflicting port): placed one by one.
		c.free = !c.affTarget && len(c.antiSel) == 0 && c.portSet == nil
		for _, v := range c.variants {
			if v.constrained() {
				c.free = false
			}
		}
	}
}

// domainOf is a bin's value for a label topology key (keyLabel counters).
func (s *solver) domainOf(b *bin, key string) (string, bool) {
	if b.kind != binNew {
		v, ok := b.labels[key]
		return v, ok
	}
	p := s.pools[b.pool]
	if v, ok := p.fixed[key]; ok {
		return v, true
	}
	if d := b.custom[key]; d != nil {
		if v, ok := single(d); ok {
			return v, true
		}
	}
	if key == labelCapacityType {
		for ct := 0; ct < numCT; ct++ {
			if b.ctMask == 1<<ct {
				return ctNames[ct], true
			}
		}
		return "", false
	}
	// An instance type label: known if every candidate type agrees.
	first, agreed, has := "", true, false
	b.types.each(func(i int) bool {
		v, ok := p.types[i].it.Labels[key]
		if !has {
			first, has = v, ok
			if !ok {
				first = "\x00"
			}
			return true
		}
		if (ok && v != first) || (!ok && first != "\x00") {
			agreed = false
			return false
		}
		return true
	})
	if agreed && has && first != "\x00" {
		return first, true
	}
	return "", false
}

// filterEligible reports whether pods on the bin count for a counter with a node filter. An
// existing node is judged by its labels. A new NodeClaim may still launch as types (or with
// pool-defined label values) inside or outside the filter: for hostname counters, counting
// whenever it may match is the safe side; for the others the NodeClaim is narrowed to the side
// its reference type (refType) is on, so that the count stays exact.
func (s *solver) filterEligible(ctr *counter, b *bin) bool {
	if b.kind != binNew {
		for _, sig := range ctr.filter {
			if requirements.Match(sig.reqs, b.labels) {
				return true
			}
		}
		return false
	}
	p := s.pools[b.pool]
	in, match, elig := s.filterDecision(ctr, b, s.refType(b))
	if elig == nil {
		return false
	}
	if ctr.kind == keyHost {
		for i := range elig {
			if elig[i]&b.types[i] != 0 {
				return true
			}
		}
		return false
	}
	var none catalog.Resources
	if narrowed := sideTypes(b.types, in, match, elig); len(p.minValues) == 0 || s.minValuesOK(b, narrowed, b.zoneMask, b.ctMask, &none, 0) {
		b.types, b.allTypes = narrowed, false
	} else {
		// Narrowing would break minValues: keep the types, but make sure the node launches
		// (as its cheapest option) on the side it was counted on. Only options priced at or
		// above the cheapest type on that side can then be listed; when those are too few,
		// count on the side of the type the NodeClaim launches as (floorType) instead, which
		// keeps every option it lists now.
		b.sides = append(b.sides, side{elig: elig, in: in})
		if !s.minValuesOK(b, b.types, b.zoneMask, b.ctMask, &none, 0) {
			b.sides = b.sides[:len(b.sides)-1]
			if t, _ := s.floorType(b, b.types, b.zoneMask, b.ctMask, &b.used); t >= 0 {
				in, match, _ = s.filterDecision(ctr, b, t)
			}
			b.sides = append(b.sides, side{elig: elig, in: in})
		}
	}
	if in {
		s.narrowCustom(b, match)
	}
	return in
}

// narrowCustom narrows a new NodeClaim's pool-defined labels to the values a filter signature
// it was counted inside of accepts.
func (s *solver) narrowCustom(b *bin, match *sigCompat) {
	if match.custom == nil {
		return
	}
	p := s.pools[b.pool]
	if b.custom == nil {
		b.custom = map[string]*domain{}
	}
	for key, fd := range match.custom {
		bd := b.custom[key]
		if bd == nil {
			bd = p.custom[key].Clone()
			b.custom[key] = bd
		}
		bd.Intersect(fd)
	}
}

// refType is the type a new NodeClaim's side of a node filter is decided by: its target, or,
// when a side recorded earlier excludes the target (it was decided by floorType), the type it
// launches as.
func (s *solver) refType(b *bin) int {
	if b.sideOK(int(b.target)) {
		return int(b.target)
	}
	if t, _ := s.floorType(b, b.types, b.zoneMask, b.ctMask, &b.used); t >= 0 {
		return t
	}
	return int(b.target)
}

// sideTypes narrows a type set to one side of a node filter: the matching signature's types
// (in), or the types no signature the NodeClaim could match allows (out).
func sideTypes(types bitset, in bool, match *sigCompat, elig bitset) bitset {
	narrowed := types.clone()
	if in {
		narrowed.and(narrowed, match.types)
	} else {
		for i := range narrowed {
			narrowed[i] &^= elig[i]
		}
	}
	return narrowed
}

// filterDecision decides on which side of a counter's node filter a new NodeClaim falls: in
// when type ref is allowed by a filter signature whose pool-defined labels the NodeClaim can
// still take (match is that signature's evaluation); elig are the types of every signature the
// NodeClaim could match (nil when none can).
func (s *solver) filterDecision(ctr *counter, b *bin, ref int) (bool, *sigCompat, bitset) {
	p := s.pools[b.pool]
	var elig bitset
	var match *sigCompat
	for _, sig := range ctr.filter {
		cp := s.compatWith(sig, p)
		if !cp.ok || (b.zone >= 0 && cp.zoneMask&(1<<b.zone) == 0) || !s.customPossible(b, cp) {
			continue
		}
		if elig == nil {
			elig = newBitset(len(p.types))
		}
		for i := range elig {
			elig[i] |= cp.types[i]
		}
		if match == nil && cp.types.has(ref) {
			match = cp
		}
	}
	return match != nil, match, elig
}

// customPossible reports whether the NodeClaim's pool-defined labels can still take values the
// signature accepts.
func (s *solver) customPossible(b *bin, cp *sigCompat) bool {
	for key, fd := range cp.custom {
		bd := b.custom[key]
		if bd == nil {
			continue // the NodeClaim has the pool's full domain, which fd narrows
		}
		if !intersect(bd.Clone(), fd) {
			return false
		}
	}
	return true
}

// filterNarrow applies to a type set the narrowing filterEligible will do when the class's pods
// are counted on the new NodeClaim (so that minValues can be checked beforehand).
func (s *solver) filterNarrow(c *class, b *bin, types bitset, zones uint32) bitset {
	out := types
	ref := s.refType(b)
	for _, id := range c.countedBy {
		ctr := s.counters[id]
		if ctr.filter == nil || ctr.kind == keyHost {
			continue
		}
		in, match, elig := s.filterDecision(ctr, b, ref)
		if elig == nil {
			continue
		}
		if narrowed := sideTypes(out, in, match, elig); s.minValuesOK(b, narrowed, zones, b.ctMask, &c.req, 1) {
			out = narrowed
		}
	}
	return out
}

func (c *counter) hostSlot(b *bin) {
	for int(b.id) >= len(c.host) {
		c.host = append(c.host, 0)
	}
	if c.anti {
		for int(b.id) >= len(c.ownHost) {
			c.ownHost = append(c.ownHost, 0)
		}
	}
}

// add counts k matching pods placed on b; the bin's domain must be known.
func (c *counter) add(s *solver, b *bin, k int32) {
	if c.filter != nil && !s.filterEligible(c, b) {
		return
	}
	switch c.kind {
	case keyHost:
		c.hostSlot(b)
		c.host[b.id] += k
	case keyZone:
		if b.zone < 0 {
			return
		}
		c.zone[b.zone] += k
	default:
		v, ok := s.domainOf(b, c.label)
		if !ok {
			return
		}
		c.other[v] += k
	}
	c.total += k
}

func (c *counter) addOwner(s *solver, b *bin, k int32) {
	switch c.kind {
	case keyHost:
		c.hostSlot(b)
		c.ownHost[b.id] += k
	case keyZone:
		if b.zone >= 0 {
			c.ownZone[b.zone] += k
		}
	default:
		if v, ok := s.domainOf(b, c.label); ok {
			c.ownOther[v] += k
		}
	}
}

func (c *counter) hostCount(b *bin) int32 {
	if int(b.id) < len(c.host) {
		return c.host[b.id]
	}
	return 0
}

func (c *counter) hostOwners(b *bin) int32 {
	if int(b.id) < len(c.ownHost) {
		return c.ownHost[b.id]
	}
	return 0
}
