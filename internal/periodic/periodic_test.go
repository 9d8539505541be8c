package periodic

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPacedFollowsThePausesAsked: each pass runs after the pause the one before asked for, a
// failing pass does not stop the loop, and cancelling ends it.
func TestPacedFollowsThePausesAsked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pauses := []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Millisecond}
	var at []time.Time
	done := make(chan error, 1)
	go func() {
		done <- Paced(ctx, "test", time.Millisecond, func(context.Context) (time.Duration, error) {
			at = append(at, time.Now())
			if len(at) > len(pauses) {
				cancel()
				return time.Hour, nil
			}
			return pauses[len(at)-1], errors.New("a failed pass is logged, not fatal")
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Paced returned %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Paced did not end after its context was cancelled")
	}
	if len(at) != len(pauses)+1 {
		t.Fatalf("%d passes, want %d", len(at), len(pauses)+1)
	}
	for i, p := range pauses {
		if gap := at[i+1].Sub(at[i]); gap < p {
			t.Errorf("pass %d came %s after the one before, which asked for %s", i+2, gap, p)
		}
	}
}
