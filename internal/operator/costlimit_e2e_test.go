package operator_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/nodepool"
	"github.com/karpool/karpool/testbed/gittest"
)

// cappedPool is an on-demand pool of c5.large and m5.large whose cost limit is %s.
const cappedPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: capped
  annotations:
    karpool.dev/limit-per-hour: %q
spec:
  template:
    metadata:
      labels: {type: karpenter}
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

// TestCostLimitFromGit: a pool whose karpool.dev/limit-per-hour comes from Git stops launching
// at it with 1,000 pods pending in one batch — at no moment do its NodeClaims, launched or still
// launching, add up to more — and the pods left over are Pending with an event naming the
// limit; the pool's status shows the spend against it. A higher limit pushed to Git lets them
// all run.
func TestCostLimitFromGit(t *testing.T) {
	h := newHarness(t)
	h.startController()
	repo := gittest.NewRepo(t, t.TempDir(), "pools.git")
	class, err := os.ReadFile(repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo.Write("pools/ec2nodeclass.yaml", string(class))
	repo.Write("pools/nodepool.yaml", fmt.Sprintf(cappedPool, "$0.30/h"))
	first := repo.Commit("capped pool at $0.30/h")
	ps := &v1alpha1.PoolSync{ObjectMeta: metav1.ObjectMeta{Name: "capped"},
		Spec: v1alpha1.PoolSyncSpec{URL: repo.FileURL(), Path: "pools", Prune: true, Interval: metav1.Duration{Duration: 2 * time.Second}}}
	if err := h.c.Create(h.ctx, ps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), ps) })
	h.waitApplied(ps.Name, first)

	// 1,000 pods in one batch, 19 to a node (100m each of c5.large's 1,930m): about 53 nodes,
	// $4.60/h, where $0.30/h buys three.
	ns := h.namespace("costlimit")
	h.apply(ns, writeManifest(t, "inflate.yaml", deployment("inflate", 1000, "100m", "64Mi", "type: karpenter")))
	price := h.claimCost(t)
	h.eventually("pods held by the cost limit", 3*time.Minute, func() error {
		if cost := price(); cost > 0.30+1e-6 {
			t.Fatalf("the pool's NodeClaims may cost $%.4f/h, past its $0.30/h limit", cost)
		}
		if !h.eventNamed(ns, "FailedScheduling", v1alpha1.AnnotationLimitPerHour) {
			return fmt.Errorf("no FailedScheduling event naming %s yet", v1alpha1.AnnotationLimitPerHour)
		}
		return h.poolCondition("capped", nodepool.ConditionTypeCostWithinLimit, metav1.ConditionTrue, "of the $0.3000/h limit")
	})
	// A few more provisioning rounds change nothing: the limit holds with every claim launched.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if cost := price(); cost > 0.30+1e-6 {
			t.Fatalf("the pool's NodeClaims may cost $%.4f/h, past its $0.30/h limit", cost)
		}
		select {
		case <-h.ctx.Done():
			t.Fatal(h.ctx.Err())
		case <-time.After(time.Second):
		}
	}
	if n := h.runningPodsNow(ns, "inflate"); n == 0 || n > 3*19 {
		t.Fatalf("%d of 1,000 pods running under the $0.30/h limit; want some, at most three nodes' worth", n)
	}

	repo.Write("pools/nodepool.yaml", fmt.Sprintf(cappedPool, "10.00"))
	h.waitApplied(ps.Name, repo.Commit("capped pool at $10.00/h"))
	h.runningPods(ns, "inflate", 1000, 5*time.Minute)
	if cost := price(); cost > 10.00+1e-6 {
		t.Fatalf("the pool's NodeClaims may cost $%.4f/h, past its $10.00/h limit", cost)
	}
}

// claimCost returns a function that sums what the NodeClaims may cost, from the catalog: a
// launched one at its offering, one still launching at the dearest offering it lists.
func (h *harness) claimCost(t *testing.T) func() float64 {
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := catalog.NodeClassOptionsFor(nil) // the workshop class sets no block devices
	if err != nil {
		t.Fatal(err)
	}
	its := cat.InstanceTypes(opts)
	return func() float64 {
		sum := 0.0
		for _, nc := range h.nodeClaims() {
			if p, ok := catalog.PriceOf(its, nc.Labels); ok && nc.Status.ProviderID != "" {
				sum += p
				continue
			}
			worst := 0.0
			for _, r := range nc.Spec.Requirements {
				for i := range its {
					if r.Key == corev1.LabelInstanceTypeStable && slices.Contains(r.Values, its[i].Name) {
						for _, o := range its[i].Offerings {
							worst = max(worst, o.PricePerHour)
						}
					}
				}
			}
			sum += worst
		}
		return sum
	}
}

// runningPodsNow counts the app's pods running in ns.
func (h *harness) runningPodsNow(ns, app string) int {
	var pods corev1.PodList
	if err := h.c.List(h.ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		h.t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			running++
		}
	}
	return running
}

// eventNamed reports whether some event in ns has the reason and a message containing what.
func (h *harness) eventNamed(ns, reason, what string) bool {
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.InNamespace(ns)); err != nil {
		return false
	}
	for _, e := range events.Items {
		if e.Reason == reason && strings.Contains(e.Message, what) {
			return true
		}
	}
	return false
}

// poolCondition checks a NodePool condition's status and message.
func (h *harness) poolCondition(pool, typ string, status metav1.ConditionStatus, msg string) error {
	var np karpv1.NodePool
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: pool}, &np); err != nil {
		return err
	}
	c := meta.FindStatusCondition(np.Status.Conditions, typ)
	if c == nil || c.Status != status || !strings.Contains(c.Message, msg) {
		return fmt.Errorf("NodePool %s condition %s: %+v, want %s with %q", pool, typ, c, status, msg)
	}
	return nil
}
