package operator_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// TestFragmentedNodesConsolidated: 20 m5.large nodes each run one 1300m "big" and one 500m
// "small" pod; big is scaled to 0, leaving every node about a quarter used. Consolidation packs
// the small pods onto a third of the nodes, cutting $/h by well over 40 %. Throughout, the small
// pods' PodDisruptionBudget (minAvailable 16) holds, a do-not-disrupt pod stays where it is, and
// no displaced pod waits longer than a provisioning batch for a node.
func TestFragmentedNodesConsolidated(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("fragmented")
	h.bigAndSmall(ns, 20, 20*time.Second, "25%")
	if err := h.c.Create(h.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(16)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "small"}}},
	}); err != nil {
		t.Fatal(err)
	}
	h.runningPods(ns, "big", 20, 4*time.Minute)
	h.runningPods(ns, "small", 20, time.Minute)
	pinned := workshopPod(map[string]string{"app": "pinned"}, corev1.Container{Name: "pinned",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}})
	pinnedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned", Labels: pinned.Labels,
		Annotations: map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}}, Spec: pinned.Spec}
	if err := h.c.Create(h.ctx, pinnedPod); err != nil {
		t.Fatal(err)
	}
	placed := h.runningPods(ns, "pinned", 1, 2*time.Minute)[0]
	before := len(h.karpenterNodes())

	small := h.watchSmallPods(ns)
	h.scale(ns, "big", 0)
	h.eventually("the small pods packed onto at most 60 % of the nodes", 5*time.Minute, func() error {
		if n := len(h.karpenterNodes()); n > before*6/10 {
			return fmt.Errorf("%d of %d nodes left", n, before)
		}
		if n := len(h.nodeClaims()); n > before*6/10 {
			return fmt.Errorf("%d NodeClaims left", n)
		}
		return nil
	})
	h.runningPods(ns, "small", 20, 2*time.Minute)
	var now corev1.Pod
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(&placed), &now); err != nil || now.UID != placed.UID || now.Spec.NodeName != placed.Spec.NodeName {
		t.Errorf("the do-not-disrupt pod moved or went: %v (node %s, was %s)", err, now.Spec.NodeName, placed.Spec.NodeName)
	}
	least, longest := small.result()
	t.Logf("%d nodes before the scale-down, %d after; at least %d small pods Ready; longest wait for a node %s",
		before, len(h.karpenterNodes()), least, longest)
	if least < 16 {
		t.Errorf("only %d small pods were Ready at one point; the PodDisruptionBudget requires 16", least)
	}
	if longest > 10*time.Second {
		t.Errorf("a displaced small pod waited %s for a node, longer than a provisioning batch (10 s)", longest)
	}
}

// bigAndSmall runs n "big" (1300m) and n "small" (500m) pods on the workshop pool narrowed to
// m5.large, so that each node takes one of each; the pool consolidates after the given time
// within the budget.
func (h *harness) bigAndSmall(ns string, n int32, consolidateAfter time.Duration, budget string) {
	h.t.Helper()
	h.workshopPools()
	h.updatePool(func(np *karpv1.NodePool) {
		setValues(np, corev1.LabelInstanceTypeStable, "m5.large")
		np.Spec.Disruption.ConsolidateAfter.Duration = ptr.To(consolidateAfter)
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
	})
	for name, cpu := range map[string]string{"big": "1300m", "small": "500m"} {
		h.deployment(ns, name, n, cpu)
	}
}

// deployment creates a Deployment of n pause pods requesting cpu, for the workshop pool.
func (h *harness) deployment(ns, name string, n int32, cpu string) {
	h.t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: workshopPod(labels, corev1.Container{Name: name,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}})},
	}
	if err := h.c.Create(h.ctx, d); err != nil {
		h.t.Fatal(err)
	}
}

// podWatch follows the small pods through a watch (every change, not samples): the fewest Ready
// at any moment, and the longest a pod created during the watch took to be bound.
type podWatch struct {
	mu      sync.Mutex
	ready   map[string]bool
	least   int
	longest time.Duration
}

func (h *harness) watchSmallPods(ns string) *podWatch {
	h.t.Helper()
	cs, err := kubernetes.NewForConfig(h.env.Config)
	if err != nil {
		h.t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods(ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=small"})
	if err != nil {
		h.t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(h.ctx, metav1.ListOptions{LabelSelector: "app=small", ResourceVersion: list.ResourceVersion})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(w.Stop)
	start := metav1.NewTime(time.Now().Truncate(time.Second)) // creation times have whole seconds
	pw := &podWatch{ready: map[string]bool{}}
	for i := range list.Items {
		pw.ready[list.Items[i].Name] = podReady(&list.Items[i])
	}
	pw.least = pw.count()
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(pw.ready, p.Name)
			} else {
				pw.ready[p.Name] = podReady(p)
				if c := scheduled(p); c != nil && !p.CreationTimestamp.Before(&start) {
					pw.longest = max(pw.longest, c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
				}
			}
			pw.least = min(pw.least, pw.count())
			pw.mu.Unlock()
		}
	}()
	return pw
}

func (pw *podWatch) count() int {
	n := 0
	for _, r := range pw.ready {
		if r {
			n++
		}
	}
	return n
}

func (pw *podWatch) result() (least int, longest time.Duration) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.least, pw.longest
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func scheduled(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestDryRunChangesNothing is the fragmentation scenario, smaller, with --disruption-dry-run:
// consolidation decides as usual, but only says so (a DisruptionDryRun event on each node it
// would remove); no node is tainted or deleted, and every node's Consolidatable condition
// carries its reason.
func TestDryRunChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.cfg.DisruptionDryRun = true
	h.startController()
	ns := h.namespace("dryrun")
	h.bigAndSmall(ns, 4, 10*time.Second, "100%")
	h.runningPods(ns, "big", 4, 3*time.Minute)
	h.runningPods(ns, "small", 4, time.Minute)
	claims := h.nodeClaims()
	h.scale(ns, "big", 0)
	h.eventually("a dry-run decision on the nodes consolidation would remove", 3*time.Minute, func() error {
		var events corev1.EventList
		if err := h.c.List(h.ctx, &events, client.MatchingFields{"reason": "DisruptionDryRun"}); err != nil {
			return err
		}
		would := map[string]bool{}
		for _, e := range events.Items {
			would[e.InvolvedObject.Name] = true
		}
		if len(would) < len(claims)/2 {
			return fmt.Errorf("dry-run decisions on %d of %d NodeClaims", len(would), len(claims))
		}
		return nil
	})
	after := h.nodeClaims()
	if len(after) != len(claims) {
		t.Errorf("%d NodeClaims after the dry run, %d before", len(after), len(claims))
	}
	for _, nc := range after {
		if nc.DeletionTimestamp != nil {
			t.Errorf("NodeClaim %s is being deleted", nc.Name)
		}
		c := state.Condition(&nc, karpv1.ConditionTypeConsolidatable)
		if c == nil || c.Reason == "" {
			t.Errorf("NodeClaim %s has no Consolidatable reason: %+v", nc.Name, c)
		}
	}
	for _, n := range h.karpenterNodes() {
		for _, taint := range n.Spec.Taints {
			if taint.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
				t.Errorf("node %s was tainted in a dry run", n.Name)
			}
		}
	}
}
