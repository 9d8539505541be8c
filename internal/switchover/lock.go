package switchover

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lock is karpool's leader-election lock, which cannot be taken while a Karpenter Lease is held
// and cannot be kept once one is: every write of karpool's own Lease (taking it, renewing it)
// first checks Karpenter's. A replica waiting behind Karpenter stays a ready standby; a leader
// that sees Karpenter come back fails to renew and stops, as on any lost lease.
type Lock struct {
	resourcelock.Interface
	checker *Checker
	log     logr.Logger
	// renewing is how long after a successful write a failed check (not a held Lease: an API
	// error) still lets a renewal through, so a transient error does not cost the lead.
	renewing time.Duration

	mu      sync.Mutex
	lastOK  time.Time
	said    string
	saidAt  time.Time
	waiting bool
}

// NewLock wraps karpool's own lock.
func NewLock(own resourcelock.Interface, checker *Checker, log logr.Logger) *Lock {
	return &Lock{Interface: own, checker: checker, log: log, renewing: 15 * time.Second}
}

// Create takes karpool's Lease when it does not exist yet.
func (l *Lock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := l.allowed(ctx); err != nil {
		return err
	}
	return l.wrote(l.Interface.Create(ctx, rec))
}

// Update takes, renews or releases karpool's Lease; only a release (no holder) goes through
// unchecked.
func (l *Lock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity == "" {
		return l.Interface.Update(ctx, rec)
	}
	if err := l.allowed(ctx); err != nil {
		return err
	}
	return l.wrote(l.Interface.Update(ctx, rec))
}

func (l *Lock) allowed(ctx context.Context) error {
	err := l.checker.Check(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		if l.waiting {
			l.log.Info("Karpenter's Lease is free: karpool may act")
			l.waiting, l.said = false, ""
		}
		return nil
	}
	if !IsKarpenterActive(err) && !l.lastOK.IsZero() && time.Since(l.lastOK) < l.renewing {
		return nil
	}
	l.waiting = true
	// The lock is tried every few seconds: say it when it changes, and once a minute.
	if k := sayKey(err); k != l.said || time.Since(l.saidAt) >= time.Minute {
		l.log.Error(err, "not acting")
		l.said, l.saidAt = k, time.Now()
	}
	return err
}

func (l *Lock) wrote(err error) error {
	if err == nil {
		l.mu.Lock()
		l.lastOK = time.Now()
		l.mu.Unlock()
	}
	return err
}

// Wait blocks until no Karpenter Lease is held (for a process without leader election, which has
// no lock to hold back), saying why it waits; it returns ctx's error if ctx ends first.
func Wait(ctx context.Context, checker *Checker, every time.Duration, log logr.Logger) error {
	said := ""
	for {
		err := checker.Check(ctx)
		if err == nil {
			if said != "" {
				log.Info("Karpenter's Lease is free: karpool may act")
			}
			return nil
		}
		if k := sayKey(err); k != said {
			log.Error(err, "not acting")
			said = k
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// Watch returns a *KarpenterActiveError as soon as a Karpenter Lease is held (checked every
// interval), or nil when ctx ends: a process without leader election runs it beside its
// controllers and stops when Karpenter comes back. Errors reading the Leases are not fatal.
func Watch(ctx context.Context, checker *Checker, every time.Duration) error {
	for {
		if err := checker.Check(ctx); IsKarpenterActive(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// sayKey is what must change for a refusal to be logged again: the Lease and its holder (not
// the seconds since its renewal), or the error.
func sayKey(err error) string {
	var active *KarpenterActiveError
	if errors.As(err, &active) {
		return active.Lease.String() + " " + active.Holder
	}
	return err.Error()
}
