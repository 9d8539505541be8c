// Package checker verifies a scheduling Result against its Input, independently of the engine:
// it replays the bindings in order on a model of the cluster built from the Kubernetes objects
// and checks every constraint with the upstream helpers (k8s.io/component-helpers for node
// affinity, tolerations and pod requests) and its own straightforward (slow, map-based)
// topology bookkeeping. It shares no fit logic with the engine.
//
// What it checks:
//   - every pending pod is bound exactly once or reported unschedulable;
//   - every binding satisfies node affinity and nodeSelector, taints, resources (allocatable
//     minus daemonsets; pod-level requests, init and sidecar containers, overhead), host ports
//     (pods and daemonsets), volume topology (a bound volume's node affinity, a storage class's
//     allowed topologies), topology spread (DoNotSchedule), required pod affinity and
//     anti-affinity (including the anti-affinity of pods already there), at the moment it is
//     bound;
//   - every new NodeClaim lists 1..60 instance types, cheapest first, each compatible with the
//     pool and the pods and big enough for the pods plus daemonsets, with consistent prices,
//     zones and capacity types, minValues met, and the pool limits (cost limits too) hold;
//   - no unschedulable pod fits on any node of the final state or on a fresh node of any pool.
package schedulingcheck

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

const (
	keyZone     = "topology.kubernetes.io/zone"
	keyHostname = "kubernetes.io/hostname"
	keyCT       = "karpenter.sh/capacity-type"
	keyPool     = "karpenter.sh/nodepool"
	keyRegion   = "topology.kubernetes.io/region"
	keyType     = "node.kubernetes.io/instance-type"
	maxReported = 20
)

// Options tune the check.
type Options struct {
	// MaxInstanceTypes is the cap on listed instance types (default 60).
	MaxInstanceTypes int
	// MaxUnschedulableChecked bounds the (expensive) "could it have fit" search; default 200.
	MaxUnschedulableChecked int
}

// Check verifies res against in. It returns nil or an error listing the violations.
func Check(in *scheduling.Input, res *scheduling.Result) error {
	return CheckWith(in, res, Options{})
}

// CheckWith is Check with options.
func CheckWith(in *scheduling.Input, res *scheduling.Result, o Options) error {
	if o.MaxInstanceTypes <= 0 {
		o.MaxInstanceTypes = 60
		if in.Options.MaxInstanceTypes > 0 {
			o.MaxInstanceTypes = in.Options.MaxInstanceTypes
		}
	}
	if o.MaxUnschedulableChecked <= 0 {
		o.MaxUnschedulableChecked = 200
	}
	c := &checker{in: in, res: res, opts: o, nodes: map[string]*node{}, counters: map[string]*counter{},
		potential: map[string]*potential{}, filterOK: map[eligKey]bool{}, owners: map[string]*owner{},
		domains: map[string]map[string]bool{}, affKeys: map[*corev1.Pod]string{}}
	c.run()
	if len(c.errs) == 0 {
		return nil
	}
	msgs := c.errs
	if len(msgs) > maxReported {
		msgs = append(msgs[:maxReported:maxReported], fmt.Sprintf("... and %d more", len(c.errs)-maxReported))
	}
	return errors.New(strings.Join(msgs, "\n"))
}

type node struct {
	// visible: a new NodeClaim's node becomes a topology domain when its first pod is bound
	// (the engine opens a NodeClaim for its first pod); existing nodes are visible from the start.
	visible  bool
	name     string
	obj      *corev1.Node
	alloc    map[corev1.ResourceName]int64
	used     map[corev1.ResourceName]int64
	pods     []*corev1.Pod
	taints   []corev1.Taint // taints a pod must tolerate
	cordoned bool
	pool     string
	claim    *scheduling.NodeClaim
	capacity map[corev1.ResourceName]int64
	// cost is what the node counts against its pool's cost limit (cost.go).
	cost float64
	// ports are the host ports of the pods bound and the daemonsets running there.
	ports []hostPort
	// unlaunched: an in-flight NodeClaim whose instance type (so zone and other labels) is not
	// decided yet; an engine may keep pods off it for constraints it cannot judge yet.
	unlaunched bool
}

type checker struct {
	in        *scheduling.Input
	res       *scheduling.Result
	opts      Options
	errs      []string
	nodes     map[string]*node
	order     []*node
	counters  map[string]*counter
	owners    map[string]*owner
	potential map[string]*potential
	filterOK  map[eligKey]bool
	domains   map[string]map[string]bool
	affKeys   map[*corev1.Pod]string
	nsLabels  map[string]map[string]string
	// reserved counts the new NodeClaims pinned to each capacity reservation.
	reserved map[string]int
}

type eligKey struct{ aff, node string }

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// amounts converts a ResourceList into integer amounts (cpu in millicores).
func amounts(list corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(list))
	for k, q := range list {
		if k == corev1.ResourceCPU {
			out[k] = q.MilliValue()
		} else {
			out[k] = q.Value()
		}
	}
	return out
}

func fromCatalog(r catalog.Resources) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for i := catalog.Resource(0); i < catalog.NumResources; i++ {
		if r[i] != 0 {
			out[corev1.ResourceName(catalog.ResourceNames[i])] = r[i]
		}
	}
	return out
}

// requests is what a pod reserves, per the upstream helper (pod-level resources included), with
// requests defaulted from limits as the API server would, and one "pods" slot.
func requests(p *corev1.Pod) map[corev1.ResourceName]int64 {
	pod := p
	if needsDefault(p) {
		pod = p.DeepCopy()
		for j := range pod.Spec.Containers {
			defaultRequests(&pod.Spec.Containers[j].Resources)
		}
		for j := range pod.Spec.InitContainers {
			defaultRequests(&pod.Spec.InitContainers[j].Resources)
		}
		if pod.Spec.Resources != nil {
			defaultRequests(pod.Spec.Resources)
		}
	}
	out := amounts(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	out[corev1.ResourcePods]++
	return out
}

// needsDefault reports whether some limit of the pod (container, init container or pod level)
// has no request beside it.
func needsDefault(p *corev1.Pod) bool {
	all := []*corev1.ResourceRequirements{p.Spec.Resources}
	for i := range p.Spec.Containers {
		all = append(all, &p.Spec.Containers[i].Resources)
	}
	for i := range p.Spec.InitContainers {
		all = append(all, &p.Spec.InitContainers[i].Resources)
	}
	for _, r := range all {
		if r == nil {
			continue
		}
		for k := range r.Limits {
			if _, ok := r.Requests[k]; !ok {
				return true
			}
		}
	}
	return false
}

func defaultRequests(r *corev1.ResourceRequirements) {
	for k, v := range r.Limits {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		if _, ok := r.Requests[k]; !ok {
			r.Requests[k] = v
		}
	}
}

func add(dst, v map[corev1.ResourceName]int64, sign int64) {
	for k, x := range v {
		dst[k] += sign * x
	}
}

// fitsIn reports the first resource where used+req exceeds alloc ("" if it fits). Resources
// the node does not list count as zero.
func fitsIn(used, req, alloc map[corev1.ResourceName]int64) string {
	for k, x := range req {
		if x == 0 {
			continue
		}
		if used[k]+x > alloc[k] {
			return fmt.Sprintf("%s (needs %d, %d of %d used)", k, x, used[k], alloc[k])
		}
	}
	return ""
}

// blocking returns the taints a pod must tolerate to land on the node.
func blocking(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

func tolerates(p *corev1.PodSpec, taints []corev1.Taint) (corev1.Taint, bool) {
	for i := range taints {
		if !corev1helpers.TolerationsTolerateTaint(klog.Background(), p.Tolerations, &taints[i], false) {
			return taints[i], false
		}
	}
	return corev1.Taint{}, true
}

func affinityMatches(p *corev1.Pod, n *corev1.Node) bool {
	ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n)
	return err == nil && ok
}

func (c *checker) pool(name string) *scheduling.Pool {
	for i := range c.in.Pools {
		if np := c.in.Pools[i].NodePool; np != nil && np.Name == name {
			return &c.in.Pools[i]
		}
	}
	return nil
}

// daemonOverhead sums the requests of the daemonsets that would run on the node.
func (c *checker) daemonOverhead(n *corev1.Node, taints []corev1.Taint) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, pod := range c.daemonsOn(n, taints) {
		add(out, requests(pod), 1)
	}
	return out
}

// daemonsOn lists the pods of the daemonsets that would run on the node.
func (c *checker) daemonsOn(n *corev1.Node, taints []corev1.Taint) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ds := range c.in.DaemonSets {
		if ds == nil || scheduling.HasResourceClaims(&ds.Spec.Template.Spec) {
			continue
		}
		pod := &corev1.Pod{Spec: *ds.Spec.Template.Spec.DeepCopy()}
		if !affinityMatches(pod, n) {
			continue
		}
		if _, ok := tolerates(&pod.Spec, taints); !ok {
			continue
		}
		out = append(out, pod)
	}
	return out
}

// addDaemons reserves on a node that has no pods bound yet what its daemonsets take: their
// requests and host ports.
func (c *checker) addDaemons(n *node) {
	for _, pod := range c.daemonsOn(n.obj, n.taints) {
		add(n.used, requests(pod), 1)
		n.ports = append(n.ports, hostPorts(pod)...)
	}
}

func (c *checker) run() {
	c.buildNodes()
	if len(c.errs) > 0 {
		return
	}
	c.checkAccounting()
	for _, b := range c.res.Bindings {
		c.replay(b)
	}
	c.checkClaims()
	c.checkLimits()
	c.checkCostLimits()
	c.checkReservations()
	c.checkUnschedulable()
}

// buildNodes models existing nodes, in-flight NodeClaims and new NodeClaims as nodes.
func (c *checker) buildNodes() {
	c.nsLabels = map[string]map[string]string{}
	for _, ns := range c.in.Namespaces {
		if ns != nil {
			c.nsLabels[ns.Name] = ns.Labels
		}
	}
	for _, en := range c.in.Nodes {
		if en.Node == nil {
			continue
		}
		n := &node{name: en.Node.Name, obj: en.Node.DeepCopy(), alloc: amounts(en.Node.Status.Allocatable), used: map[corev1.ResourceName]int64{},
			cordoned: en.Node.Spec.Unschedulable, pool: en.Node.Labels[keyPool], capacity: amounts(en.Node.Status.Capacity)}
		if n.obj.Labels == nil {
			n.obj.Labels = map[string]string{}
		}
		if _, ok := n.obj.Labels[keyHostname]; !ok {
			n.obj.Labels[keyHostname] = n.name
		}
		n.taints = blocking(en.Node.Spec.Taints)
		if n.pool != "" && en.Node.Labels["karpenter.sh/initialized"] != "true" {
			n.taints = c.withoutStartupTaints(n.pool, n.taints)
		}
		n.cost = c.nodeCost(n, nil)
		c.addNode(n)
		for _, p := range en.Pods {
			if p != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				c.bind(n, p)
			}
		}
	}
	for _, fl := range c.in.NodeClaims {
		nc := fl.NodeClaim
		if nc == nil {
			continue
		}
		lbl := map[string]string{}
		for k, v := range nc.Labels {
			lbl[k] = v
		}
		for _, r := range nc.Spec.Requirements {
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				if _, ok := lbl[r.Key]; !ok {
					lbl[r.Key] = r.Values[0]
				}
			}
		}
		if _, ok := lbl[keyHostname]; !ok {
			h := nc.Status.NodeName
			if h == "" {
				h = nc.Name
			}
			lbl[keyHostname] = h
		}
		// Its node will carry the aliases the kubelet, cloud controller and CSI driver add.
		karpv1.WithLabelAliases(lbl)
		var taints []corev1.Taint
		for _, t := range nc.Spec.Taints {
			taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: lbl}, Spec: corev1.NodeSpec{Taints: taints}}
		n := &node{name: nc.Name, obj: obj, used: map[corev1.ResourceName]int64{}, pool: lbl[keyPool], taints: blocking(taints)}
		it := c.findType(n.pool, lbl[keyType])
		switch {
		case len(nc.Status.Allocatable) > 0:
			n.alloc = amounts(nc.Status.Allocatable)
			n.capacity = amounts(nc.Status.Capacity)
			if it != nil {
				c.addDaemons(n)
			}
		case it != nil:
			n.alloc = fromCatalog(it.Allocatable)
			n.capacity = fromCatalog(it.Capacity)
			c.addDaemons(n)
		default:
			// Not launched, several instance types possible: the room every option has.
			if !c.unlaunched(n, nc) {
				n.alloc = map[corev1.ResourceName]int64{}
				n.cordoned = true
			}
		}
		if len(n.capacity) == 0 && it != nil {
			n.capacity = fromCatalog(it.Capacity)
		}
		n.cost = c.nodeCost(n, nc)
		c.addNode(n)
		for _, p := range fl.Pods {
			if p != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				c.bind(n, p)
			}
		}
	}
	for i := range c.res.NodeClaims {
		nc := &c.res.NodeClaims[i]
		if len(nc.InstanceTypes) == 0 || nc.InstanceTypes[0].Type == nil {
			c.fail("nodeclaim %s lists no instance type", nc.Name)
			continue
		}
		pool := c.pool(nc.Pool)
		if pool == nil {
			c.fail("nodeclaim %s: unknown pool %q", nc.Name, nc.Pool)
			continue
		}
		it := nc.InstanceTypes[0].Type
		lbl := c.newNodeLabels(pool, it, nc.Labels[keyZone], nc.Labels[keyCT], nc.Name)
		for k, v := range nc.Labels {
			if _, ok := lbl[k]; !ok {
				lbl[k] = v // narrowed pool-defined labels
			}
		}
		for k, v := range lbl {
			if _, alias := karpv1.NormalizedLabels[k]; alias {
				continue // the kubelet, cloud controller or CSI driver sets it, not karpool
			}
			if nc.Labels[k] != v {
				c.fail("nodeclaim %s: label %s=%q, expected %q for its cheapest option %s", nc.Name, k, nc.Labels[k], v, it.Name)
			}
		}
		taints := poolTaints(pool.NodePool)
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: lbl}, Spec: corev1.NodeSpec{Taints: taints}}
		n := &node{name: nc.Name, obj: obj, alloc: fromCatalog(it.Allocatable), used: map[corev1.ResourceName]int64{}, pool: nc.Pool,
			taints: blocking(taints), claim: nc, capacity: fromCatalog(it.Capacity)}
		c.addDaemons(n)
		n.cost = c.nodeCost(n, nil)
		if _, dup := c.nodes[n.name]; dup {
			c.fail("nodeclaim name %s collides with another node", n.name)
			continue
		}
		c.addNode(n)
	}
}

func poolTaints(np *karpv1.NodePool) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range np.Spec.Template.Spec.Taints {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

func (c *checker) withoutStartupTaints(pool string, taints []corev1.Taint) []corev1.Taint {
	ephemeral := map[string]bool{"node.kubernetes.io/not-ready": true, "node.kubernetes.io/unreachable": true,
		"node.cloudprovider.kubernetes.io/uninitialized": true, "karpenter.sh/unregistered": true}
	p := c.pool(pool)
	var out []corev1.Taint
	for _, t := range taints {
		if ephemeral[t.Key] {
			continue
		}
		startup := false
		if p != nil {
			for _, st := range p.NodePool.Spec.Template.Spec.StartupTaints {
				if st.Key == t.Key && st.Effect == t.Effect && (st.Value == "" || st.Value == t.Value) {
					startup = true
				}
			}
		}
		if !startup {
			out = append(out, t)
		}
	}
	return out
}

// unlaunched sizes an in-flight NodeClaim that may still become any of the instance types its
// requirement lists: per resource, the least any option leaves once the daemonsets that would
// run on it are placed; the host ports of those daemonsets on any option; the largest option's
// capacity for limits (the options the pool can launch). False when some option is not one the
// pool can launch (the room is not known) or none is listed.
func (c *checker) unlaunched(n *node, nc *karpv1.NodeClaim) bool {
	var alloc map[corev1.ResourceName]int64
	capacity := map[corev1.ResourceName]int64{}
	unknown := false
	for _, r := range nc.Spec.Requirements {
		if r.Key != keyType || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for _, name := range r.Values {
			it := c.findType(n.pool, name)
			if it == nil || !c.launchable(n.pool, it) {
				unknown = true
				continue
			}
			for k, v := range fromCatalog(it.Capacity) {
				capacity[k] = max(capacity[k], v)
			}
			labels := maps.Clone(n.obj.Labels)
			maps.Copy(labels, it.Labels)
			probe := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
			room := fromCatalog(it.Allocatable)
			for _, pod := range c.daemonsOn(probe, n.taints) {
				add(room, requests(pod), -1)
				n.ports = append(n.ports, hostPorts(pod)...)
			}
			if alloc == nil {
				alloc = room
				continue
			}
			for k, v := range alloc {
				alloc[k] = min(v, room[k])
			}
		}
	}
	// Limits count the largest option the pool can launch, whether or not the room is known.
	n.capacity = capacity
	if alloc == nil || unknown {
		return false
	}
	n.alloc, n.unlaunched = alloc, true
	return true
}

// launchable reports whether the pool allows the type with some available offering.
func (c *checker) launchable(pool string, it *catalog.InstanceType) bool {
	p := c.pool(pool)
	if p == nil || p.NodePool == nil {
		return false
	}
	for _, o := range it.Offerings {
		if o.Available && c.poolAllows(p.NodePool, it, o) {
			return true
		}
	}
	return false
}

func (c *checker) findType(pool, name string) *catalog.InstanceType {
	p := c.pool(pool)
	if p == nil {
		return nil
	}
	for i := range p.InstanceTypes {
		if p.InstanceTypes[i].Name == name {
			return &p.InstanceTypes[i]
		}
	}
	return nil
}

// newNodeLabels are the labels a node of the pool, type and offering carries.
func (c *checker) newNodeLabels(pool *scheduling.Pool, it *catalog.InstanceType, zone, ct, hostname string) map[string]string {
	lbl := map[string]string{}
	for k, v := range it.Labels {
		lbl[k] = v
	}
	for k, v := range pool.NodePool.Spec.Template.Labels {
		lbl[k] = v
	}
	lbl[keyPool] = pool.NodePool.Name
	lbl[keyZone] = zone
	lbl[keyCT] = ct
	lbl[keyHostname] = hostname
	if c.in.Region != "" {
		lbl[keyRegion] = c.in.Region
	}
	return karpv1.WithLabelAliases(lbl)
}

func (c *checker) addNode(n *node) {
	n.visible = n.claim == nil
	if _, dup := c.nodes[n.name]; dup {
		c.fail("two nodes are named %s", n.name)
	}
	c.nodes[n.name] = n
	c.order = append(c.order, n)
}

// bind records a pod on a node and updates every counter and owner registry.
func (c *checker) bind(n *node, p *corev1.Pod) {
	n.visible = true
	add(n.used, requests(p), 1)
	n.ports = append(n.ports, hostPorts(p)...)
	n.pods = append(n.pods, p)
	for _, ctr := range c.counters {
		ctr.observe(c, n, p)
	}
	if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil {
		for i := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			t := &p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			dom, ok := n.obj.Labels[t.TopologyKey]
			if !ok {
				continue
			}
			ns, sel := c.termNamespaces(p, t), c.termSelector(p, t)
			k := fmt.Sprintf("%v|%s|%s", ns, sel.String(), t.TopologyKey)
			o := c.owners[k]
			if o == nil {
				o = &owner{ns: ns, sel: sel, key: t.TopologyKey, domains: map[string]int{}}
				c.owners[k] = o
			}
			o.domains[dom]++
		}
	}
}

// checkAccounting: every pending pod is bound once or unschedulable, and claims list their pods.
func (c *checker) checkAccounting() {
	seen := map[*corev1.Pod]int{}
	for _, b := range c.res.Bindings {
		seen[b.Pod]++
		if _, ok := c.nodes[b.Node]; !ok {
			c.fail("pod %s bound to unknown node %s", podName(b.Pod), b.Node)
		}
		if scheduling.HasResourceClaims(&b.Pod.Spec) {
			c.fail("pod %s has ResourceClaims, which are not provisioned for, but was placed on %s", podName(b.Pod), b.Node)
		}
		if b.NodeClaim >= 0 {
			if b.NodeClaim >= len(c.res.NodeClaims) || c.res.NodeClaims[b.NodeClaim].Name != b.Node {
				c.fail("pod %s: binding NodeClaim index %d does not match node %s", podName(b.Pod), b.NodeClaim, b.Node)
			}
		} else if n := c.nodes[b.Node]; n != nil && n.claim != nil {
			c.fail("pod %s bound to new NodeClaim %s without its index", podName(b.Pod), b.Node)
		}
	}
	for _, u := range c.res.Unschedulable {
		seen[u.Pod]++
		if u.Reason == "" {
			c.fail("pod %s is unschedulable without a reason", podName(u.Pod))
		}
	}
	for _, p := range c.in.Pods {
		if p == nil {
			continue
		}
		switch seen[p] {
		case 1:
		case 0:
			c.fail("pod %s is neither bound nor reported unschedulable", podName(p))
		default:
			c.fail("pod %s appears %d times in the result", podName(p), seen[p])
		}
		delete(seen, p)
	}
	for p := range seen {
		c.fail("result mentions pod %s, which is not pending", podName(p))
	}
	inClaim := map[*corev1.Pod]string{}
	for i := range c.res.NodeClaims {
		for _, p := range c.res.NodeClaims[i].Pods {
			inClaim[p] = c.res.NodeClaims[i].Name
		}
	}
	for _, b := range c.res.Bindings {
		if b.NodeClaim >= 0 && inClaim[b.Pod] != b.Node {
			c.fail("pod %s bound to %s but listed under %q", podName(b.Pod), b.Node, inClaim[b.Pod])
		}
	}
}

// replay checks one binding against the state so far, then applies it.
func (c *checker) replay(b scheduling.Binding) {
	n := c.nodes[b.Node]
	if n == nil {
		return
	}
	if why := c.violates(b.Pod, n, true); why != "" {
		c.fail("pod %s on %s: %s", podName(b.Pod), n.name, why)
	}
	c.bind(n, b.Pod)
}

// violates explains why the pod cannot be bound to the node now ("" if it can).
func (c *checker) violates(p *corev1.Pod, n *node, checkResources bool) string {
	if n.cordoned {
		return "node does not accept pods"
	}
	if !affinityMatches(p, n.obj) {
		return "node affinity / nodeSelector not satisfied"
	}
	if t, ok := tolerates(&p.Spec, n.taints); !ok {
		return fmt.Sprintf("taint %s=%s:%s not tolerated", t.Key, t.Value, t.Effect)
	}
	if checkResources {
		if r := fitsIn(n.used, requests(p), n.alloc); r != "" {
			return "does not fit: " + r
		}
	}
	if why := portClash(hostPorts(p), n.ports); why != "" {
		return why
	}
	if why := c.volumeViolation(p, n); why != "" {
		return why
	}
	return c.topologyViolation(p, n)
}

func (c *checker) topologyViolation(p *corev1.Pod, n *node) string {
	for i := range p.Spec.TopologySpreadConstraints {
		t := &p.Spec.TopologySpreadConstraints[i]
		if t.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if why := c.spreadViolation(p, n, t); why != "" {
			return why
		}
	}
	a := p.Spec.Affinity
	if a != nil && a.PodAffinity != nil {
		for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			t := &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			ctr := c.counter(c.termNamespaces(p, t), c.termSelector(p, t), t.TopologyKey, nil)
			dom, ok := n.obj.Labels[t.TopologyKey]
			if !ok {
				return "node lacks pod affinity topology key " + t.TopologyKey
			}
			if ctr.total == 0 {
				if !(ctr.ns.matches(p.Namespace) && ctr.sel.Matches(labels.Set(p.Labels))) {
					return "no pod matches the required pod affinity"
				}
				continue
			}
			if ctr.counts[dom] == 0 {
				return fmt.Sprintf("pod affinity: no matching pod in %s=%s", t.TopologyKey, dom)
			}
		}
	}
	if a != nil && a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			t := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			ctr := c.counter(c.termNamespaces(p, t), c.termSelector(p, t), t.TopologyKey, nil)
			if dom, ok := n.obj.Labels[t.TopologyKey]; ok && ctr.counts[dom] > 0 {
				return fmt.Sprintf("pod anti-affinity: %d matching pods in %s=%s", ctr.counts[dom], t.TopologyKey, dom)
			}
		}
	}
	for _, o := range c.owners {
		if dom, ok := n.obj.Labels[o.key]; ok && o.domains[dom] > 0 && o.ns.matches(p.Namespace) && o.sel.Matches(labels.Set(p.Labels)) {
			return fmt.Sprintf("anti-affinity of a pod already in %s=%s", o.key, dom)
		}
	}
	return ""
}

func (c *checker) spreadViolation(p *corev1.Pod, n *node, t *corev1.TopologySpreadConstraint) string {
	ls := t.LabelSelector
	if ls != nil && len(t.MatchLabelKeys) > 0 {
		ls = ls.DeepCopy()
		for _, k := range t.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	sel := selector(ls)
	honor := t.NodeAffinityPolicy == nil || *t.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
	var filter *corev1.Pod
	if honor {
		filter = p
	}
	ctr := c.counter(nsMatcher{names: []string{p.Namespace}}, sel, t.TopologyKey, filter)
	dom, ok := n.obj.Labels[t.TopologyKey]
	if !ok {
		return "node lacks topology spread key " + t.TopologyKey
	}
	// Eligible domains: nodes the pod could use (node affinity honoured) plus what the pools
	// could launch for it. A new node can always be launched for a hostname domain.
	pot := c.potentialFor(p)
	lo := int64(math.MaxInt64)
	ndom := 0
	if t.TopologyKey == keyHostname && pot.any {
		lo = 0
	} else if t.TopologyKey == keyHostname {
		// No new node can be launched for the pod: the least count over the nodes that exist.
		honorTaints := t.NodeTaintsPolicy != nil && *t.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		for _, m := range c.order {
			if !m.visible || (honor && !c.eligible(p, m)) {
				continue
			}
			if honorTaints {
				if _, tol := tolerates(&p.Spec, m.taints); !tol {
					continue
				}
			}
			lo = min(lo, int64(ctr.counts[m.obj.Labels[keyHostname]]))
			ndom++
		}
	} else {
		honorTaints := t.NodeTaintsPolicy != nil && *t.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		domains := c.eligibleDomains(p, t.TopologyKey, honor, honorTaints)
		for v := range domains {
			lo = min(lo, int64(ctr.counts[v]))
		}
		ndom = len(domains)
	}
	if lo == math.MaxInt64 || (t.MinDomains != nil && int32(ndom) < *t.MinDomains && lo != 0) {
		lo = 0
	}
	self := int64(0)
	if sel.Matches(labels.Set(p.Labels)) {
		self = 1
	}
	if skew := int64(ctr.counts[dom]) + self - lo; skew > int64(t.MaxSkew) {
		return fmt.Sprintf("topology spread on %s: skew %d > maxSkew %d in %s", t.TopologyKey, skew, t.MaxSkew, dom)
	}
	return ""
}

// eligibleDomains are the values of a topology key over the nodes a pod may use and the new
// nodes the pools could launch for it (cached per pod spec).
func (c *checker) eligibleDomains(p *corev1.Pod, key string, honor, honorTaints bool) map[string]bool {
	ck := fmt.Sprintf("%s|%s|%v|%v|%v", c.affinityKeyOf(p), key, honor, honorTaints, p.Spec.Tolerations)
	if d, ok := c.domains[ck]; ok {
		return d
	}
	domains := map[string]bool{}
	for _, m := range c.order {
		v, ok := m.obj.Labels[key]
		if !ok || (honor && !c.eligible(p, m)) {
			continue
		}
		if honorTaints {
			if _, tol := tolerates(&p.Spec, m.taints); !tol {
				continue
			}
		}
		domains[v] = true
	}
	if key != keyHostname {
		pot := c.potentialFor(p)
		vals := pot.values[key]
		if honorTaints {
			vals = pot.valuesTol[key]
		}
		for v := range vals {
			domains[v] = true
		}
	}
	c.domains[ck] = domains
	return domains
}

func (c *checker) affinityKeyOf(p *corev1.Pod) string {
	if k, ok := c.affKeys[p]; ok {
		return k
	}
	k := affinityKey(p)
	c.affKeys[p] = k
	return k
}

// eligible reports whether node m matches the pod's node affinity (cached per spec and node).
func (c *checker) eligible(p *corev1.Pod, m *node) bool {
	key := eligKey{c.affinityKeyOf(p), m.name}
	if v, ok := c.filterOK[key]; ok {
		return v
	}
	v := affinityMatches(p, m.obj)
	c.filterOK[key] = v
	return v
}

func affinityKey(p *corev1.Pod) string {
	var b strings.Builder
	keys := make([]string, 0, len(p.Spec.NodeSelector))
	for k := range p.Spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + p.Spec.NodeSelector[k] + ";")
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		fmt.Fprintf(&b, "%v", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	return b.String()
}

// potential describes the new nodes the pools could launch for a pod spec: any reports that
// one can be launched (taints tolerated); values are the label values of the nodes matching
// the pod's node affinity, ignoring taints (valuesTol: only tolerated pools).
type potential struct {
	any       bool
	values    map[string]map[string]bool // topology key -> values
	valuesTol map[string]map[string]bool
}

func (c *checker) potentialFor(p *corev1.Pod) *potential {
	key := c.affinityKeyOf(p) + "\x01" + fmt.Sprint(p.Spec.Tolerations)
	if pt, ok := c.potential[key]; ok {
		return pt
	}
	pt := &potential{values: map[string]map[string]bool{}, valuesTol: map[string]map[string]bool{}}
	addVals := func(m map[string]map[string]bool, lbl map[string]string) {
		for k, v := range lbl {
			if k == keyHostname {
				continue
			}
			if m[k] == nil {
				m[k] = map[string]bool{}
			}
			m[k][v] = true
		}
	}
	for i := range c.in.Pools {
		pool := &c.in.Pools[i]
		if pool.NodePool == nil || pool.NodePool.Spec.Replicas != nil {
			continue
		}
		_, tol := tolerates(&p.Spec, blocking(poolTaints(pool.NodePool)))
		for j := range pool.InstanceTypes {
			it := &pool.InstanceTypes[j]
			for _, o := range it.Offerings {
				if !o.Available || !c.poolAllows(pool.NodePool, it, o) {
					continue
				}
				for _, extra := range customVariants(pool.NodePool, it) {
					lbl := c.newNodeLabels(pool, it, o.Zone, o.CapacityType, "potential")
					for k, v := range extra {
						lbl[k] = v
					}
					if !affinityMatches(p, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: lbl}}) {
						continue
					}
					addVals(pt.values, lbl)
					if tol {
						pt.any = true
						addVals(pt.valuesTol, lbl)
					}
				}
			}
		}
	}
	c.potential[key] = pt
	return pt
}

// poolAllows evaluates a NodePool's requirements (all operators, Gte/Lte included) on an
// instance type and offering.
func (c *checker) poolAllows(np *karpv1.NodePool, it *catalog.InstanceType, o catalog.Offering) bool {
	lbl := map[string]string{}
	for k, v := range it.Labels {
		lbl[k] = v
	}
	lbl[keyZone] = o.Zone
	lbl[keyCT] = o.CapacityType
	// A template label is a requirement `key In [value]` (Karpenter): on a label the type or
	// offering sets, it must agree.
	for k, v := range np.Spec.Template.Labels {
		if fact, ok := lbl[k]; ok && fact != v {
			return false
		}
		lbl[k] = v
	}
	ctExplicit := np.Spec.Template.Labels[keyCT] == karpv1.CapacityTypeReserved
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == keyCT {
			for _, v := range r.Values {
				if v == karpv1.CapacityTypeReserved && r.Operator == corev1.NodeSelectorOpIn {
					ctExplicit = true
				}
			}
		}
		v, has := lbl[r.Key]
		if !has && !isInstanceKey(r.Key) && r.Key != keyZone && r.Key != keyCT {
			continue // a pool-defined label: set on the node from the requirement
		}
		if !reqMatches(r.Operator, r.Values, v, has) {
			return false
		}
	}
	if o.CapacityType == karpv1.CapacityTypeReserved && !ctExplicit {
		return false
	}
	return true
}

// customVariants enumerates the values of the labels a pool defines through requirements
// (keys that are not instance type, zone or capacity type labels) with the In operator: a node
// of the pool carries one of them. At most 64 combinations.
func customVariants(np *karpv1.NodePool, it *catalog.InstanceType) []map[string]string {
	out := []map[string]string{{}}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if _, typ := it.Labels[r.Key]; typ || isInstanceKey(r.Key) || r.Key == keyZone || r.Key == keyCT || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		if _, fixed := np.Spec.Template.Labels[r.Key]; fixed {
			continue
		}
		var next []map[string]string
		for _, base := range out {
			for _, v := range r.Values {
				m := map[string]string{r.Key: v}
				for k, x := range base {
					m[k] = x
				}
				next = append(next, m)
				if len(next) >= 64 {
					break
				}
			}
		}
		out = next
	}
	return out
}

func isInstanceKey(k string) bool {
	return k == keyType || k == "kubernetes.io/arch" || k == "kubernetes.io/os" || strings.HasPrefix(k, "karpenter.k8s.aws/instance-")
}

func reqMatches(op corev1.NodeSelectorOperator, values []string, v string, has bool) bool {
	contains := func() bool {
		for _, x := range values {
			if x == v {
				return true
			}
		}
		return false
	}
	switch op {
	case corev1.NodeSelectorOpIn:
		return has && contains()
	case corev1.NodeSelectorOpNotIn:
		return !has || !contains()
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	}
	if !has || len(values) != 1 {
		return false
	}
	a, err1 := strconv.ParseInt(v, 10, 64)
	b, err2 := strconv.ParseInt(values[0], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	switch op {
	case corev1.NodeSelectorOpGt:
		return a > b
	case corev1.NodeSelectorOpLt:
		return a < b
	case "Gte":
		return a >= b
	case "Lte":
		return a <= b
	}
	return false
}

// checkClaims verifies the instance type lists of the new NodeClaims.
func (c *checker) checkClaims() {
	for i := range c.res.NodeClaims {
		nc := &c.res.NodeClaims[i]
		pool := c.pool(nc.Pool)
		if pool == nil || len(nc.InstanceTypes) == 0 {
			continue
		}
		if len(nc.Pods) == 0 {
			c.fail("nodeclaim %s has no pods", nc.Name)
		}
		if len(nc.InstanceTypes) > c.opts.MaxInstanceTypes {
			c.fail("nodeclaim %s lists %d instance types (max %d)", nc.Name, len(nc.InstanceTypes), c.opts.MaxInstanceTypes)
		}
		zones, cts := setOf(nc.Zones), setOf(nc.CapacityTypes)
		podReq := map[corev1.ResourceName]int64{}
		for _, p := range nc.Pods {
			add(podReq, requests(p), 1)
		}
		taints := blocking(poolTaints(pool.NodePool))
		prev := -1.0
		for j, opt := range nc.InstanceTypes {
			it := opt.Type
			if it == nil || c.findType(nc.Pool, it.Name) == nil {
				c.fail("nodeclaim %s: option %d is not an instance type of pool %s", nc.Name, j, nc.Pool)
				continue
			}
			if opt.PricePerHour < prev {
				c.fail("nodeclaim %s: instance types not sorted by price (%s)", nc.Name, it.Name)
			}
			prev = opt.PricePerHour
			if len(opt.Offerings) == 0 {
				c.fail("nodeclaim %s: %s has no offering", nc.Name, it.Name)
				continue
			}
			cheapest := math.Inf(1)
			for _, o := range opt.Offerings {
				cheapest = min(cheapest, o.PricePerHour)
				if !o.Available || !zones[o.Zone] || !cts[o.CapacityType] || !c.poolAllows(pool.NodePool, it, o) {
					c.fail("nodeclaim %s: %s offering %s/%s is not allowed or not available", nc.Name, it.Name, o.Zone, o.CapacityType)
				}
			}
			if cheapest != opt.PricePerHour {
				c.fail("nodeclaim %s: %s priced %.4f, its cheapest offering %.4f", nc.Name, it.Name, opt.PricePerHour, cheapest)
			}
			c.checkOfferingVolumes(nc, pool, it, opt.Offerings)
			zone := opt.Offerings[0].Zone
			if j == 0 {
				zone = nc.Labels[keyZone]
				found := false
				for _, o := range opt.Offerings {
					if o.Zone == zone && o.CapacityType == nc.Labels[keyCT] && o.PricePerHour == opt.PricePerHour {
						found = true
					}
				}
				if !found {
					c.fail("nodeclaim %s: labels %s/%s are not the cheapest offering of %s", nc.Name, zone, nc.Labels[keyCT], it.Name)
				}
			}
			lbl := c.newNodeLabels(pool, it, zone, opt.Offerings[0].CapacityType, nc.Name)
			for k, v := range nc.Labels {
				if _, ok := lbl[k]; !ok {
					lbl[k] = v
				}
			}
			obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: lbl}, Spec: corev1.NodeSpec{Taints: poolTaints(pool.NodePool)}}
			used := c.daemonOverhead(obj, taints)
			if r := fitsIn(used, podReq, fromCatalog(it.Allocatable)); r != "" {
				c.fail("nodeclaim %s: pods do not fit on option %s: %s", nc.Name, it.Name, r)
			}
			var daemonPorts []hostPort
			for _, d := range c.daemonsOn(obj, taints) {
				daemonPorts = append(daemonPorts, hostPorts(d)...)
			}
			for _, p := range nc.Pods {
				if why := portClash(hostPorts(p), daemonPorts); why != "" {
					c.fail("nodeclaim %s: pod %s on option %s: %s", nc.Name, podName(p), it.Name, why)
					break
				}
				if !affinityMatches(p, obj) {
					c.fail("nodeclaim %s: pod %s does not accept option %s", nc.Name, podName(p), it.Name)
					break
				}
				if _, ok := tolerates(&p.Spec, taints); !ok {
					c.fail("nodeclaim %s: pod %s does not tolerate the pool's taints", nc.Name, podName(p))
					break
				}
			}
		}
		for _, r := range pool.NodePool.Spec.Template.Spec.Requirements {
			if r.MinValues == nil {
				continue
			}
			vals := map[string]bool{}
			for _, opt := range nc.InstanceTypes {
				if v, ok := opt.Type.Labels[r.Key]; ok {
					vals[v] = true
				}
			}
			switch {
			case len(vals) >= *r.MinValues:
			case c.in.Options.MinValuesBestEffort:
				// Best effort lowers the NodeClaim's minValues to what it lists, and says so.
				if got := claimMinValues(nc, r.Key); !nc.MinValuesRelaxed || got == nil || *got != len(vals) {
					c.fail("nodeclaim %s: %d values of %s among its instance types, minValues %d not relaxed to them (relaxed %v, requirement %v)",
						nc.Name, len(vals), r.Key, *r.MinValues, nc.MinValuesRelaxed, got)
				}
			default:
				c.fail("nodeclaim %s: %d values of %s among its instance types, minValues %d", nc.Name, len(vals), r.Key, *r.MinValues)
			}
		}
	}
}

// claimMinValues is the minValues of the NodeClaim's requirement on key.
func claimMinValues(nc *scheduling.NodeClaim, key string) *int {
	for _, r := range nc.Requirements {
		if r.Key == key {
			return r.MinValues
		}
	}
	return nil
}

func setOf(v []string) map[string]bool {
	out := map[string]bool{}
	for _, s := range v {
		out[s] = true
	}
	return out
}

// checkLimits: pools with new NodeClaims stay within their limits.
func (c *checker) checkLimits() {
	for i := range c.in.Pools {
		np := c.in.Pools[i].NodePool
		if np == nil || len(np.Spec.Limits) == 0 {
			continue
		}
		total := map[corev1.ResourceName]int64{}
		nodes, newNodes := int64(0), 0
		for _, n := range c.order {
			if n.pool != np.Name {
				continue
			}
			add(total, n.capacity, 1)
			nodes++
			if n.claim != nil {
				newNodes++
			}
		}
		if newNodes == 0 {
			continue
		}
		for name, q := range np.Spec.Limits {
			limit := q.Value()
			used := nodes
			if name != "nodes" {
				used = total[name]
				if name == corev1.ResourceCPU {
					limit = q.MilliValue()
				}
			}
			if used > limit {
				c.fail("pool %s exceeds its %s limit: %d > %d", np.Name, name, used, limit)
			}
			if name == "nodes" {
				continue
			}
			// Every option of a new NodeClaim keeps the pool within the limit, whichever
			// option launches (the other NodeClaims as their cheapest option).
			for _, n := range c.order {
				if n.pool != np.Name || n.claim == nil {
					continue
				}
				for _, opt := range n.claim.InstanceTypes {
					if alt := used - n.capacity[name] + fromCatalog(opt.Type.Capacity)[name]; alt > limit {
						c.fail("nodeclaim %s: option %s would take pool %s over its %s limit: %d > %d", n.name, opt.Type.Name, np.Name, name, alt, limit)
						break
					}
				}
			}
		}
	}
}

// checkReservations: a new NodeClaim that may launch into a capacity reservation may launch
// nowhere else (its offerings are all of that reservation), and a reservation takes no more
// NodeClaims than it has room for.
func (c *checker) checkReservations() {
	c.reserved = map[string]int{}
	room := map[string]int{}
	for i := range c.res.NodeClaims {
		nc := &c.res.NodeClaims[i]
		ids := map[string]bool{}
		other := false
		for _, opt := range nc.InstanceTypes {
			for _, o := range opt.Offerings {
				if o.ReservationID == "" {
					other = true
					continue
				}
				ids[o.ReservationID] = true
				room[o.ReservationID] = o.ReservationCapacity
			}
		}
		if len(ids) > 1 || len(ids) == 1 && other {
			c.fail("nodeclaim %s may launch into reservations %v or elsewhere: a reserved NodeClaim must be pinned to one reservation", nc.Name, ids)
		}
		for id := range ids {
			c.reserved[id]++
		}
	}
	for id, n := range c.reserved {
		if n > room[id] {
			c.fail("capacity reservation %s takes %d more nodes, but %d NodeClaims are planned onto it", id, room[id], n)
		}
	}
}

// checkUnschedulable: an unschedulable pod must fit nowhere, neither on a node of the final
// state nor on a fresh node of any pool.
func (c *checker) checkUnschedulable() {
	for i, u := range c.res.Unschedulable {
		if i >= c.opts.MaxUnschedulableChecked {
			break
		}
		p := u.Pod
		if unknownResource(p) || scheduling.HasResourceClaims(&p.Spec) {
			continue
		}
		for _, n := range c.order {
			if n.unlaunched {
				continue // see node.unlaunched
			}
			if why := c.violates(p, n, true); why == "" && c.claimKeepsMinValues(n, p) {
				c.fail("pod %s reported unschedulable (%s) but fits on %s", podName(p), u.Reason, n.name)
				break
			}
		}
		if where := c.fitsNewNode(p); where != "" {
			c.fail("pod %s reported unschedulable (%s) but fits on a new %s", podName(p), u.Reason, where)
		}
	}
}

// claimKeepsMinValues reports whether a new NodeClaim with one more pod still lists enough
// distinct values for the minValues requirements of its pool.
func (c *checker) claimKeepsMinValues(n *node, p *corev1.Pod) bool {
	if n.claim == nil {
		return true
	}
	pool := c.pool(n.claim.Pool)
	need := map[corev1.ResourceName]int64{}
	for _, q := range n.claim.Pods {
		add(need, requests(q), 1)
	}
	add(need, requests(p), 1)
	taints := blocking(poolTaints(pool.NodePool))
	// A pod pinned to one zone (zone-keyed constraint) pins the NodeClaim to the node's zone.
	zone := ""
	if zoneConstrained(p) {
		zone = n.obj.Labels[keyZone]
	}
	for _, r := range pool.NodePool.Spec.Template.Spec.Requirements {
		if r.MinValues == nil {
			continue
		}
		vals := map[string]bool{}
		for _, opt := range n.claim.InstanceTypes {
			// The option counts when one of its offerings (in the pinned zone, if any) makes a
			// node the pod accepts, its volumes included, and that holds the pods.
			for _, o := range opt.Offerings {
				if zone != "" && o.Zone != zone {
					continue
				}
				lbl := c.newNodeLabels(pool, opt.Type, o.Zone, o.CapacityType, n.name)
				for k, v := range n.claim.Labels {
					if _, ok := lbl[k]; !ok {
						lbl[k] = v
					}
				}
				obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: lbl}}
				cand := &node{obj: obj, taints: taints, used: map[corev1.ResourceName]int64{}}
				c.addDaemons(cand)
				if affinityMatches(p, obj) && c.volumeViolation(p, cand) == "" && portClash(hostPorts(p), cand.ports) == "" &&
					fitsIn(cand.used, need, fromCatalog(opt.Type.Allocatable)) == "" {
					vals[opt.Type.Labels[r.Key]] = true
					break
				}
			}
		}
		if len(vals) < *r.MinValues {
			return false
		}
	}
	return true
}

func unknownResource(p *corev1.Pod) bool {
	for k, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		known := false
		for _, n := range catalog.ResourceNames {
			if string(k) == n {
				known = true
			}
		}
		if !known && q.Sign() > 0 && !strings.HasPrefix(string(k), "hugepages-") {
			return true
		}
	}
	return false
}

// fitsNewNode describes a fresh node the pod would fit on ("" if none). A pool with minValues
// requirements only launches when enough distinct values fit the pod.
func (c *checker) fitsNewNode(p *corev1.Pod) string {
	req := requests(p)
	for i := range c.in.Pools {
		pool := &c.in.Pools[i]
		np := pool.NodePool
		if np == nil || np.Spec.Replicas != nil {
			continue
		}
		taints := blocking(poolTaints(np))
		if _, ok := tolerates(&p.Spec, taints); !ok {
			continue
		}
		// minValues counts the types a NodeClaim for the pod could list: per zone when the pod
		// is pinned to one zone by a zone-keyed constraint, else across zones.
		pinned := zoneConstrained(p)
		found := map[string]string{}
		minVals := map[string]map[string]map[string]bool{} // zone or "" -> key -> values
		for j := range pool.InstanceTypes {
			it := &pool.InstanceTypes[j]
			if !c.withinLimits(np, it) {
				continue
			}
			for _, o := range it.Offerings {
				if !o.Available || !c.poolAllows(np, it, o) || o.ReservationID != "" && c.reserved[o.ReservationID] >= o.ReservationCapacity {
					continue
				}
				var n *node
				for _, extra := range customVariants(np, it) {
					lbl := c.newNodeLabels(pool, it, o.Zone, o.CapacityType, "checker-fresh-node")
					for k, v := range extra {
						lbl[k] = v
					}
					cand := &node{name: "checker-fresh-node", obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "checker-fresh-node", Labels: lbl}},
						alloc: fromCatalog(it.Allocatable), taints: taints, pool: np.Name}
					if affinityMatches(p, cand.obj) {
						n = cand
						break
					}
				}
				if n == nil {
					continue
				}
				n.used = map[corev1.ResourceName]int64{}
				c.addDaemons(n)
				if fitsIn(n.used, req, n.alloc) != "" || portClash(hostPorts(p), n.ports) != "" || c.volumeViolation(p, n) != "" ||
					c.topologyViolation(p, n) != "" {
					continue
				}
				group := ""
				if pinned {
					group = o.Zone
				}
				if found[group] == "" {
					found[group] = fmt.Sprintf("%s node of pool %s in %s (%s)", it.Name, np.Name, o.Zone, o.CapacityType)
				}
				if minVals[group] == nil {
					minVals[group] = map[string]map[string]bool{}
				}
				for _, r := range np.Spec.Template.Spec.Requirements {
					if r.MinValues != nil {
						if minVals[group][r.Key] == nil {
							minVals[group][r.Key] = map[string]bool{}
						}
						if v, ok := it.Labels[r.Key]; ok {
							minVals[group][r.Key][v] = true
						}
					}
				}
			}
		}
		groups := make([]string, 0, len(found))
		for g := range found {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			enough := true
			for _, r := range np.Spec.Template.Spec.Requirements {
				if r.MinValues != nil && len(minVals[g][r.Key]) < *r.MinValues {
					enough = false
				}
			}
			if enough {
				return found[g]
			}
		}
	}
	return ""
}

// zoneConstrained reports whether a pod has a zone-keyed topology constraint (which pins its
// NodeClaim to one zone).
func zoneConstrained(p *corev1.Pod) bool {
	for _, t := range p.Spec.TopologySpreadConstraints {
		if t.TopologyKey == keyZone && t.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if t.TopologyKey == keyZone {
					return true
				}
			}
		}
		if a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if t.TopologyKey == keyZone {
					return true
				}
			}
		}
	}
	return false
}

func (c *checker) withinLimits(np *karpv1.NodePool, it *catalog.InstanceType) bool {
	if !c.withinCostLimit(np, it) {
		return false
	}
	if len(np.Spec.Limits) == 0 {
		return true
	}
	total := map[corev1.ResourceName]int64{}
	nodes := int64(0)
	for _, n := range c.order {
		if n.pool == np.Name {
			add(total, n.capacity, 1)
			nodes++
		}
	}
	add(total, fromCatalog(it.Capacity), 1)
	nodes++
	for name, q := range np.Spec.Limits {
		limit, used := q.Value(), nodes
		if name != "nodes" {
			used = total[name]
			if name == corev1.ResourceCPU {
				limit = q.MilliValue()
			}
		}
		if used > limit {
			return false
		}
	}
	// Every new NodeClaim of the pool lists only options within the limits the others leave:
	// the extra node must leave each of them enough options for the pool's minValues.
	for _, n := range c.order {
		if n.pool != np.Name || n.claim == nil {
			continue
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.MinValues == nil {
				continue
			}
			vals := map[string]bool{}
			for _, opt := range n.claim.InstanceTypes {
				within := true
				for name, q := range np.Spec.Limits {
					if name == "nodes" {
						continue
					}
					limit := q.Value()
					if name == corev1.ResourceCPU {
						limit = q.MilliValue()
					}
					if total[name]-n.capacity[name]+fromCatalog(opt.Type.Capacity)[name] > limit {
						within = false
					}
				}
				if v, ok := opt.Type.Labels[r.Key]; ok && within {
					vals[v] = true
				}
			}
			if len(vals) < *r.MinValues {
				return false
			}
		}
	}
	return true
}

// counter counts the pods matching a selector per domain of a topology key.
type counter struct {
	ns     nsMatcher
	sel    labels.Selector
	key    string
	filter *corev1.Pod // count only on nodes matching this pod's node affinity
	counts map[string]int32
	total  int32
}

type owner struct {
	ns      nsMatcher
	sel     labels.Selector
	key     string
	domains map[string]int
}

type nsMatcher struct {
	all   bool
	names []string
}

func (m nsMatcher) matches(ns string) bool {
	if m.all {
		return true
	}
	for _, n := range m.names {
		if n == ns {
			return true
		}
	}
	return false
}

func (c *checker) counter(ns nsMatcher, sel labels.Selector, key string, filter *corev1.Pod) *counter {
	fk := ""
	if filter != nil {
		fk = c.affinityKeyOf(filter)
		if fk == "" {
			filter = nil // no node affinity: every node is eligible
		}
	}
	k := fmt.Sprintf("%v|%s|%s|%s", ns, sel.String(), key, fk)
	if ctr, ok := c.counters[k]; ok {
		return ctr
	}
	ctr := &counter{ns: ns, sel: sel, key: key, filter: filter, counts: map[string]int32{}}
	for _, n := range c.order {
		for _, p := range n.pods {
			ctr.observe(c, n, p)
		}
	}
	c.counters[k] = ctr
	return ctr
}

func (ctr *counter) observe(c *checker, n *node, p *corev1.Pod) {
	if !ctr.ns.matches(p.Namespace) || !ctr.sel.Matches(labels.Set(p.Labels)) {
		return
	}
	dom, ok := n.obj.Labels[ctr.key]
	if !ok {
		return
	}
	if ctr.filter != nil && !c.eligible(ctr.filter, n) {
		return
	}
	ctr.counts[dom]++
	ctr.total++
}

func selector(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return s
}

func (c *checker) termSelector(p *corev1.Pod, t *corev1.PodAffinityTerm) labels.Selector {
	ls := t.LabelSelector
	if ls != nil && (len(t.MatchLabelKeys) > 0 || len(t.MismatchLabelKeys) > 0) {
		ls = ls.DeepCopy()
		for _, k := range t.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
		for _, k := range t.MismatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}})
			}
		}
	}
	return selector(ls)
}

func (c *checker) termNamespaces(p *corev1.Pod, t *corev1.PodAffinityTerm) nsMatcher {
	if t.NamespaceSelector == nil && len(t.Namespaces) == 0 {
		return nsMatcher{names: []string{p.Namespace}}
	}
	m := nsMatcher{names: append([]string{}, t.Namespaces...)}
	if t.NamespaceSelector != nil {
		if len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
			return nsMatcher{all: true}
		}
		sel := selector(t.NamespaceSelector)
		names := make([]string, 0, len(c.nsLabels))
		for name := range c.nsLabels {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if sel.Matches(labels.Set(c.nsLabels[name])) {
				m.names = append(m.names, name)
			}
		}
	}
	sort.Strings(m.names)
	return m
}
