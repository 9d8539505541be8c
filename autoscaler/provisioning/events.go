package provisioning

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// How long an event on a pod keeps the same event on the same pod from being posted again, as
// Karpenter's recorder dedupes them (by reason and pod UID, whatever the message): a pod that
// stays unschedulable would otherwise get a FailedScheduling event every round, each one more
// write to an API server that is busy with the same pods.
const (
	failedSchedulingDedupe = 5 * time.Minute
	nominatedDedupe        = 2 * time.Minute
)

// eventDedupe remembers which (reason, pod) events were posted until when they may be posted
// again.
type eventDedupe struct {
	mu      sync.Mutex
	until   map[eventKey]time.Time
	inserts int
}

type eventKey struct {
	reason string
	pod    types.UID
}

// sweepEvery is how many new entries pass between two sweeps of the expired ones, so the map
// holds about the pods of the last dedupe window and not every pod ever seen.
const sweepEvery = 1024

// first reports whether the event is the first of its reason on the pod within window, and if
// so starts the window.
func (d *eventDedupe) first(reason string, pod types.UID, now time.Time, window time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := eventKey{reason, pod}
	if now.Before(d.until[key]) {
		return false
	}
	if d.until == nil {
		d.until = map[eventKey]time.Time{}
	}
	d.until[key] = now.Add(window)
	if d.inserts++; d.inserts%sweepEvery == 0 {
		for k, t := range d.until {
			if !now.Before(t) {
				delete(d.until, k)
			}
		}
	}
	return true
}
