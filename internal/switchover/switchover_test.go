package switchover

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func lease(holder string, renewedAgo time.Duration, seconds int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(-renewedAgo)}
	l.Spec.LeaseDurationSeconds = ptr.To(seconds)
	return l
}

func TestHolder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  string
	}{
		{"renewed within its duration", lease("karpenter-7c9d_1", 3*time.Second, 15), "karpenter-7c9d_1"},
		{"released (client-go clears the holder)", lease("", 0, 1), ""},
		{"not renewed within its duration: crashed", lease("karpenter-7c9d_1", 15*time.Second, 15), ""},
		{"no renew time", &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("k")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := Holder(tc.lease, t0); got != tc.want {
				t.Errorf("Holder = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseLeases(t *testing.T) {
	got, err := ParseLeases(" kube-system/karpenter-leader-election, karpenter/k ,")
	if err != nil {
		t.Fatal(err)
	}
	want := []types.NamespacedName{{Namespace: "kube-system", Name: "karpenter-leader-election"}, {Namespace: "karpenter", Name: "k"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := ParseLeases(""); err != nil || len(got) != 0 {
		t.Errorf(`ParseLeases("") = %v, %v; want none`, got, err)
	}
	for _, bad := range []string{"karpenter-leader-election", "/name", "ns/", "a/b/c"} {
		if _, err := ParseLeases(bad); err == nil || !strings.Contains(err.Error(), "namespace/name") {
			t.Errorf("ParseLeases(%q) = %v, want an error naming the form", bad, err)
		}
	}
}

// leases is a fake cluster's Leases for the Checker.
type leases map[types.NamespacedName]*coordinationv1.Lease

func (ls leases) checker(err error) *Checker {
	return &Checker{Leases: DefaultLeases, Now: func() time.Time { return t0 },
		Get: func(_ context.Context, key types.NamespacedName) (*coordinationv1.Lease, error) {
			if err != nil {
				return nil, err
			}
			if l, ok := ls[key]; ok {
				return l, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, key.Name)
		}}
}

func TestCheckNamesTheHolderAndTheWayOut(t *testing.T) {
	if err := (leases{}).checker(nil).Check(context.Background()); err != nil {
		t.Errorf("no Karpenter Lease: %v", err)
	}
	held := leases{DefaultLeases[1]: lease("karpenter-5f6b_2", 2*time.Second, 15)}
	err := held.checker(nil).Check(context.Background())
	if !IsKarpenterActive(err) {
		t.Fatalf("held Lease: got %v, want a KarpenterActiveError", err)
	}
	for _, want := range []string{"karpenter-5f6b_2", "karpenter/karpenter-leader-election", "renewed 2s ago", "kubectl -n karpenter scale deployment karpenter --replicas=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %s", want, err)
		}
	}
	expired := leases{DefaultLeases[0]: lease("karpenter-5f6b_2", time.Minute, 15)}
	if err := expired.checker(nil).Check(context.Background()); err != nil {
		t.Errorf("expired Lease: %v", err)
	}
	broken := (leases{}).checker(apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, "x", errors.New("no")))
	if err := broken.Check(context.Background()); err == nil || IsKarpenterActive(err) {
		t.Errorf("unreadable Lease: got %v, want a read error", err)
	}
}

// fakeLock is karpool's own lock: it counts the writes that reached it.
type fakeLock struct {
	resourcelock.Interface
	writes int
}

func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	f.writes++
	return nil
}

func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	f.writes++
	return nil
}

func TestLockHeldBackWhileKarpenterLeads(t *testing.T) {
	ctx := context.Background()
	cluster := leases{DefaultLeases[0]: lease("karpenter-5f6b_2", time.Second, 15)}
	var readErr error
	checker := cluster.checker(nil)
	get := checker.Get
	checker.Get = func(ctx context.Context, key types.NamespacedName) (*coordinationv1.Lease, error) {
		if readErr != nil {
			return nil, readErr
		}
		return get(ctx, key)
	}
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	own := &fakeLock{}
	lock := NewLock(own, checker, log)

	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "karpool-1"}
	for range 3 {
		if err := lock.Update(ctx, rec); !IsKarpenterActive(err) {
			t.Fatalf("Update while Karpenter leads: %v", err)
		}
	}
	if err := lock.Create(ctx, rec); !IsKarpenterActive(err) {
		t.Fatalf("Create while Karpenter leads: %v", err)
	}
	if own.writes != 0 {
		t.Errorf("%d writes of karpool's Lease while Karpenter led", own.writes)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "karpenter-5f6b_2") {
		t.Errorf("want the refusal said once, naming the holder; got %q", logged)
	}

	delete(cluster, DefaultLeases[0])
	if err := lock.Update(ctx, rec); err != nil || own.writes != 1 {
		t.Fatalf("Update once Karpenter stopped: %v (writes %d)", err, own.writes)
	}
	// A failed read while leading does not cost the lead; Karpenter coming back does.
	readErr = errors.New("connection refused")
	if err := lock.Update(ctx, rec); err != nil {
		t.Errorf("renewal after a failed read: %v", err)
	}
	readErr = nil
	cluster[DefaultLeases[1]] = lease("karpenter-9a_3", 0, 15)
	if err := lock.Update(ctx, rec); !IsKarpenterActive(err) {
		t.Errorf("renewal after Karpenter came back: %v", err)
	}
	if own.writes != 2 {
		t.Errorf("writes = %d, want 2", own.writes)
	}
	// Stopping releases karpool's Lease even while Karpenter leads.
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil || own.writes != 3 {
		t.Errorf("release while Karpenter leads: %v (writes %d)", err, own.writes)
	}
}

func TestWaitReturnsOnceTheLeaseIsReleased(t *testing.T) {
	cluster := leases{DefaultLeases[0]: lease("karpenter-5f6b_2", 0, 15)}
	checker := cluster.checker(nil)
	get := checker.Get
	calls := 0
	checker.Get = func(ctx context.Context, key types.NamespacedName) (*coordinationv1.Lease, error) {
		calls++
		if calls == 3 { // Karpenter releases its Lease after two refusals
			cluster[DefaultLeases[0]] = lease("", 0, 1)
		}
		return get(ctx, key)
	}
	if err := Wait(context.Background(), checker, time.Millisecond, logr.Discard()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if calls < 3 {
		t.Errorf("Wait returned after %d reads, before the Lease was released", calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cluster[DefaultLeases[0]] = lease("karpenter-5f6b_2", 0, 15)
	if err := Wait(ctx, checker, time.Millisecond, logr.Discard()); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
}
