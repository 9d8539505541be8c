// Package switchover keeps karpool from acting on a cluster while a Karpenter controller does.
// Karpenter's replicas elect their leader through a Lease; karpool takes (and keeps) its own
// lead only while no such Lease is held, so the two never launch, disrupt or terminate the same
// NodeClaims at once. Once Karpenter has stopped, karpool adopts what it left behind: the
// NodeClaims, Nodes and instances carry the same labels, annotations, tags and finalizers.
package switchover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// KarpenterLeaseName is the Lease Karpenter's replicas compete for (its LEADER_ELECTION_NAME
// default).
const KarpenterLeaseName = "karpenter-leader-election"

// DefaultLeases are where Karpenter's Lease is looked for: Karpenter runs in its release's
// namespace, kube-system in its getting-started guide and karpenter in many installs.
var DefaultLeases = []types.NamespacedName{
	{Namespace: "kube-system", Name: KarpenterLeaseName},
	{Namespace: "karpenter", Name: KarpenterLeaseName},
}

// ParseLeases reads a comma-separated list of namespace/name Leases ("" is none).
func ParseLeases(s string) ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ns, name, ok := strings.Cut(item, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("lease %q: want namespace/name, e.g. kube-system/%s", item, KarpenterLeaseName)
		}
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	}
	return out, nil
}

// Holder returns who holds the Lease at now: its holder identity, unless the holder released it
// (no identity) or has not renewed it within its duration (a crashed controller). The renew time
// is the holder's clock: clocks more than a few seconds apart shift the expiry by that much.
func Holder(l *coordinationv1.Lease, now time.Time) (holder string, renewed time.Time) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", time.Time{}
	}
	switch {
	case l.Spec.RenewTime != nil:
		renewed = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		renewed = l.Spec.AcquireTime.Time
	default:
		return "", time.Time{}
	}
	duration := 15 * time.Second // client-go's default
	if l.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if !now.Before(renewed.Add(duration)) {
		return "", time.Time{}
	}
	return *l.Spec.HolderIdentity, renewed
}

// KarpenterActiveError says that a Karpenter controller holds its Lease, and how to proceed.
type KarpenterActiveError struct {
	Lease   types.NamespacedName
	Holder  string
	Renewed time.Time
	Now     time.Time
}

func (e *KarpenterActiveError) Error() string {
	return fmt.Sprintf("Karpenter is running: %s holds Lease %s (renewed %s ago), so karpool does not act; "+
		"stop Karpenter (e.g. kubectl -n %s scale deployment karpenter --replicas=0) and karpool takes over "+
		"once the Lease is released or expires, adopting Karpenter's NodeClaims and nodes without replacing them",
		e.Holder, e.Lease, e.Now.Sub(e.Renewed).Round(time.Second), e.Lease.Namespace)
}

// Checker looks at Karpenter's Leases.
type Checker struct {
	// Leases are the Karpenter Leases to look at (none: every check passes).
	Leases []types.NamespacedName
	// Get reads a Lease; a Lease that does not exist is not held.
	Get func(ctx context.Context, key types.NamespacedName) (*coordinationv1.Lease, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Check returns nil when no Karpenter Lease is held, a *KarpenterActiveError when one is, and
// another error when a Lease could not be read.
func (c *Checker) Check(ctx context.Context) error {
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	var errs []error
	for _, key := range c.Leases {
		l, err := c.Get(ctx, key)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading Karpenter's Lease %s: %w", key, err))
			continue
		}
		if holder, renewed := Holder(l, now); holder != "" {
			return &KarpenterActiveError{Lease: key, Holder: holder, Renewed: renewed, Now: now}
		}
	}
	return errors.Join(errs...)
}

// IsKarpenterActive reports whether err says that Karpenter holds its Lease.
func IsKarpenterActive(err error) bool {
	var active *KarpenterActiveError
	return errors.As(err, &active)
}
