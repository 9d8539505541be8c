package reconciler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
)

func TestBackoffGrowsFromTheRetryIntervalAndResets(t *testing.T) {
	r := New(nil, Options{Jitter: -1, MaxBackoff: 10 * time.Second})
	ps := &v1alpha1.PoolSync{Spec: v1alpha1.PoolSyncSpec{
		Interval:      metav1.Duration{Duration: time.Minute},
		RetryInterval: &metav1.Duration{Duration: time.Second},
	}}
	ps.Name = "a"
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, r.backoff(ps))
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("backoff sequence %v, want %v seconds", got, want)
		}
	}
	r.forget(ps.Name)
	if d := r.backoff(ps); d != time.Second {
		t.Fatalf("after a success the backoff restarts at the retry interval, got %s", d)
	}

	// Without retryInterval the interval is the base, and a base above the cap is kept.
	slow := &v1alpha1.PoolSync{Spec: v1alpha1.PoolSyncSpec{Interval: metav1.Duration{Duration: time.Minute}}}
	slow.Name = "b"
	if d := r.backoff(slow); d != time.Minute {
		t.Fatalf("base above MaxBackoff: got %s, want the interval", d)
	}
}

func TestJitterStaysWithinItsFraction(t *testing.T) {
	r := New(nil, Options{Jitter: 0.1})
	for i := 0; i < 1000; i++ {
		if d := r.jitter(10 * time.Second); d < 9*time.Second || d > 11*time.Second {
			t.Fatalf("jittered 10s to %s", d)
		}
	}
}
