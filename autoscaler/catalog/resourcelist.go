package catalog

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceList converts the vector to a Kubernetes resource list, leaving out zero entries:
// cpu in millicores, memory and ephemeral-storage in binary units, counts as plain numbers.
func (r Resources) ResourceList() corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, v := range r {
		if v == 0 {
			continue
		}
		name := corev1.ResourceName(ResourceNames[i])
		switch Resource(i) {
		case CPU:
			out[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		case Memory, EphemeralStorage:
			out[name] = *resource.NewQuantity(v, resource.BinarySI)
		default:
			out[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}
