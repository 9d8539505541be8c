package operator

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheOptions keeps the informer caches of the objects a cluster has by the thousand (pods and
// nodes) without their managedFields: the field managers' records are often the largest part of
// a pod, and nothing in the controller reads them from the cache (PoolSync's server-side apply
// reads the objects it owns from the API server). A pod or node written back from the cache
// with no managedFields leaves the server's record as it is.
func cacheOptions() cache.Options {
	strip := cache.ByObject{Transform: cache.TransformStripManagedFields()}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:  strip,
		&corev1.Node{}: strip,
	}}
}
