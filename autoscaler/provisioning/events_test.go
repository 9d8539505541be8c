package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/karpool/karpool/autoscaler/scheduling"
)

// A pod that stays unschedulable round after round gets one FailedScheduling event per
// failedSchedulingDedupe, as from Karpenter, and another pod still gets its own.
func TestFailedSchedulingDedupedPerPod(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	p := New(nil, Options{Recorder: rec})
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	stuck := []scheduling.Unschedulable{{Pod: pendingPod("stuck", "1"), Reason: "no instance type fits"}}
	round := func(pods []scheduling.Unschedulable) int {
		p.reportUnschedulable(context.Background(), pods, nil)
		n := len(rec.Events)
		for range n {
			<-rec.Events
		}
		return n
	}
	if got := round(stuck); got != 1 {
		t.Fatalf("first round: %d events, want 1", got)
	}
	now = now.Add(time.Minute)
	if got := round(stuck); got != 0 {
		t.Errorf("a minute later: %d events for the same pod, want 0", got)
	}
	other := []scheduling.Unschedulable{{Pod: pendingPod("other", "1"), Reason: "no instance type fits"}}
	if got := round(append(other, stuck...)); got != 1 {
		t.Errorf("a new pod beside the stuck one: %d events, want 1", got)
	}
	now = now.Add(failedSchedulingDedupe)
	if got := round(stuck); got != 1 {
		t.Errorf("after the dedupe window: %d events, want 1", got)
	}
}

// A pod planned again within nominatedDedupe (its NodeClaim failed to launch, say) gets no
// second Nominated event; its new nomination is still recorded.
func TestNominatedDedupedPerPod(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	p := New(nil, Options{Recorder: rec})
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	pod := pendingPod("web", "1")
	p.nominate([]*corev1.Pod{pod}, "first")
	now = now.Add(30 * time.Second)
	p.nominate([]*corev1.Pod{pod}, "second")
	if got := len(rec.Events); got != 1 {
		t.Errorf("%d Nominated events, want 1", got)
	}
	if got := p.opts.Nominations.Pods("second"); len(got) != 1 || got[0].Name != "web" {
		t.Errorf("nominated to the second claim: %v", got)
	}
	now = now.Add(nominatedDedupe)
	p.nominate([]*corev1.Pod{pod}, "third")
	if got := len(rec.Events); got != 2 {
		t.Errorf("after the dedupe window: %d Nominated events, want 2", got)
	}
}

// The dedupe map forgets expired entries, so it holds about one window's pods.
func TestEventDedupeSweepsExpired(t *testing.T) {
	var d eventDedupe
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for i := range sweepEvery - 1 {
		d.first("FailedScheduling", uidOf(i), now, time.Minute)
	}
	now = now.Add(time.Hour)
	d.first("FailedScheduling", uidOf(-1), now, time.Minute)
	if got := len(d.until); got != 1 {
		t.Errorf("%d entries after the sweep, want 1 (only the new one)", got)
	}
}

func uidOf(i int) k8stypes.UID { return k8stypes.UID(fmt.Sprintf("uid-%d", i)) }
