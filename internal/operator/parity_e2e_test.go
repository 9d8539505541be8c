package operator_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// TestStatefulSetFollowsItsVolumeZone: a StatefulSet whose claim is bound to an EBS volume in
// us-east-1c gets its node in us-east-1c, where the kube-scheduler's volume binding lets the
// pod run. The volume's node affinity is written with the EBS CSI driver's zone key, which
// karpool reads as topology.kubernetes.io/zone.
func TestStatefulSetFollowsItsVolumeZone(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("volumes")
	h.workshopPools()

	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "data-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: "",
			ClaimRef:         &corev1.ObjectReference{Namespace: ns, Name: "data-web-0"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123456789abcdef0", FSType: "ext4"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.ebs.csi.aws.com/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1c"}}},
			}}}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-web-0"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	for _, o := range []client.Object{pv, pvc} {
		if err := h.c.Create(h.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = h.c.Delete(h.ctx, pv) })
	h.eventually("the claim bound to the us-east-1c volume", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim is %s", pvc.Status.Phase)
		}
		return nil
	})

	labels := map[string]string{"app": "web"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: workshopPod(labels, corev1.Container{Name: "web",
				Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(""),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
		},
	}
	if err := h.c.Create(h.ctx, sts); err != nil {
		t.Fatal(err)
	}
	pods := h.runningPods(ns, "web", 1, 3*time.Minute)
	node := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if z := node.Labels[corev1.LabelTopologyZone]; z != "us-east-1c" {
		t.Errorf("web-0 runs on %s in %s, want us-east-1c (its volume's zone)", node.Name, z)
	}
	for _, nc := range h.nodeClaims() {
		for _, r := range nc.Spec.Requirements {
			if r.Key == corev1.LabelTopologyZone && (len(r.Values) != 1 || r.Values[0] != "us-east-1c") {
				t.Errorf("NodeClaim %s may launch in %v, want only us-east-1c", nc.Name, r.Values)
			}
		}
	}
}

// TestSameHostPortTwoNodes: two pods asking for the same host port get a node each, and the
// real kube-scheduler runs them there.
func TestSameHostPortTwoNodes(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("hostports")
	h.workshopPools()
	labels := map[string]string{"app": "edge"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: workshopPod(labels, corev1.Container{Name: "edge",
				Ports:     []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}),
		},
	}
	if err := h.c.Create(h.ctx, d); err != nil {
		t.Fatal(err)
	}
	pods := h.runningPods(ns, "edge", 2, 3*time.Minute)
	if pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Errorf("both pods with host port 8080 run on %s", pods[0].Spec.NodeName)
	}
	if n := len(h.karpenterNodes()); n != 2 {
		t.Errorf("%d karpool nodes, want 2", n)
	}
	for _, n := range h.karpenterNodes() {
		if n.Labels[karpv1.LabelNodePool] != "default" {
			t.Errorf("node %s belongs to pool %q", n.Name, n.Labels[karpv1.LabelNodePool])
		}
	}
}

// workshopPod is a pod template for the workshop pool (nodeSelector type=karpenter) running the
// container with the pause image.
func workshopPod(labels map[string]string, c corev1.Container) corev1.PodTemplateSpec {
	c.Image = "registry.k8s.io/pause:3.10"
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{NodeSelector: map[string]string{"type": "karpenter"}, Containers: []corev1.Container{c}},
	}
}
