package scheduling

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// classSet holds the pod equivalence classes.
type classSet struct {
	*poolSet
	topo *topology
	reqs *requestCache

	classes   []*class
	classPods []*corev1.Pod // a representative pod per class
	podClass  []*class

	// vols indexes the input's volume claims, volumes and storage classes.
	vols volumeIndex
}

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

// draReason is why a pod with ResourceClaims gets no node: as Karpenter (IGNORE_DRA_REQUESTS,
// its default), karpool does not model Dynamic Resource Allocation, and a node launched for such
// a pod might have none of the devices it claims.
const draReason = "the pod has Dynamic Resource Allocation requirements (ResourceClaims), which karpool does not provision for, as Karpenter"

// HasResourceClaims reports whether a pod spec claims resources through Dynamic Resource
// Allocation: at the pod level or in any container.
func HasResourceClaims(spec *corev1.PodSpec) bool {
	if len(spec.ResourceClaims) > 0 {
		return true
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if len(cs[i].Resources.Claims) > 0 {
				return true
			}
		}
	}
	return false
}

// buildClasses groups the pending pods into classes.
func (s *classSet) buildClasses() {
	s.vols = newVolumeIndex(s.in)
	s.podClass = make([]*class, len(s.in.Pods))
	idx := make(map[string]*class, 64)
	var buf []byte
	for i, pod := range s.in.Pods {
		if pod == nil {
			continue
		}
		s.reqs.resBuf = resourceKey(s.reqs.resBuf[:0], pod)
		buf = classKey(buf[:0], pod, s.reqs.resBuf)
		var vols [][]req
		var volWhy string
		if len(pod.Spec.Volumes) > 0 {
			vols, volWhy = s.vols.volumeTerms(pod)
			buf = appendVolumeKey(buf, vols, volWhy)
		}
		if HasResourceClaims(&pod.Spec) {
			volWhy = draReason
			buf = append(buf, 4, 'D')
		}
		c, ok := idx[string(buf)]
		if !ok {
			requests, unknown := s.reqs.requestsFor(s.reqs.resBuf, pod)
			c = &class{id: len(s.classes), req: requests, ns: pod.Namespace, labels: pod.Labels, vols: vols, blocked: volWhy}
			if unknown != "" {
				c.blocked = fmt.Sprintf("requests resource %s, which no instance type offers", unknown)
			}
			if pod.Spec.Priority != nil {
				c.priority = *pod.Spec.Priority
			}
			c.ports = s.ports.intern(hostPortsOf(&pod.Spec))
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
func (s *classSet) buildVariants(c *class, pod *corev1.Pod) {
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
	pr := podPreferencesOf(spec, s.in.Options.IgnorePreferences)
	cs := s.constraintsOf(c, pod, &pr)

	// PreferNoSchedule taints (when some pool or node has one) are avoided at every level and
	// tolerated at one more, the last, as Karpenter's final relaxation does.
	steps := len(pr.prefAff) + len(pr.prefAnti) + len(pr.prefNode) + len(pr.soft)
	avoidUpTo := -1
	if s.preferTaints && !s.in.Options.IgnorePreferences {
		avoidUpTo = steps
		steps++
	}
	for level := 0; level <= steps; level++ {
		s.addLevelVariants(c, spec, placeTerms, &pr, &cs, level, level <= avoidUpTo)
	}
}

// podPreferences are a pod's topology and affinity terms: required ones, and preferred ones
// heaviest first (the order they are relaxed in).
type podPreferences struct {
	prefNode          []corev1.PreferredSchedulingTerm
	prefAff, prefAnti []corev1.WeightedPodAffinityTerm
	reqAff, reqAnti   []corev1.PodAffinityTerm
	hard, soft        []corev1.TopologySpreadConstraint
}

// podPreferencesOf gathers the terms of a pod spec; ignore drops the preferences.
func podPreferencesOf(spec *corev1.PodSpec, ignore bool) podPreferences {
	var pr podPreferences
	if a := spec.Affinity; a != nil {
		if a.NodeAffinity != nil {
			pr.prefNode = slices.Clone(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAffinity != nil {
			pr.reqAff = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			pr.prefAff = slices.Clone(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			pr.reqAnti = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			pr.prefAnti = slices.Clone(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for _, t := range spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.ScheduleAnyway {
			pr.soft = append(pr.soft, t)
		} else {
			pr.hard = append(pr.hard, t)
		}
	}
	if ignore {
		pr.prefNode, pr.prefAff, pr.prefAnti, pr.soft = nil, nil, nil, nil
	}
	byWeight := func(a, b corev1.WeightedPodAffinityTerm) int { return int(b.Weight) - int(a.Weight) }
	slices.SortStableFunc(pr.prefAff, byWeight)
	slices.SortStableFunc(pr.prefAnti, byWeight)
	slices.SortStableFunc(pr.prefNode, func(a, b corev1.PreferredSchedulingTerm) int { return int(b.Weight) - int(a.Weight) })
	return pr
}

// classConstraints are a class's spread and affinity constraints with their counters: the
// always-on ones, and the preferred ones in relaxation order.
type classConstraints struct {
	hardSpreads, softSpreads []spreadC
	hardAffs, hardAntis      []affC
	prefAffs, prefAntis      []affC
}

// constraintsOf makes the counters of the class's terms; required anti-affinity terms are the
// class's own (class.owns).
func (s *classSet) constraintsOf(c *class, pod *corev1.Pod, pr *podPreferences) classConstraints {
	var cs classConstraints
	for i := range pr.hard {
		cs.hardSpreads = append(cs.hardSpreads, s.spreadFor(c, pod, &pr.hard[i]))
	}
	for i := range pr.reqAff {
		cs.hardAffs = append(cs.hardAffs, s.affFor(c, pod, &pr.reqAff[i], false))
	}
	for i := range pr.reqAnti {
		a := s.affFor(c, pod, &pr.reqAnti[i], true)
		cs.hardAntis = append(cs.hardAntis, a)
		c.owns = append(c.owns, a.ctr)
	}
	cs.softSpreads = make([]spreadC, len(pr.soft))
	for i := range pr.soft {
		cs.softSpreads[i] = s.spreadFor(c, pod, &pr.soft[i])
	}
	cs.prefAffs = make([]affC, len(pr.prefAff))
	for i := range pr.prefAff {
		cs.prefAffs[i] = s.affFor(c, pod, &pr.prefAff[i].PodAffinityTerm, false)
	}
	cs.prefAntis = make([]affC, len(pr.prefAnti))
	for i := range pr.prefAnti {
		// Preferred anti-affinity is not symmetric: a plain counter, without owners.
		cs.prefAntis[i] = s.affFor(c, pod, &pr.prefAnti[i].PodAffinityTerm, false)
	}
	return cs
}

// addLevelVariants adds the class's variants of one relaxation level, one per placement term:
// the preferences dropped at the level are, in order, preferred pod affinity, preferred
// anti-affinity, preferred node affinity, ScheduleAnyway spread; avoid keeps off
// PreferNoSchedule taints.
func (s *classSet) addLevelVariants(c *class, spec *corev1.PodSpec, placeTerms [][]req, pr *podPreferences, cs *classConstraints, level int, avoid bool) {
	// How many of each preference kind are dropped at this level.
	rem := level
	dAff := min(rem, len(pr.prefAff))
	rem -= dAff
	dAnti := min(rem, len(pr.prefAnti))
	rem -= dAnti
	dNode := min(rem, len(pr.prefNode))
	rem -= dNode
	dSoft := min(rem, len(pr.soft))
	for _, term := range placeTerms {
		v := &variant{}
		reqs := term
		if dNode < len(pr.prefNode) {
			reqs = slices.Clone(term)
			for _, e := range pr.prefNode[dNode].Preference.MatchExpressions {
				reqs = append(reqs, newReq(e.Key, e.Operator, e.Values))
			}
		}
		v.sig = s.sigFor(reqs, spec.Tolerations, avoid)
		v.spreads = append(slices.Clone(cs.hardSpreads), cs.softSpreads[dSoft:]...)
		v.affs = append(slices.Clone(cs.hardAffs), cs.prefAffs[dAff:]...)
		v.antis = append(slices.Clone(cs.hardAntis), cs.prefAntis[dAnti:]...)
		for _, sp := range v.spreads {
			v.markKey(s.topo.counters[sp.ctr].kind)
		}
		for _, a := range v.affs {
			v.markKey(s.topo.counters[a.ctr].kind)
		}
		for _, a := range v.antis {
			v.markKey(s.topo.counters[a.ctr].kind)
		}
		c.variants = append(c.variants, v)
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

func (s *classSet) spreadFor(c *class, pod *corev1.Pod, t *corev1.TopologySpreadConstraint) spreadC {
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
		ctr:           s.topo.counterWith(t.TopologyKey, nsMatcher{names: []string{pod.Namespace}}, sel, false, filter),
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
	s.topo.counters[sc.ctr].used = true
	return sc
}

func (s *classSet) affFor(c *class, pod *corev1.Pod, t *corev1.PodAffinityTerm, anti bool) affC {
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
	a := affC{ctr: s.topo.counterFor(t.TopologyKey, ns, sel, anti)}
	a.self = ns.matches(pod.Namespace) && sel.Matches(labels.Set(pod.Labels))
	s.topo.counters[a.ctr].used = true
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
func (s *classSet) termNamespaces(podNS string, t *corev1.PodAffinityTerm) nsMatcher {
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
