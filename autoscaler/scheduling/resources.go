package scheduling

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// ResourceIndex maps a Kubernetes resource name to its index in catalog.Resources; false for
// resources the engine does not schedule on.
func ResourceIndex(name corev1.ResourceName) (catalog.Resource, bool) {
	switch name {
	case corev1.ResourceCPU:
		return catalog.CPU, true
	case corev1.ResourceMemory:
		return catalog.Memory, true
	case corev1.ResourceEphemeralStorage:
		return catalog.EphemeralStorage, true
	case corev1.ResourcePods:
		return catalog.Pods, true
	}
	for i := catalog.NvidiaGPU; i < catalog.NumResources; i++ {
		if string(name) == catalog.ResourceNames[i] {
			return i, true
		}
	}
	return 0, false
}

// quantityValue converts a quantity to the base unit of the resource (millicores for cpu).
func quantityValue(r catalog.Resource, q resource.Quantity) int64 {
	if r == catalog.CPU {
		return q.MilliValue()
	}
	return q.Value()
}

// ToResources converts a ResourceList; resources karpool does not model are reported in unknown.
func ToResources(list corev1.ResourceList) (out catalog.Resources, unknown []string) {
	for name, q := range list {
		i, ok := ResourceIndex(name)
		if !ok {
			if q.Sign() != 0 {
				unknown = append(unknown, string(name))
			}
			continue
		}
		out[i] = quantityValue(i, q)
	}
	return out, unknown
}

// addList adds a ResourceList into v; it returns the first (by name) unknown resource with a
// non-zero amount.
func addList(v *catalog.Resources, list corev1.ResourceList) (unknown string) {
	for name, q := range list {
		i, ok := ResourceIndex(name)
		if !ok {
			if q.Sign() != 0 && (unknown == "" || string(name) < unknown) && !isIgnoredResource(name) {
				unknown = string(name)
			}
			continue
		}
		v[i] += quantityValue(i, q)
	}
	return unknown
}

// isIgnoredResource are extended resources a node provides without the instance type saying so;
// the engine does not schedule on them.
func isIgnoredResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), "hugepages-") || strings.HasPrefix(string(name), "attachable-volumes-")
}

// PodRequests computes what the kubelet and the kube-scheduler reserve for a pod, with the
// upstream helper (k8s.io/component-helpers/resource): pod-level requests where the pod sets
// them (PodLevelResources), else the larger of the regular containers plus the restartable
// (sidecar) init containers and the largest init container with the sidecars started before it;
// plus the pod overhead, plus one "pods" slot. Requests are defaulted from limits first, as the
// API server does. The second result names a requested resource the engine does not model (the
// pod cannot be scheduled on new capacity).
func PodRequests(pod *corev1.Pod) (catalog.Resources, string) {
	list := resourcehelper.PodRequests(withDefaultRequests(pod), resourcehelper.PodResourcesOptions{})
	var out catalog.Resources
	unknown := addList(&out, list)
	out[catalog.Pods] = 1
	return out, unknown
}

// withDefaultRequests returns the pod, or a copy of it where every request left unset beside a
// limit takes the limit's value (containers, init containers and pod-level resources), which
// is what the API server stores.
func withDefaultRequests(pod *corev1.Pod) *corev1.Pod {
	needs := needsDefault(pod.Spec.Resources)
	for i := range pod.Spec.Containers {
		needs = needs || needsDefault(&pod.Spec.Containers[i].Resources)
	}
	for i := range pod.Spec.InitContainers {
		needs = needs || needsDefault(&pod.Spec.InitContainers[i].Resources)
	}
	if !needs {
		return pod
	}
	cp := pod.DeepCopy()
	defaultRequests(cp.Spec.Resources)
	for i := range cp.Spec.Containers {
		defaultRequests(&cp.Spec.Containers[i].Resources)
	}
	for i := range cp.Spec.InitContainers {
		defaultRequests(&cp.Spec.InitContainers[i].Resources)
	}
	return cp
}

func needsDefault(r *corev1.ResourceRequirements) bool {
	if r == nil {
		return false
	}
	for name := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			return true
		}
	}
	return false
}

func defaultRequests(r *corev1.ResourceRequirements) {
	if r == nil {
		return
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q
		}
	}
}

// requestCache holds PodRequests per resource specification (resourceKey), resBuf its scratch.
type requestCache struct {
	resCache map[string]podReq
	resBuf   []byte
}

// podRequests is PodRequests computed once per distinct resource specification: pods of one
// Deployment share it, and the upstream helper allocates.
func (s *requestCache) podRequests(pod *corev1.Pod) (catalog.Resources, string) {
	s.resBuf = resourceKey(s.resBuf[:0], pod)
	return s.requestsFor(s.resBuf, pod)
}

// requestsFor is podRequests for a pod whose resourceKey is key.
func (s *requestCache) requestsFor(key []byte, pod *corev1.Pod) (catalog.Resources, string) {
	if e, ok := s.resCache[string(key)]; ok {
		return e.req, e.unknown
	}
	req, unknown := PodRequests(pod)
	if s.resCache == nil {
		s.resCache = map[string]podReq{}
	}
	s.resCache[string(key)] = podReq{req, unknown}
	return req, unknown
}

type podReq struct {
	req     catalog.Resources
	unknown string
}

// resourceKey encodes everything PodRequests reads. Amounts are written in milli-units, exact
// for every quantity below 9.2e15 units.
func resourceKey(buf []byte, pod *corev1.Pod) []byte {
	appendReqs := func(buf []byte, r *corev1.ResourceRequirements) []byte {
		buf = appendResourceList(buf, r.Requests)
		buf = append(buf, '/')
		buf = appendResourceList(buf, r.Limits)
		return append(buf, ';')
	}
	for i := range pod.Spec.Containers {
		buf = appendReqs(buf, &pod.Spec.Containers[i].Resources)
	}
	buf = append(buf, '|')
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil {
			buf = append(buf, *c.RestartPolicy...)
		}
		buf = appendReqs(buf, &c.Resources)
	}
	buf = append(buf, '|')
	if pod.Spec.Resources != nil {
		buf = appendReqs(buf, pod.Spec.Resources)
	}
	buf = append(buf, '|')
	return appendResourceList(buf, pod.Spec.Overhead)
}

// appendResourceList writes cpu, then memory, then any other resources in name order. The two
// common names are looked up directly: iterating a map (and sorting) per pod was a visible part
// of building the classes.
func appendResourceList(buf []byte, list corev1.ResourceList) []byte {
	if len(list) == 0 {
		return buf
	}
	seen := 0
	for _, name := range [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := list[name]; ok {
			buf = appendQuantity(buf, name, q)
			seen++
		}
	}
	if seen == len(list) {
		return buf
	}
	var arr [8]corev1.ResourceName
	names := arr[:0]
	for name := range list {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		buf = appendQuantity(buf, name, list[name])
	}
	return buf
}

func appendQuantity(buf []byte, name corev1.ResourceName, q resource.Quantity) []byte {
	buf = append(buf, name...)
	buf = append(buf, '=')
	buf = strconv.AppendInt(buf, q.MilliValue(), 36)
	return append(buf, ',')
}

// fits reports whether req fits into free.
func fits(req, free *catalog.Resources) bool {
	for i := range req {
		if req[i] > free[i] {
			return false
		}
	}
	return true
}

// fitCount is how many copies of req fit into free (capped at limit).
func fitCount(req, free *catalog.Resources, limit int) int {
	n := limit
	for i := range req {
		if req[i] <= 0 {
			continue
		}
		if free[i] < req[i] {
			return 0
		}
		if k := free[i] / req[i]; k < int64(n) {
			n = int(k)
		}
	}
	return n
}

func addTo(dst *catalog.Resources, v *catalog.Resources, k int64) {
	for i := range dst {
		dst[i] += v[i] * k
	}
}

// FormatResources renders the non-zero resources of v, e.g. "cpu=1500m memory=3Gi pods=3".
func FormatResources(v catalog.Resources) string {
	var b strings.Builder
	for i := catalog.Resource(0); i < catalog.NumResources; i++ {
		if v[i] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(catalog.ResourceNames[i])
		b.WriteByte('=')
		b.WriteString(FormatQuantity(i, v[i]))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// FormatQuantity renders one resource amount the way kubectl would.
func FormatQuantity(r catalog.Resource, v int64) string {
	switch r {
	case catalog.CPU:
		if v%1000 == 0 {
			return fmt.Sprint(v / 1000)
		}
		return fmt.Sprintf("%dm", v)
	case catalog.Memory, catalog.EphemeralStorage:
		const ki, mi, gi = 1 << 10, 1 << 20, 1 << 30
		switch {
		case v != 0 && v%gi == 0:
			return fmt.Sprintf("%dGi", v/gi)
		case v != 0 && v%mi == 0:
			return fmt.Sprintf("%dMi", v/mi)
		case v != 0 && v%ki == 0:
			return fmt.Sprintf("%dKi", v/ki)
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprint(v)
}
