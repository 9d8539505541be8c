package provisioning

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// newNodeClaim turns one NodeClaim of the engine's plan into the karpenter.sh/v1 object: the
// pool's template (labels, annotations, taints, startup taints, node class, expiry, termination
// grace period), the engine's requirements (narrowed to the instance types that fit, cheapest
// first), and the resources the pods and daemonsets request. The NodePool owns it, so deleting
// the pool deletes its NodeClaims and, through their finalizers, their nodes.
func newNodeClaim(np *karpv1.NodePool, planned *scheduling.NodeClaim) *karpv1.NodeClaim {
	tmpl := &np.Spec.Template
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	// Single-valued requirements are facts about the node already (Karpenter labels the
	// NodeClaim with them); hostname is assigned by the cloud.
	for _, r := range planned.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 && r.Key != corev1.LabelHostname {
			labels[r.Key] = r.Values[0]
		}
	}
	labels[karpv1.LabelNodePool] = np.Name
	// The template's hash tells drift later whether the pool changed since.
	annotations := map[string]string{
		karpv1.AnnotationNodePoolHash: np.TemplateHash(), karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion,
		karpv1.AnnotationMinValuesRelaxed: strconv.FormatBool(planned.MinValuesRelaxed),
	}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         karpv1.GroupVersion.String(),
				Kind:               "NodePool",
				Name:               np.Name,
				UID:                np.UID,
				BlockOwnerDeletion: ptr.To(true),
			}},
			Finalizers: []string{karpv1.TerminationFinalizer},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 append([]karpv1.Taint(nil), tmpl.Spec.Taints...),
			StartupTaints:          append([]karpv1.Taint(nil), tmpl.Spec.StartupTaints...),
			Requirements:           planned.Requirements,
			Resources:              karpv1.ResourceRequirements{Requests: requestsOf(planned)},
			NodeClassRef:           tmpl.Spec.NodeClassRef.DeepCopy(),
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod.DeepCopy(),
			ExpireAfter:            tmpl.Spec.ExpireAfter.DeepCopy(),
		},
	}
	return nc
}

// instanceTypeNames lists a planned NodeClaim's options, cheapest first, for logs.
func instanceTypeNames(planned *scheduling.NodeClaim) string {
	names := make([]string, 0, len(planned.InstanceTypes))
	for _, o := range planned.InstanceTypes {
		names = append(names, o.Type.Name)
	}
	return strings.Join(names, ", ")
}

// requestsOf sums the requests of a planned NodeClaim (pods and daemonsets).
func requestsOf(planned *scheduling.NodeClaim) corev1.ResourceList {
	var r catalog.Resources
	for i := range r {
		r[i] = planned.PodRequests[i] + planned.DaemonSetRequests[i]
	}
	return r.ResourceList()
}
