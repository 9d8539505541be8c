package state

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
