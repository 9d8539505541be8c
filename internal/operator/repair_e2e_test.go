package operator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// TestUnhealthyNodeReplacedWithinTheLimit: with the NodeRepair gate, two of a pool's three
// nodes report KernelReady=False (the EKS node monitoring agent's condition) for longer than
// its 30 minutes: more than 20 % of the pool, so neither is replaced and the nodes say why.
// When one recovers, the other is replaced and its pod runs on a new node.
func TestUnhealthyNodeReplacedWithinTheLimit(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates.NodeRepair = true
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	h.workshopPool("repair", karpv1.NodePoolRequirement{Key: karpv1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}},
		karpv1.NodePoolRequirement{Key: corev1.LabelInstanceTypeStable, Operator: "In", Values: []string{"m5.large"}})
	ns := h.namespace("repair")
	h.deployment(ns, "web", 3, "1300m")
	h.runningPods(ns, "web", 3, 3*time.Minute)
	nodes := h.karpenterNodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want one per pod", len(nodes))
	}
	sick, recovering, well := nodes[0].Name, nodes[1].Name, nodes[2].Name
	// Both become due 20 s from now, so the repair decides with both unhealthy (marked one
	// after the other and due at once, the first could be judged alone).
	due := 30*time.Minute - 20*time.Second
	h.setCondition(sick, "KernelReady", corev1.ConditionFalse, due)
	h.setCondition(recovering, "KernelReady", corev1.ConditionFalse, due)

	h.eventually("NodeRepairBlocked on both unhealthy nodes", 2*time.Minute, func() error {
		for _, n := range []string{sick, recovering} {
			if !h.hasEvent(n, "NodeRepairBlocked") {
				return fmt.Errorf("no NodeRepairBlocked event on %s", n)
			}
		}
		return nil
	})
	for _, nc := range h.nodeClaims() {
		if nc.DeletionTimestamp != nil {
			t.Fatalf("NodeClaim %s (node %s) is being deleted with 2 of 3 nodes unhealthy: the 20%% limit did not hold", nc.Name, nc.Status.NodeName)
		}
	}

	h.setCondition(recovering, "KernelReady", corev1.ConditionTrue, 0)
	h.eventually("the unhealthy node replaced", 3*time.Minute, func() error {
		var names []string
		for _, n := range h.karpenterNodes() {
			names = append(names, n.Name)
		}
		if slices.Contains(names, sick) || !slices.Contains(names, recovering) || !slices.Contains(names, well) || len(names) != 3 {
			return fmt.Errorf("nodes %v: want %s gone, %s and %s kept and one new", names, sick, recovering, well)
		}
		return nil
	})
	h.runningPods(ns, "web", 3, 2*time.Minute)
}

// setCondition sets a node condition, its transition that long ago.
func (h *harness) setCondition(node string, t corev1.NodeConditionType, status corev1.ConditionStatus, since time.Duration) {
	h.t.Helper()
	n := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: node}, n); err != nil {
		h.t.Fatal(err)
	}
	before := n.DeepCopy()
	c := corev1.NodeCondition{Type: t, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(time.Now().Add(-since)), LastHeartbeatTime: metav1.Now()}
	if i := slices.IndexFunc(n.Status.Conditions, func(x corev1.NodeCondition) bool { return x.Type == t }); i >= 0 {
		n.Status.Conditions[i] = c
	} else {
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
	if err := h.c.Status().Patch(h.ctx, n, client.StrategicMergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

// hasEvent reports whether an event with this reason is recorded about the node.
func (h *harness) hasEvent(node, reason string) bool {
	h.t.Helper()
	var evs corev1.EventList
	if err := h.c.List(h.ctx, &evs); err != nil {
		h.t.Fatal(err)
	}
	return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.Reason == reason
	})
}
