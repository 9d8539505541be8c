package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// resourceIndex maps a Kubernetes resource name to its index in catalog.Resources.
func resourceIndex(name corev1.ResourceName) (catalog.Resource, bool) {
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
		i, ok := resourceIndex(name)
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

// addList adds a ResourceList into v; it returns the first unknown resource with a non-zero amount.
func addList(v *catalog.Resources, list corev1.ResourceList) (unknown string) {
	for name, q := range list {
		i, ok := resourceIndex(name)
		if !ok {
			if q.Sign() != 0 && unknown == "" && !isIgnoredResource(name) {
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

// PodRequests computes what the scheduler reserves for a pod: the larger of the sum of the
// regular (and sidecar) containers and the largest init container running alongside the sidecars
// started before it, plus the pod overhead, plus one "pods" slot. The second result names a
// requested resource the engine does not model (the pod cannot be scheduled on new capacity).
func PodRequests(pod *corev1.Pod) (catalog.Resources, string) {
	var sum catalog.Resources
	unknown := ""
	for i := range pod.Spec.Containers {
		if u := addList(&sum, requestsOf(&pod.Spec.Containers[i])); u != "" && unknown == "" {
			unknown = u
		}
	}
	// Init containers: sidecars (restartPolicy Always) keep running and add to the total; a
	// regular init container needs its requests plus the sidecars started before it.
	var sidecars, initMax catalog.Resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var r catalog.Resources
		if u := addList(&r, requestsOf(c)); u != "" && unknown == "" {
			unknown = u
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			for k := range sidecars {
				sidecars[k] += r[k]
			}
			for k := range initMax {
				initMax[k] = max(initMax[k], sidecars[k])
			}
			continue
		}
		for k := range initMax {
			initMax[k] = max(initMax[k], r[k]+sidecars[k])
		}
	}
	for k := range sum {
		sum[k] = max(sum[k]+sidecars[k], initMax[k])
	}
	if pod.Spec.Overhead != nil {
		if u := addList(&sum, pod.Spec.Overhead); u != "" && unknown == "" {
			unknown = u
		}
	}
	sum[catalog.Pods] = 1
	return sum, unknown
}

// requestsOf returns a container's requests, falling back to limits where a request is unset
// (the API server defaults requests to limits).
func requestsOf(c *corev1.Container) corev1.ResourceList {
	if len(c.Resources.Limits) == 0 {
		return c.Resources.Requests
	}
	missing := false
	for name := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			missing = true
			break
		}
	}
	if !missing {
		return c.Resources.Requests
	}
	out := make(corev1.ResourceList, len(c.Resources.Limits))
	for name, q := range c.Resources.Limits {
		out[name] = q
	}
	for name, q := range c.Resources.Requests {
		out[name] = q
	}
	return out
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
