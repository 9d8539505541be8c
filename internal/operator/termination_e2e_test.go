package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// TestNodeDeletedByHand: `kubectl delete node` on a karpool node does not orphan its instance.
// The Node's finalizer holds it while its NodeClaim is deleted, the node drained and the
// instance terminated; the evicted pods then get a new node.
func TestNodeDeletedByHand(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("delete-node")
	h.workshopScaleOut(ns, 5)
	claims := h.nodeClaims()
	if len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(claims))
	}
	old := claims[0]

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: old.Status.NodeName}}
	if err := h.c.Delete(h.ctx, node); err != nil {
		t.Fatal(err)
	}
	h.eventually("old node, NodeClaim and instance gone", 2*time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(node), &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s still there (%v)", node.Name, err)
		}
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(&old), &karpv1.NodeClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeClaim %s still there (%v)", old.Name, err)
		}
		for _, in := range h.sim.Instances() {
			if in.ProviderID == old.Status.ProviderID && (in.State == "pending" || in.State == "running") {
				return fmt.Errorf("instance %s is %s", in.ProviderID, in.State)
			}
		}
		return nil
	})
	pods := h.runningPods(ns, "inflate", 5, 3*time.Minute)
	for _, p := range pods {
		if p.Spec.NodeName == node.Name {
			t.Errorf("pod %s runs on the deleted node", p.Name)
		}
	}
	if n := h.liveInstances(); n != 1 {
		t.Errorf("the simulator holds %d live instances, want 1 (the replacement)", n)
	}
}

// TestDrainHonoursPDBUntilTerminationGracePeriod: a PodDisruptionBudget that allows no
// eviction holds the drain of a deleted NodeClaim — the node stays cordoned with its pods and
// its instance running — until the NodePool's terminationGracePeriod has passed; then the pods
// are deleted and the instance terminated.
func TestDrainHonoursPDBUntilTerminationGracePeriod(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("pdb")
	pool := writeManifest(t, "pool.yaml", `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels: {type: karpenter}
    spec:
      terminationGracePeriod: 20s
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`)
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"), pool)
	h.inflate(ns, 3)
	h.runningPods(ns, "inflate", 3, 3*time.Minute)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate"}},
		},
	}
	if err := h.c.Create(h.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	h.eventually("PDB observed", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return err
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.ExpectedPods != 3 {
			return fmt.Errorf("PDB status %+v", pdb.Status)
		}
		return nil
	})
	claims := h.nodeClaims()
	if len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(claims))
	}
	claim := claims[0]
	if err := h.c.Delete(h.ctx, &claim); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(&claim), &claim); err != nil {
		t.Fatal(err)
	}
	deletedAt := claim.DeletionTimestamp.Time

	// Until the grace period ends, the PDB wins: the node is cordoned, its pods stay, the
	// instance runs. Watch that while the grace period lasts.
	cordoned := false
	for time.Since(deletedAt) < 15*time.Second {
		var node corev1.Node
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: claim.Status.NodeName}, &node); err != nil {
			t.Fatalf("node %s during the grace period: %v", claim.Status.NodeName, err)
		}
		cordoned = cordoned || node.Spec.Unschedulable
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				t.Fatalf("pod %s evicted %s after the NodeClaim's deletion, though the PDB allows none", p.Name, time.Since(deletedAt).Round(time.Second))
			}
		}
		if len(pods.Items) != 3 {
			t.Fatalf("%d pods on the draining node, want 3", len(pods.Items))
		}
		select {
		case <-h.ctx.Done():
			t.Fatal(h.ctx.Err())
		case <-time.After(time.Second):
		}
	}
	if !cordoned {
		t.Errorf("node %s was not cordoned while draining", claim.Status.NodeName)
	}
	h.eventually("grace period over: node, NodeClaim and instance gone", 2*time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: claim.Status.NodeName}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node still there (%v)", err)
		}
		for _, in := range h.sim.Instances() {
			if in.ProviderID == claim.Status.ProviderID && (in.State == "pending" || in.State == "running") {
				return fmt.Errorf("instance %s is %s", in.ProviderID, in.State)
			}
		}
		return nil
	})
	if since := time.Since(deletedAt); since < 20*time.Second {
		t.Errorf("drained %s after deletion, before the 20 s terminationGracePeriod", since.Round(time.Second))
	}
}
