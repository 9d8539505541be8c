package network

import (
	"sync"
	"time"
)

// FullSubnets remembers the subnets that recently had no free address for a launch
// (CreateFleet's InsufficientFreeAddressesInSubnet) until a deadline. Launches then use another
// subnet of the zone, and a zone whose every subnet is full offers nothing (Karpenter v1.6). A
// subnet DescribeSubnets reports without a free address counts as full too: EC2 would refuse the
// launch. Safe for concurrent use; the zero value is ready.
type FullSubnets struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// Mark makes the subnet full until the deadline.
func (f *FullSubnets) Mark(id string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until == nil {
		f.until = map[string]time.Time{}
	}
	if until.After(f.until[id]) {
		f.until[id] = until
	}
}

// Full reports whether the subnet can take no instance at now.
func (f *FullSubnets) Full(s Subnet, now time.Time) bool {
	if s.FreeIPs <= 0 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.until[s.ID]
	if ok && !now.Before(t) {
		delete(f.until, s.ID)
		return false
	}
	return ok
}

// ByZone picks, per zone, the subnet a launch should use at now: the one with the most free
// addresses among those not full. Zones whose every subnet is full are left out.
func (f *FullSubnets) ByZone(subnets []Subnet, now time.Time) map[string]Subnet {
	out := map[string]Subnet{}
	for _, s := range subnets {
		if f.Full(s, now) {
			continue
		}
		if cur, ok := out[s.Zone]; !ok || s.FreeIPs > cur.FreeIPs {
			out[s.Zone] = s
		}
	}
	return out
}
