package operator_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// TestEFAPodOnEFANode: a pod asking for vpc.amazonaws.com/efa gets a node launched with EFA
// interfaces (one per network card its type has, as Karpenter's launch template says), and
// the node offers them. The simulator's node offers EFA only for the interfaces the instance
// was launched with, as the EFA device plugin does, so a launch without them leaves the pod
// Pending.
func TestEFAPodOnEFANode(t *testing.T) {
	h := newHarness(t)
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	h.workshopPool("efa", karpv1.NodePoolRequirement{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}},
		karpv1.NodePoolRequirement{Key: corev1.LabelArchStable, Operator: "In", Values: []string{"amd64"}})
	ns := h.namespace("efa")
	labels := map[string]string{"app": "mpi"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpi"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: workshopPod(labels, corev1.Container{Name: "mpi", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "vpc.amazonaws.com/efa": resource.MustParse("1")},
				Limits:   corev1.ResourceList{"vpc.amazonaws.com/efa": resource.MustParse("1")}}})}}
	if err := h.c.Create(h.ctx, d); err != nil {
		t.Fatal(err)
	}
	pods := h.runningPods(ns, "mpi", 1, 3*time.Minute)
	node := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	efa := node.Status.Allocatable["vpc.amazonaws.com/efa"]
	var launched string
	for _, in := range h.sim.Instances() {
		if in.ProviderID == node.Spec.ProviderID {
			launched = in.InstanceType
		}
	}
	if efa.Value() < 1 || launched == "" {
		t.Fatalf("node %s (%s): %s EFA allocatable; want the EFA interfaces it was launched with", node.Name, launched, efa.String())
	}
	if n := efaInterfacesLaunched(h); n != int(efa.Value()) {
		t.Errorf("the launch template asked for %d EFA interfaces, the node offers %s", n, efa.String())
	}
}

// workshopPool creates a NodePool of the workshop's class whose nodes carry type=karpenter (the
// label workshop pods select), with these requirements.
func (h *harness) workshopPool(name string, reqs ...karpv1.NodePoolRequirement) *karpv1.NodePool {
	h.t.Helper()
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = map[string]string{"type": "karpenter"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = reqs
	if err := h.c.Create(h.ctx, np); err != nil {
		h.t.Fatal(err)
	}
	return np
}

// efaInterfacesLaunched is the most EFA interfaces any launch template created asked for.
func efaInterfacesLaunched(h *harness) int {
	most := 0
	for _, c := range h.sim.Calls() {
		in, ok := c.Input.(*ec2.CreateLaunchTemplateInput)
		if !ok || c.ErrorCode != "" || in.LaunchTemplateData == nil {
			continue
		}
		n := 0
		for _, ni := range in.LaunchTemplateData.NetworkInterfaces {
			if ni.InterfaceType != nil && *ni.InterfaceType == "efa" {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// TestGPUPodOnNVIDIAImage: a pod asking for nvidia.com/gpu gets a GPU node launched from the
// alias's NVIDIA image, as Karpenter picks AMI variants; the class's status lists that image
// with the GPU requirement. The simulator's node offers GPUs only from an image with NVIDIA
// drivers, so a launch with the standard image leaves the pod Pending.
func TestGPUPodOnNVIDIAImage(t *testing.T) {
	h := newHarness(t)
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	h.workshopPool("gpu", karpv1.NodePoolRequirement{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}})
	ns := h.namespace("gpu")
	labels := map[string]string{"app": "train"}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: workshopPod(labels, corev1.Container{Name: "train", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}})}}
	if err := h.c.Create(h.ctx, d); err != nil {
		t.Fatal(err)
	}
	pods := h.runningPods(ns, "train", 1, 3*time.Minute)
	class := &awsv1.EC2NodeClass{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	nvidia := map[string]bool{}
	for _, ami := range class.Status.AMIs {
		for _, r := range ami.Requirements {
			if r.Key == awsv1.LabelInstanceGPUCount && r.Operator == corev1.NodeSelectorOpExists {
				nvidia[ami.ID] = true
			}
		}
	}
	node := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	image := ""
	for _, in := range h.sim.Instances() {
		if in.ProviderID == node.Spec.ProviderID {
			image = in.ImageID
		}
	}
	if image == "" || !nvidia[image] {
		t.Errorf("the GPU node %s runs image %q; the class's NVIDIA images are %v (status.amis %+v)", node.Name, image, nvidia, class.Status.AMIs)
	}
}
