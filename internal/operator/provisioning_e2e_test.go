package operator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/testbed/awssim"
)

// scale sets a Deployment's replicas.
func (h *harness) scale(ns, name string, replicas int32) {
	h.t.Helper()
	d := &appsv1.Deployment{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		h.t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(replicas)
	if err := h.c.Patch(h.ctx, d, patch); err != nil {
		h.t.Fatal(err)
	}
}

// runningPods waits until n pods with the label app=<app> in ns are Running and returns them.
func (h *harness) runningPods(ns, app string, n int, timeout time.Duration) []corev1.Pod {
	h.t.Helper()
	var pods corev1.PodList
	h.eventually(fmt.Sprintf("%d %s pods running", n, app), timeout, func() error {
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
			}
		}
		if running != n || len(pods.Items) != n {
			return fmt.Errorf("%d of %d pods running", running, len(pods.Items))
		}
		return nil
	})
	return pods.Items
}

func (h *harness) nodeClaims() []karpv1.NodeClaim {
	h.t.Helper()
	var claims karpv1.NodeClaimList
	if err := h.c.List(h.ctx, &claims); err != nil {
		h.t.Fatal(err)
	}
	return claims.Items
}

func (h *harness) karpenterNodes() []corev1.Node {
	h.t.Helper()
	var nodes corev1.NodeList
	if err := h.c.List(h.ctx, &nodes, client.HasLabels{karpv1.LabelNodePool}); err != nil {
		h.t.Fatal(err)
	}
	return nodes.Items
}

// TestWorkshopScaleOut is seed 003: inflate (5 × 1Gi, nodeSelector type=karpenter) scaled from 0
// to 5 gets exactly one on-demand m5.large, which registers, initializes and runs all five pods,
// bound by the real kube-scheduler.
func TestWorkshopScaleOut(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("workshop")
	pods := h.workshopScaleOut(ns, 5)

	claims := h.nodeClaims()
	if len(claims) != 1 {
		t.Fatalf("want exactly 1 NodeClaim, got %d", len(claims))
	}
	nodes := h.karpenterNodes()
	if len(nodes) != 1 {
		t.Fatalf("want exactly 1 node, got %d", len(nodes))
	}
	node := nodes[0]
	for _, p := range pods {
		if p.Spec.NodeName != node.Name {
			t.Errorf("pod %s runs on %s, want %s", p.Name, p.Spec.NodeName, node.Name)
		}
	}
	wantLabels := map[string]string{
		"type":                                  "karpenter",
		"node.kubernetes.io/instance-type":      "m5.large",
		"karpenter.sh/capacity-type":            "on-demand",
		"karpenter.sh/nodepool":                 "default",
		"karpenter.sh/registered":               "true",
		"karpenter.sh/initialized":              "true",
		"karpenter.k8s.aws/ec2nodeclass":        "default",
		"kubernetes.io/arch":                    "amd64",
		"kubernetes.io/os":                      "linux",
		"topology.kubernetes.io/region":         "us-east-1",
		"karpenter.k8s.aws/instance-category":   "m",
		"karpenter.k8s.aws/instance-cpu":        "2",
		"karpenter.k8s.aws/instance-family":     "m5",
		"karpenter.k8s.aws/instance-generation": "5",
		"karpenter.k8s.aws/instance-hypervisor": "nitro",
		"karpenter.k8s.aws/instance-memory":     "8192",
		"karpenter.k8s.aws/instance-size":       "large",
	}
	for k, v := range wantLabels {
		if node.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if !strings.HasPrefix(node.Labels[corev1.LabelTopologyZone], "us-east-1") {
		t.Errorf("zone label = %q", node.Labels[corev1.LabelTopologyZone])
	}
	for name, want := range map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29"} {
		got := node.Status.Allocatable[name]
		if got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
		}
	}
	nc := claims[0]
	if nc.Status.NodeName != node.Name || nc.Status.ProviderID != node.Spec.ProviderID {
		t.Errorf("NodeClaim status nodeName=%q providerID=%q, node %q %q", nc.Status.NodeName, nc.Status.ProviderID, node.Name, node.Spec.ProviderID)
	}
	for _, cond := range []string{"Launched", "Registered", "Initialized", "Ready"} {
		if !conditionTrue(nc.Status.Conditions, cond) {
			t.Errorf("NodeClaim condition %s is not True: %+v", cond, nc.Status.Conditions)
		}
	}
	// Bound by the real kube-scheduler: each pod has its Scheduled event from default-scheduler.
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	scheduled := 0
	for _, e := range events.Items {
		if e.Reason == "Scheduled" && (e.Source.Component == "default-scheduler" || e.ReportingController == "default-scheduler") {
			scheduled++
		}
	}
	if scheduled < 5 {
		t.Errorf("want 5 Scheduled events from default-scheduler, got %d", scheduled)
	}

	launched := h.logLines("launched nodeclaim")
	if len(launched) != 1 {
		t.Fatalf("want one \"launched nodeclaim\" log line, got %d:\n%s", len(launched), h.logs.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(launched[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line["instance-type"] != "m5.large" || line["capacity-type"] != "on-demand" || line["zone"] != node.Labels[corev1.LabelTopologyZone] {
		t.Errorf("launched nodeclaim log line: %s", launched[0])
	}
	if alloc, _ := line["allocatable"].(map[string]any); alloc["cpu"] != "1930m" || alloc["memory"] != "6903Mi" || alloc["pods"] != "29" {
		t.Errorf("launched nodeclaim allocatable: %v", line["allocatable"])
	}
	for _, msg := range []string{"found provisionable pod(s)", "computed new nodeclaim(s) to fit pod(s)", "created nodeclaim", "registered nodeclaim", "initialized nodeclaim"} {
		if len(h.logLines(msg)) == 0 {
			t.Errorf("no %q log line", msg)
		}
	}
	// NodePool status counts the node.
	np := &karpv1.NodePool{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	h.eventually("NodePool status", 30*time.Second, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, np); err != nil {
			return err
		}
		if np.Status.Nodes != 1 || np.Status.Resources.Cpu().String() != "2" || !metaConditionTrue(np, "Ready") {
			return fmt.Errorf("status %+v", np.Status)
		}
		return nil
	})
}

func conditionTrue(conds []karpv1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == "True"
		}
	}
	return false
}

func metaConditionTrue(np *karpv1.NodePool, t string) bool {
	for _, c := range np.Status.Conditions {
		if c.Type == t {
			return c.Status == "True"
		}
	}
	return false
}

// TestSecondWaveFillsInFlightNodeClaim: two waves of one Deployment's pods (issue 13). EC2
// answers CreateFleet 30 s late (and the instance runs, so its Node registers, a minute after
// it), so when the second wave is planned the first wave's NodeClaim is in flight with no
// instance type and no node yet; the room its smallest option leaves holds the second pod,
// which is nominated to it instead of getting a node of its own. In the end one NodeClaim, and
// both pods Running on its node.
func TestSecondWaveFillsInFlightNodeClaim(t *testing.T) {
	h := newHarness(t)
	h.sim.SetFaults(awssim.Faults{
		ResponseLatency: map[string]awssim.Duration{"ec2:CreateFleet": {Duration: 30 * time.Second}},
		LaunchLatency:   awssim.Duration{Duration: time.Minute},
	})
	h.startController()
	ns := h.namespace("waves")
	h.workshopPools()
	h.inflate(ns, 1)
	var claim string
	h.eventually("the first wave's NodeClaim", time.Minute, func() error {
		claims := h.nodeClaims()
		if len(claims) != 1 {
			return fmt.Errorf("%d NodeClaims", len(claims))
		}
		claim = claims[0].Name
		return nil
	})
	h.scale(ns, "inflate", 2)
	h.eventually("both pods nominated to "+claim, time.Minute, func() error {
		var events corev1.EventList
		if err := h.c.List(h.ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		nominated := map[string]string{}
		for _, e := range events.Items {
			if e.Reason == "Nominated" {
				nominated[e.InvolvedObject.Name] = e.Message
			}
		}
		for pod, msg := range nominated {
			if !strings.HasSuffix(msg, "nodeclaim/"+claim) {
				return fmt.Errorf("pod %s: %q", pod, msg)
			}
		}
		if len(nominated) != 2 {
			return fmt.Errorf("%d pods nominated", len(nominated))
		}
		return nil
	})
	if claims := h.nodeClaims(); len(claims) != 1 || claims[0].Status.ProviderID != "" {
		t.Fatalf("the second wave was planned after the launch (or opened a NodeClaim): %d NodeClaims, first launched=%v",
			len(claims), len(claims) > 0 && claims[0].Status.ProviderID != "")
	}
	h.sim.SetFaults(awssim.Faults{})
	pods := h.runningPods(ns, "inflate", 2, 3*time.Minute)
	if claims := h.nodeClaims(); len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(claims))
	}
	if pods[0].Spec.NodeName != pods[1].Spec.NodeName {
		t.Errorf("pods on %s and %s, want one node", pods[0].Spec.NodeName, pods[1].Spec.NodeName)
	}
}

// TestStaleNominationCleared: a pending pod nominated to a karpool node it does not fit on (what
// a hand-off leaves when the scheduler filled the node with other pods first) is not left
// Pending. A nominated pod is not provisionable (it looks like a preemption in progress), and
// the kube-scheduler only looks at an unschedulable pod again on a cluster event or after five
// minutes; karpool takes the nomination back and launches a node for the pod. The test sets
// the nomination right after the scheduler's first failed attempt, as a hand-off would.
func TestStaleNominationCleared(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("stale-nomination")
	first := h.workshopScaleOut(ns, 5)[0].Spec.NodeName

	late := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"type": "karpenter"},
			Containers: []corev1.Container{{Name: "c", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}}},
		},
	}
	if err := h.c.Create(h.ctx, late); err != nil {
		t.Fatal(err)
	}
	h.eventually("the scheduler to find no room for the late pod", time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(late), late); err != nil {
			return err
		}
		for _, c := range late.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", late.Status.Conditions)
	})
	patch := client.MergeFromWithOptions(late.DeepCopy(), client.MergeFromWithOptimisticLock{})
	late.Status.NominatedNodeName = first
	if err := h.c.Status().Patch(h.ctx, late, patch); err != nil {
		t.Fatal(err)
	}

	h.eventually("the late pod Running on a node of its own", 3*time.Minute, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(late), late); err != nil {
			return err
		}
		if late.Spec.NodeName == "" || late.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, node %q, nominated %q", late.Status.Phase, late.Spec.NodeName, late.Status.NominatedNodeName)
		}
		return nil
	})
	if late.Spec.NodeName == first {
		t.Fatalf("the late pod runs on %s, which had no room for it", first)
	}
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": "late"}); err != nil {
		t.Fatal(err)
	}
	cleared := false
	for _, e := range events.Items {
		cleared = cleared || (e.Reason == "NominationCleared" && strings.Contains(e.Message, first))
	}
	if !cleared {
		t.Errorf("no NominationCleared event names %s: the nomination went some other way", first)
	}
}

// While an instance boots, the pods planned onto it are already nominated to its node (the
// instance's private DNS name, which it registers under), and they stay nominated for longer
// than stale hand-offs are kept: no second NodeClaim is planned for them, and they run there.
func TestPodsHandedOffWhileInstanceBoots(t *testing.T) {
	h := newHarness(t)
	const boot = 25 * time.Second // longer than a stale nomination is kept
	h.sim.SetFaults(awssim.Faults{RegistrationLatency: awssim.Duration{Duration: boot}})
	h.startController()
	ns := h.namespace("booting")
	h.workshopPools()
	h.inflate(ns, 3)
	var nominated string
	h.eventually("the pods nominated to a node that has not registered", time.Minute, func() error {
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.NominatedNodeName == "" {
				return fmt.Errorf("pod %s not nominated", p.Name)
			}
			nominated = p.Status.NominatedNodeName
		}
		var node corev1.Node
		if err := h.c.Get(h.ctx, client.ObjectKey{Name: nominated}, &node); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: %v (want it not registered yet)", nominated, err)
		}
		return nil
	})
	pods := h.runningPods(ns, "inflate", 3, 3*time.Minute)
	for _, p := range pods {
		if p.Spec.NodeName != nominated {
			t.Errorf("pod %s runs on %s, want %s, the node it was handed to while booting", p.Name, p.Spec.NodeName, nominated)
		}
	}
	if claims := h.nodeClaims(); len(claims) != 1 {
		t.Errorf("%d NodeClaims, want 1: the booting node's pods were planned again", len(claims))
	}
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "NominationCleared" {
			t.Errorf("%s: %s (a hand-off to a booting node was taken back)", e.InvolvedObject.Name, e.Message)
		}
	}
}
