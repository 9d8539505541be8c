package localenv

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
)

// Scheme knows the built-in Kubernetes types, CRDs themselves and karpool's API types.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(karpenterv1.AddToScheme(Scheme))
	utilruntime.Must(karpenterawsv1.AddToScheme(Scheme))
	utilruntime.Must(karpoolv1alpha1.AddToScheme(Scheme))
}
