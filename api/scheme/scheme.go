// Package scheme is karpool's one runtime.Scheme: the built-in Kubernetes types, the
// CustomResourceDefinition type itself, Karpenter's v1 types and NodeOverlay and karpool's PoolSync. The
// controller, the CLI, the validators and the test environment all use it, so an object that
// decodes in one decodes in all.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterv1alpha1 "github.com/karpool/karpool/api/karpenter/v1alpha1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
)

// Scheme knows every type karpool reads or writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(karpenterv1.AddToScheme(Scheme))
	utilruntime.Must(karpenterv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(karpenterawsv1.AddToScheme(Scheme))
	utilruntime.Must(karpoolv1alpha1.AddToScheme(Scheme))
}
