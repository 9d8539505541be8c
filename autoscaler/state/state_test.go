package state

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// A node's pods are the bound ones and the pending ones nominated to it: the kube-scheduler
// keeps the room of a nominated pod (preemption) free for it, so the engine must not plan
// other pods there. A terminating pod keeps its room only where it is bound.
func TestPodsOnCountsNominatedPods(t *testing.T) {
	now := metav1.Now()
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	nominated := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nominated"}, Status: corev1.PodStatus{NominatedNodeName: "n1"}}
	leaving := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &now},
		Status: corev1.PodStatus{NominatedNodeName: "n1"}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending"}}
	c := New([]*corev1.Pod{bound, nominated, leaving, pending}, nil, nil)
	var names []string
	for _, p := range c.PodsOn("n1") {
		names = append(names, p.Name)
	}
	if len(names) != 2 || names[0] != "bound" || names[1] != "nominated" {
		t.Errorf("pods on n1: %v, want [bound nominated]", names)
	}
	if Provisionable(nominated) {
		t.Error("a pod nominated by the scheduler's preemption is provisionable")
	}
}

// The hand-off's patch names the node and the resourceVersion read; clearing removes the field.
func TestNominationPatch(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "42"}}
	for node, want := range map[string]string{
		"ip-10-0-0-1.ec2.internal": `{"metadata":{"resourceVersion":"42"},"status":{"nominatedNodeName":"ip-10-0-0-1.ec2.internal"}}`,
		"":                         `{"metadata":{"resourceVersion":"42"},"status":{"nominatedNodeName":null}}`,
	} {
		p := NominationPatch(pod, node)
		body, err := p.Data(pod)
		if err != nil || string(body) != want || p.Type() != types.MergePatchType {
			t.Errorf("node %q: %s %s (%v), want %s", node, p.Type(), body, err, want)
		}
	}
}

// The do-not-disrupt annotation as Karpenter's tests read it: "true" for good, a duration from
// the pod's start, a pod not started held, anything else ignored with a reason.
func TestDoNotDisrupt(t *testing.T) {
	now := time.Unix(100000, 0)
	pod := func(value string, startedAgo time.Duration) *corev1.Pod {
		p := &corev1.Pod{}
		if value != "" {
			p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: value}
		}
		if startedAgo >= 0 {
			p.Status.StartTime = &metav1.Time{Time: now.Add(-startedAgo)}
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		held  bool
		until time.Time
		bad   bool
	}{
		{"no annotation", pod("", time.Minute), false, time.Time{}, false},
		{"true", pod("true", time.Hour), true, time.Time{}, false},
		{"5m, started 3m ago", pod("5m", 3*time.Minute), true, now.Add(2 * time.Minute), false},
		{"5m, started 10m ago", pod("5m", 10*time.Minute), false, now.Add(-5 * time.Minute), false},
		{"1h, not started", pod("1h", -1), true, time.Time{}, false},
		{"not a duration", pod("invalid", time.Minute), false, time.Time{}, true},
		{"zero", pod("0s", time.Minute), false, time.Time{}, true},
		{"negative", pod("-5m", time.Minute), false, time.Time{}, true},
		{"false", pod("false", time.Minute), false, time.Time{}, true},
	} {
		held, until, err := DoNotDisrupt(tc.pod, now)
		if held != tc.held || !until.Equal(tc.until) || (err != nil) != tc.bad {
			t.Errorf("%s: held %v until %v (err %v), want %v until %v (error %v)", tc.name, held, until, err, tc.held, tc.until, tc.bad)
		}
	}
}

// Karpenter plans for pods the kube-scheduler has failed (PodScheduled=False, Unschedulable);
// karpool also plans for pods it has not tried yet, unless another scheduler owns them, they
// are gated, or the scheduler might make room by preemption (a pod of lower priority runs and
// the pending one may preempt).
func TestProvisionablePodsIncludeUntried(t *testing.T) {
	prio := func(p *corev1.Pod, v int32) *corev1.Pod { p.Spec.Priority = &v; return p }
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
	}
	failed := pod("failed")
	failed.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	gated := pod("gated")
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	otherScheduler := pod("other-scheduler")
	otherScheduler.Spec.SchedulerName = "volcano"
	scheduling := pod("being-bound")
	scheduling.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	never := prio(pod("high-never-preempts"), 100)
	never.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	running := prio(pod("running"), 10)
	running.Spec.NodeName = "n1"
	names := func(c *Cluster) []string {
		var out []string
		for _, p := range c.ProvisionablePods() {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	pods := []*corev1.Pod{failed, pod("untried"), gated, otherScheduler, scheduling, prio(pod("high"), 100), never, prio(pod("equal"), 10)}
	want := []string{"equal", "failed", "high-never-preempts", "untried"}
	if got := names(New(append(slices.Clone(pods), running), nil, nil)); !slices.Equal(got, want) {
		t.Errorf("with a pod of priority 10 running: %v, want %v", got, want)
	}
	want = []string{"equal", "failed", "high", "high-never-preempts", "untried"}
	if got := names(New(pods, nil, nil)); !slices.Equal(got, want) {
		t.Errorf("with nothing running: %v, want %v", got, want)
	}
}
