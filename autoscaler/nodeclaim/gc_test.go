package nodeclaim

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	b "github.com/karpool/karpool/testbed/builders"
)

// collector records what the garbage collector hands it.
type collector struct {
	claims []string
	err    error
}

func (c *collector) GarbageCollect(_ context.Context, claims []karpv1.NodeClaim, _ time.Time) ([]string, error) {
	for _, nc := range claims {
		c.claims = append(c.claims, nc.Name)
	}
	return nil, c.err
}

// newCollector stores NodeClaim c1, launched as providerID at t0, without an instance in the
// cloud unless the test adds one.
func newCollector(t *testing.T, col *collector) (*env, *GarbageCollector) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0), b.Launched(providerID, t0), b.WithFinalizer()))
	var ic InstanceCollector
	if col != nil {
		ic = col
	}
	return e, NewGarbageCollector(e.c, e.c, time.Minute, e.options(), ic)
}

// A NodeClaim whose instance vanished (terminated outside karpool) is deleted, so its pods get
// new capacity, once the instance has been missing for longer than EC2's reads may lag.
func TestGCDeletesClaimsWhoseInstanceVanished(t *testing.T) {
	e, gc := newCollector(t, nil)
	e.now = t0.Add(vanishedAfter - time.Second)
	if err := gc.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.claim("c1").DeletionTimestamp != nil {
		t.Fatal("deleted while the launch is too recent to trust the cloud's answer")
	}
	e.now = t0.Add(vanishedAfter)
	if err := gc.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.claim("c1").DeletionTimestamp == nil {
		t.Error("NodeClaim without an instance kept")
	}
}

// List may lag behind the instances; the collector asks for the one instance before it deletes
// its NodeClaim.
func TestGCAsksForTheInstanceBeforeDeleting(t *testing.T) {
	e, gc := newCollector(t, nil)
	e.cloud.AddInstance(e.claim("c1"))
	e.cloud.HideFromList(providerID)
	e.now = t0.Add(time.Hour)
	if err := gc.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.claim("c1").DeletionTimestamp != nil {
		t.Error("NodeClaim deleted although its instance exists")
	}
	if calls := e.cloud.GetCalls(); len(calls) != 1 || calls[0] != providerID {
		t.Errorf("Get calls %v, want one for %s", calls, providerID)
	}
}

// Instances without a NodeClaim are the provider's to find: it is given every NodeClaim, and
// its failure is the pass's.
func TestGCHandsEveryClaimToTheInstanceCollector(t *testing.T) {
	col := &collector{err: errors.New("DescribeInstances throttled")}
	e, gc := newCollector(t, col)
	e.create(b.NodeClaim("c2", b.CreatedAt(t0)))
	e.cloud.AddInstance(e.claim("c1"))
	if err := gc.Collect(t.Context()); err == nil {
		t.Error("the collector's error was lost")
	}
	if len(col.claims) != 2 {
		t.Errorf("collector given %v, want c1 and c2", col.claims)
	}
}

// A pod event stamps the NodeClaim of the pod's node with lastPodEventTime (consolidateAfter
// counts from it), at most once per podEventDedupe.
func TestPodEventsStampTheClaim(t *testing.T) {
	e := newEnv(t, nil, b.NodeClaim("c1", b.CreatedAt(t0), b.Launched(providerID, t0)), b.Node("n1", providerID))
	pe := NewPodEvents(e.c, func() time.Time { return e.now })
	stamp := func(at time.Time) time.Time {
		e.now = at
		if _, err := pe.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
			t.Fatal(err)
		}
		return e.claim("c1").Status.LastPodEventTime.Time
	}
	if got := stamp(t0.Add(time.Minute)); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("lastPodEventTime %s, want %s", got, t0.Add(time.Minute))
	}
	if got := stamp(t0.Add(time.Minute + podEventDedupe - time.Second)); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("rewritten within %s: %s", podEventDedupe, got)
	}
	if got := stamp(t0.Add(time.Minute + podEventDedupe)); !got.Equal(t0.Add(time.Minute + podEventDedupe)) {
		t.Errorf("not rewritten after %s: %s", podEventDedupe, got)
	}
}
