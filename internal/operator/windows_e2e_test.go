package operator_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// TestWindowsPodOnWindowsNode (Karpenter's scheduling suite has the same case): beside the
// workshop's AL2023 pool, a pool of a windows2022@latest class; a pod selecting
// kubernetes.io/os=windows and asking for a vpc.amazonaws.com/PrivateIPv4Address (as the VPC
// resource controller's webhook adds to Windows pods) runs on a node launched from the Windows
// image, which registered from the PowerShell user data with the 2022 build.
func TestWindowsPodOnWindowsNode(t *testing.T) {
	h := newHarness(t)
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	h.workshopPool("linux", karpv1.NodePoolRequirement{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}})
	win := &awsv1.EC2NodeClass{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, win); err != nil {
		t.Fatal(err)
	}
	win = &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows"}, Spec: win.Spec}
	win.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}
	if err := h.c.Create(h.ctx, win); err != nil {
		t.Fatal(err)
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "windows"}}
	np.Spec.Template.Labels = map[string]string{"type": "karpenter"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "windows"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}}}
	if err := h.c.Create(h.ctx, np); err != nil {
		t.Fatal(err)
	}

	ns := h.namespace("windows")
	labels := map[string]string{"app": "iis"}
	ip := corev1.ResourceList{"vpc.amazonaws.com/PrivateIPv4Address": resource.MustParse("1")}
	tmpl := workshopPod(labels, corev1.Container{Name: "iis", Resources: corev1.ResourceRequirements{Requests: ip, Limits: ip}})
	tmpl.Spec.NodeSelector[corev1.LabelOSStable] = string(corev1.Windows)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iis"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if err := h.c.Create(h.ctx, d); err != nil {
		t.Fatal(err)
	}
	pods := h.runningPods(ns, "iis", 1, 3*time.Minute)
	node := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[corev1.LabelOSStable] != "windows" || node.Labels[corev1.LabelWindowsBuild] != "10.0.20348" || node.Labels[karpv1.LabelNodePool] != "windows" {
		t.Errorf("the pod runs on %s with labels %v; want a Windows Server 2022 node of the windows pool", node.Name, node.Labels)
	}
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(win), win); err != nil {
		t.Fatal(err)
	}
	image := ""
	for _, in := range h.sim.Instances() {
		if in.ProviderID == node.Spec.ProviderID {
			image = in.ImageID
		}
	}
	if len(win.Status.AMIs) != 1 || win.Status.AMIs[0].ID != image {
		t.Errorf("the node runs image %q; the windows class resolves %+v", image, win.Status.AMIs)
	}
}
