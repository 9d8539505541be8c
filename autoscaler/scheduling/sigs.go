package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpool/karpool/internal/requirements"
)

// nodeSig is a set of node requirements plus tolerations: what a pod (at one relaxation level)
// asks of a node. Pods of many classes share one signature.
type nodeSig struct {
	id   int
	reqs []req
	tols []corev1.Toleration
	// avoid: PreferNoSchedule taints the tolerations do not cover keep the pod away, like
	// NoSchedule ones (every relaxation level but the last).
	avoid bool
	// compat holds the evaluation against each pool, computed on first use.
	compat []*sigCompat
	// onBin caches the evaluation against existing bins: 0 unknown, 1 yes, 2 no.
	onBin []uint8
	// zones are the zones a pod with this signature could land in (pools and existing nodes).
	zones      uint32
	zonesKnown bool
}

// sigCompat is a signature evaluated against a pool.
type sigCompat struct {
	ok     bool
	reason string
	// types are the pool's instance types (indexes into poolState.types) the signature allows
	// and that have an offering in zoneMask × ctMask.
	types    bitset
	all      bool // types == every type of the pool
	zoneMask uint32
	ctMask   uint8
	custom   map[string]*domain
}

func (s *poolSet) sigFor(reqs []req, tols []corev1.Toleration, avoid bool) *nodeSig {
	var b strings.Builder
	if avoid {
		b.WriteByte(5)
	}
	for i := range reqs {
		r := &reqs[i]
		b.WriteString(r.Key)
		b.WriteByte(0)
		b.WriteString(string(r.Operator))
		for _, v := range r.Values {
			b.WriteByte(1)
			b.WriteString(v)
		}
		b.WriteByte(2)
	}
	b.WriteByte(3)
	for i := range tols {
		t := &tols[i]
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x00", t.Key, t.Operator, t.Value, t.Effect)
		if t.TolerationSeconds != nil {
			fmt.Fprint(&b, *t.TolerationSeconds)
		}
		b.WriteByte(4)
	}
	key := b.String()
	if sig, ok := s.sigs[key]; ok {
		return sig
	}
	sig := &nodeSig{id: len(s.sigList), reqs: reqs, tols: tols, avoid: avoid, compat: make([]*sigCompat, len(s.pools))}
	s.sigs[key] = sig
	s.sigList = append(s.sigList, sig)
	return sig
}

// compatWith evaluates the signature against a pool (cached).
func (s *poolSet) compatWith(sig *nodeSig, p *poolState) *sigCompat {
	if c := sig.compat[p.idx]; c != nil {
		return c
	}
	c := s.evalCompat(sig, p)
	sig.compat[p.idx] = c
	return c
}

// evalCompat evaluates the signature against a pool: its taints, then each requirement, then
// the instance types the type requirements leave.
func (s *poolSet) evalCompat(sig *nodeSig, p *poolState) *sigCompat {
	c := &sigCompat{}
	if p.invalid != "" {
		c.reason = p.invalid
		return c
	}
	if c.reason = taintReason(sig, p); c.reason != "" {
		return c
	}
	c.zoneMask, c.ctMask = p.zoneMask, p.ctMask
	var typeReqs []req
	for i := range sig.reqs {
		r := &sig.reqs[i]
		onType, reason := s.narrowByRequirement(c, p, r)
		if reason != "" {
			c.reason = reason
			return c
		}
		if onType {
			typeReqs = append(typeReqs, *r)
		}
	}
	s.compatTypes(c, p, typeReqs)
	return c
}

// taintReason says why the pool's taints keep the signature off (PreferNoSchedule ones when it
// avoids them), or "".
func taintReason(sig *nodeSig, p *poolState) string {
	for _, t := range p.taints {
		if !tolerates(sig.tols, t.Key, t.Value, t.Effect) {
			return fmt.Sprintf("nodepool %q has taint %s=%s:%s, which the pod does not tolerate", p.name, t.Key, t.Value, t.Effect)
		}
	}
	if sig.avoid {
		for _, t := range p.preferTaints {
			if !tolerates(sig.tols, t.Key, t.Value, t.Effect) {
				return fmt.Sprintf("nodepool %q has taint %s=%s:%s, which the pod does not tolerate (avoided while another choice remains)", p.name, t.Key, t.Value, t.Effect)
			}
		}
	}
	return ""
}

// narrowByRequirement applies one requirement to c: zone and capacity type masks, the pool's
// fixed and custom labels, hostname and labels the pool's nodes do not carry. It returns
// whether the requirement is on an instance type label (left to compatTypes), or why it cannot
// hold.
func (s *poolSet) narrowByRequirement(c *sigCompat, p *poolState, r *req) (bool, string) {
	switch {
	case r.Key == labelZone:
		c.zoneMask &= s.zoneFilter(r)
		if c.zoneMask == 0 {
			return false, fmt.Sprintf("nodepool %q offers no zone satisfying %s", p.name, r.String())
		}
	case r.Key == labelCapacityType:
		c.ctMask &= ctFilter(r)
		if c.ctMask == 0 {
			return false, fmt.Sprintf("nodepool %q offers no capacity type satisfying %s", p.name, r.String())
		}
	case r.Key == labelHostname:
		// A new node's hostname is not known in advance: only "not this host" can hold.
		if r.Operator != corev1.NodeSelectorOpNotIn {
			return false, fmt.Sprintf("requirement %s can only be met by an existing node", r.String())
		}
	case hasKey(p.fixed, r.Key):
		if !r.Matches(p.fixed[r.Key], true) {
			return false, fmt.Sprintf("nodepool %q sets %s=%s, the pod requires %s", p.name, r.Key, p.fixed[r.Key], r.String())
		}
	case p.custom[r.Key] != nil:
		if c.custom == nil {
			c.custom = map[string]*domain{}
		}
		d := c.custom[r.Key]
		if d == nil {
			d = p.custom[r.Key].Clone()
			c.custom[r.Key] = d
		}
		if !narrow(d, r) {
			return false, fmt.Sprintf("nodepool %q allows no value of %s satisfying %s", p.name, r.Key, r.String())
		}
	case p.typeKeys[r.Key] || isTypeKeyCandidate(r.Key):
		return true, ""
	case r.Key == labelRegion && s.in.Region == "":
		// Unknown region: assume it matches.
	default:
		// The pool's nodes will not carry this label.
		if !r.Matches("", false) {
			return false, fmt.Sprintf("label %s is not set by nodepool %q (requirement %s)", r.Key, p.name, r.String())
		}
	}
	return false, ""
}

// compatTypes sets the pool's instance types that meet typeReqs and have an offering in c's
// zones and capacity types, and narrows c's zones to theirs; c.ok when there is one.
func (s *poolSet) compatTypes(c *sigCompat, p *poolState, typeReqs []req) {
	c.types = newBitset(len(p.types))
	n := 0
	var zones uint32
	for i := range p.types {
		t := &p.types[i]
		if !requirements.Match(typeReqs, t.it.Labels) || !t.offers(c.zoneMask, c.ctMask) {
			continue
		}
		c.types.set(i)
		n++
		for ct := 0; ct < numCT; ct++ {
			if c.ctMask&(1<<ct) != 0 {
				zones |= t.zoneByCT[ct] & c.zoneMask
			}
		}
	}
	if n == 0 {
		if len(typeReqs) > 0 {
			parts := make([]string, len(typeReqs))
			for i := range typeReqs {
				parts[i] = typeReqs[i].String()
			}
			c.reason = fmt.Sprintf("no instance type of nodepool %q satisfies %s in an allowed zone and capacity type", p.name, strings.Join(parts, ", "))
		} else {
			c.reason = fmt.Sprintf("no instance type of nodepool %q is offered in an allowed zone and capacity type", p.name)
		}
		return
	}
	c.zoneMask = zones
	c.all = n == len(p.types)
	c.ok = true
}

// onBin evaluates the signature against an existing node or in-flight NodeClaim (cached).
func (s *binSet) sigOnBin(sig *nodeSig, b *bin) bool {
	if int(b.id) >= len(sig.onBin) {
		n := len(s.bins)
		if s.existing > n {
			n = s.existing
		}
		grown := make([]uint8, n)
		copy(grown, sig.onBin)
		sig.onBin = grown
	}
	switch sig.onBin[b.id] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := b.acceptsSig(sig)
	if ok {
		sig.onBin[b.id] = 1
	} else {
		sig.onBin[b.id] = 2
	}
	return ok
}

// sigZones are the zones a pod with this signature could land in.
func (s *binSet) sigZones(sig *nodeSig) uint32 {
	if sig.zonesKnown {
		return sig.zones
	}
	var z uint32
	for _, p := range s.pools {
		if c := s.compatWith(sig, p); c.ok {
			z |= c.zoneMask
		}
	}
	for _, b := range s.bins[:s.existing] {
		if b.zone >= 0 && s.sigOnBin(sig, b) {
			z |= 1 << b.zone
		}
	}
	sig.zones, sig.zonesKnown = z, true
	return z
}

// anyPool reports whether some pool can launch a node for the signature.
func (s *poolSet) anyPool(sig *nodeSig) bool {
	for _, p := range s.pools {
		if s.compatWith(sig, p).ok {
			return true
		}
	}
	return false
}
