// Package v1alpha1 holds the karpenter.sh/v1alpha1 API that karpool shares with Karpenter:
// NodeOverlay, which changes the price or adds extended resources of the instance types its
// requirements select, for every NodePool, before the scheduling engine sees them.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "karpenter.sh", Version: "v1alpha1"}

	// SchemeBuilder registers the types in this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
