package catalog

import (
	"sync"
	"time"
)

// Unavailable remembers offerings that recently failed to launch (insufficient capacity) so the
// scheduler avoids them until a deadline. It has no clock: callers pass the time in. It is safe
// for concurrent use; the zero value is ready to use.
//
// An empty instance type, zone or capacity type in Mark is a wildcard: Mark("", "us-east-1a",
// "", t) marks the whole zone, Mark("", "", "spot", t) all spot capacity.
type Unavailable struct {
	mu      sync.RWMutex
	until   map[offeringKey]time.Time
	version uint64
}

type offeringKey struct{ instanceType, zone, capacityType string }

// NewUnavailable returns an empty set.
func NewUnavailable() *Unavailable { return &Unavailable{} }

// Mark makes the matching offerings unavailable until the given time. A later deadline for the
// same key extends it; an earlier one does not shorten it.
func (u *Unavailable) Mark(instanceType, zone, capacityType string, until time.Time) {
	k := offeringKey{instanceType, zone, capacityType}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = make(map[offeringKey]time.Time)
	}
	if cur, ok := u.until[k]; ok && !until.After(cur) {
		return
	}
	u.until[k] = until
	u.version++
}

// Clear forgets a mark (an exact key, wildcards included as given).
func (u *Unavailable) Clear(instanceType, zone, capacityType string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := offeringKey{instanceType, zone, capacityType}
	if _, ok := u.until[k]; ok {
		delete(u.until, k)
		u.version++
	}
}

// IsUnavailable reports whether the offering is marked unavailable at time now (a mark holds
// while now is before its deadline).
func (u *Unavailable) IsUnavailable(instanceType, zone, capacityType string, now time.Time) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.isUnavailableLocked(instanceType, zone, capacityType, now)
}

func (u *Unavailable) isUnavailableLocked(instanceType, zone, capacityType string, now time.Time) bool {
	if len(u.until) == 0 {
		return false
	}
	for _, it := range [2]string{instanceType, ""} {
		for _, z := range [2]string{zone, ""} {
			for _, ct := range [2]string{capacityType, ""} {
				if t, ok := u.until[offeringKey{it, z, ct}]; ok && now.Before(t) {
					return true
				}
			}
		}
	}
	return false
}

// Version changes whenever a mark is added, extended, cleared or pruned; callers caching
// derived data can compare it. Expiry with the passage of time does not change it.
func (u *Unavailable) Version() uint64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.version
}

// Prune drops marks that have expired at time now.
func (u *Unavailable) Prune(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, t := range u.until {
		if !now.Before(t) {
			delete(u.until, k)
			u.version++
		}
	}
}

// Apply returns the instance types with every marked offering set Available = false at time now.
// The input is not modified: types with a marked offering get a copied Offerings slice, the
// others are returned as they are.
func (u *Unavailable) Apply(its []InstanceType, now time.Time) []InstanceType {
	u.mu.RLock()
	defer u.mu.RUnlock()
	out := make([]InstanceType, len(its))
	copy(out, its)
	if len(u.until) == 0 {
		return out
	}
	for i := range out {
		var copied []Offering
		for j, o := range out[i].Offerings {
			if !o.Available || !u.isUnavailableLocked(out[i].Name, o.Zone, o.CapacityType, now) {
				continue
			}
			if copied == nil {
				copied = make([]Offering, len(out[i].Offerings))
				copy(copied, out[i].Offerings)
			}
			copied[j].Available = false
		}
		if copied != nil {
			out[i].Offerings = copied
		}
	}
	return out
}
