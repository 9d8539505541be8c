package operator_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
)

// TestOverlayPriceChangesThePlan: with the NodeOverlay gate, a pod that gets the cheaper of
// two types (c5.large) by the catalog's prices gets the other (m5.large) once an overlay
// prices m5.large below it, as a Savings Plan would; the overlay reports Ready.
func TestOverlayPriceChangesThePlan(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates.NodeOverlay = true
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	np := h.workshopPool("priced", karpv1.NodePoolRequirement{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}},
		karpv1.NodePoolRequirement{Key: corev1.LabelInstanceTypeStable, Operator: "In", Values: []string{"c5.large", "m5.large"}})
	ns := h.namespace("overlay")
	labels := map[string]string{"app": "api"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: workshopPod(labels, corev1.Container{Name: "api", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}})}}
	if err := h.c.Create(h.ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := h.nodeType(h.runningPods(ns, "api", 1, 3*time.Minute)[0]); got != "c5.large" {
		t.Fatalf("without an overlay the pod runs on %s, want c5.large (the cheaper by list price)", got)
	}

	o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "savings-plan"}, Spec: v1alpha1.NodeOverlaySpec{
		Weight: ptr.To[int32](10), Price: ptr.To("0.01"),
		Requirements: []v1alpha1.NodeSelectorRequirement{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
			{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{np.Name}},
		}}}
	if err := h.c.Create(h.ctx, o); err != nil {
		t.Fatal(err)
	}
	h.eventually("the overlay Ready", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(o.Status.Conditions, karpv1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	if err := h.c.Patch(h.ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatal(err)
	}
	// The new pod's node is an m5.large (consolidation may also move the first pod there:
	// the overlay made it the cheaper type).
	h.eventually("a pod on an m5.large", 3*time.Minute, func() error {
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && h.nodeType(*p) == "m5.large" {
				return nil
			}
		}
		return fmt.Errorf("no running pod on an m5.large yet")
	})
}

// nodeType is the instance type of the node a pod runs on.
func (h *harness) nodeType(p corev1.Pod) string {
	h.t.Helper()
	node := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
		h.t.Fatal(err)
	}
	return node.Labels[corev1.LabelInstanceTypeStable]
}
