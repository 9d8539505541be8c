package operator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/internal/unimplemented"
)

// staticNodes counts the pool's NodeClaims not being deleted, those of them whose node
// registered, and names them, sorted.
func (h *harness) staticNodes(pool string) (claims, registered int, names []string) {
	h.t.Helper()
	for _, nc := range h.nodeClaims() {
		if nc.Labels[karpv1.LabelNodePool] != pool {
			continue
		}
		if nc.DeletionTimestamp != nil {
			continue
		}
		names = append(names, nc.Name)
		claims++
		if nc.Status.NodeName != "" {
			registered++
		}
	}
	slices.Sort(names)
	return claims, registered, names
}

// TestStaticPoolHoldsItsReplicas: with the StaticCapacity gate, a static NodePool gets its 3
// nodes with no pod asking for them, keeps them empty past consolidateAfter (consolidation
// leaves static pools alone), and gives up 2 when replicas drop to 1.
func TestStaticPoolHoldsItsReplicas(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates.StaticCapacity = true
	h.startController()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}}
	np.Spec.Replicas = ptr.To[int64](3)
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{{Key: "node.kubernetes.io/instance-type", Operator: "In", Values: []string{"m5.large"}}}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.NillableDuration{Duration: ptr.To(time.Duration(0))}
	if err := h.c.Create(h.ctx, np); err != nil {
		t.Fatal(err)
	}
	h.eventually("3 static nodes registered", 3*time.Minute, func() error {
		if claims, registered, _ := h.staticNodes("static"); claims != 3 || registered != 3 {
			return fmt.Errorf("%d NodeClaims, %d registered", claims, registered)
		}
		return nil
	})
	h.eventually("FieldsHonored True with the gate on", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(np), np); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(np.Status.Conditions, unimplemented.ConditionType); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("FieldsHonored %+v", c)
		}
		return nil
	})

	// Empty nodes of a dynamic pool with consolidateAfter 0s go within about 50 s of their
	// initialization (the 20 s nomination window, a 10 s pass, the 5 s validation); these stay.
	// The same three NodeClaims throughout: a node taken by emptiness would leave the list.
	_, _, first := h.staticNodes("static")
	for deadline := time.Now().Add(75 * time.Second); time.Now().Before(deadline); {
		if _, _, names := h.staticNodes("static"); !slices.Equal(names, first) {
			t.Fatalf("the static pool's NodeClaims went from %v to %v while empty; want its 3 replicas kept", first, names)
		}
		select {
		case <-h.ctx.Done():
			t.Fatal(h.ctx.Err())
		case <-time.After(time.Second):
		}
	}

	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Replicas = ptr.To[int64](1)
	if err := h.c.Patch(h.ctx, np, patch); err != nil {
		t.Fatal(err)
	}
	h.eventually("the static pool down to 1 node", 2*time.Minute, func() error {
		if claims, _, _ := h.staticNodes("static"); claims != 1 {
			return fmt.Errorf("%d NodeClaims", claims)
		}
		return nil
	})
	h.eventually("1 instance left in the simulator", time.Minute, func() error {
		if got := h.liveInstances(); got != 1 {
			return fmt.Errorf("%d instances", got)
		}
		return nil
	})
}
