package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// TestBalancedPoolWeighsSavingAgainstDisruption: the workshop pool with consolidationPolicy
// Balanced runs two nodes, X for "cpu" (3 pods of 1 CPU: an m5.xlarge) and Y for "mem" (10
// pods of 1Gi, kept off X by anti-affinity). Scaled to 1 and 3 pods, both are underused and a
// cheaper type fits each. X's move saves a third of the pool's cost for a sixth of its
// disruption: X is replaced. Y's saves about a fifth of the cost for two thirds of the
// disruption (score ≈ 0.3): Y stays, its Consolidatable condition says why. The same pool
// switched to WhenEmptyOrUnderutilized then replaces Y: the scoring was what held it.
func TestBalancedPoolWeighsSavingAgainstDisruption(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("balanced")
	h.workshopPools()
	h.updatePool(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
		np.Spec.Disruption.ConsolidateAfter.Duration = ptr.To(20 * time.Second)
	})
	h.deployment(ns, "cpu", 3, "1")
	x := h.runningPods(ns, "cpu", 3, 3*time.Minute)[0].Spec.NodeName
	h.antiAffineMemDeployment(ns, 10)
	y := h.runningPods(ns, "mem", 10, 3*time.Minute)[0].Spec.NodeName
	claimX, claimY := h.claimOfNode(x), h.claimOfNode(y)
	t.Logf("X %s (%s), Y %s (%s)", x, claimX.Labels[corev1.LabelInstanceTypeStable], y, claimY.Labels[corev1.LabelInstanceTypeStable])

	h.scale(ns, "cpu", 1)
	h.scale(ns, "mem", 3)
	h.eventually("X replaced, Y kept by the Balanced score", 5*time.Minute, func() error {
		names := map[string]karpv1.NodeClaim{}
		for _, nc := range h.nodeClaims() {
			names[nc.Name] = nc
		}
		if _, ok := names[claimX.Name]; ok {
			return fmt.Errorf("X's NodeClaim %s still there", claimX.Name)
		}
		cur, ok := names[claimY.Name]
		if !ok || cur.DeletionTimestamp != nil {
			t.Fatalf("Y's NodeClaim %s was disrupted: the Balanced score should have kept it", claimY.Name)
		}
		c := state.Condition(&cur, karpv1.ConditionTypeConsolidatable)
		if c == nil || c.Reason != "Balanced" || !strings.Contains(c.Message, "NodePool default is Balanced") {
			return fmt.Errorf("Y's Consolidatable condition: %+v", c)
		}
		t.Logf("Y kept: %s", c.Message)
		return nil
	})
	for _, p := range h.runningPods(ns, "cpu", 1, time.Minute) {
		if it := h.nodeType(p); it == claimX.Labels[corev1.LabelInstanceTypeStable] {
			t.Errorf("X's pod runs on a %s again, not on a cheaper replacement", it)
		}
	}

	h.updatePool(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	})
	h.eventually("Y replaced once the pool is WhenEmptyOrUnderutilized", 5*time.Minute, func() error {
		for _, nc := range h.nodeClaims() {
			if nc.Name == claimY.Name {
				return fmt.Errorf("Y's NodeClaim %s still there", claimY.Name)
			}
		}
		return nil
	})
	h.runningPods(ns, "mem", 3, 2*time.Minute)
}

// antiAffineMemDeployment creates "mem": n pause pods of 1Gi that never share a node with the
// "cpu" pods.
func (h *harness) antiAffineMemDeployment(ns string, n int32) {
	h.t.Helper()
	labels := map[string]string{"app": "mem"}
	tmpl := workshopPod(labels, corev1.Container{Name: "mem",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}})
	tmpl.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cpu"}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mem"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
	if err := h.c.Create(h.ctx, d); err != nil {
		h.t.Fatal(err)
	}
}

// claimOfNode is the NodeClaim whose node is name.
func (h *harness) claimOfNode(name string) karpv1.NodeClaim {
	h.t.Helper()
	for _, nc := range h.nodeClaims() {
		if nc.Status.NodeName == name {
			return nc
		}
	}
	h.t.Fatalf("no NodeClaim for node %s", name)
	return karpv1.NodeClaim{}
}
