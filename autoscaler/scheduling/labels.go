package scheduling

import (
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpool/karpool/internal/requirements"
)

// maxLabelChoices caps how many label assignments openBin tries for one new NodeClaim.
const maxLabelChoices = 16

// labelChoices lists the ways a new NodeClaim of pool p (compatibility cp, zones) can decide the
// labels the variant's topology constraints are keyed on and the pool leaves open: one
// narrowed compatibility per assignment, cheapest first, cp itself first. A spread over
// capacity types, or anti-affinity on kubernetes.io/arch, needs a node of the value its counts
// allow, which is not always the value of the cheapest type.
func (s *poolSet) labelChoices(v *variant, counters []*counter, p *poolState, cp *sigCompat, zones uint32) []*sigCompat {
	if !v.labelCons {
		// The common case, once per NodeClaim opened for a constrained class: no allocation.
		// A range over the one-element result reads it before its body runs.
		s.oneChoice[0] = cp
		return s.oneChoice[:]
	}
	choices := []*sigCompat{cp}
	for _, key := range v.labelKeys(counters) {
		var next []*sigCompat
		for _, ch := range choices {
			for _, val := range s.openValues(p, ch, zones, key) {
				if n := s.narrowCompat(p, ch, zones, key, val); n != nil && len(next) < maxLabelChoices {
					next = append(next, n)
				}
			}
		}
		if len(next) > 1 {
			// The undecided first choice stays first: decideLabels settles it as before.
			choices = append([]*sigCompat{cp}, next...)
		}
	}
	return choices
}

// labelKeys are the label (not zone or hostname) keys of the variant's topology constraints,
// sorted.
func (v *variant) labelKeys(counters []*counter) []string {
	var keys []string
	add := func(ctr int32) {
		if c := counters[ctr]; c.kind == keyLabel && !slices.Contains(keys, c.label) {
			keys = append(keys, c.label)
		}
	}
	for _, sp := range v.spreads {
		add(sp.ctr)
	}
	for _, a := range v.affs {
		add(a.ctr)
	}
	for _, a := range v.antis {
		add(a.ctr)
	}
	sort.Strings(keys)
	return keys
}

// openValues are the values a new NodeClaim of compatibility cp in zones may still take for the
// key, cheapest first (none when the pool fixes it or leaves it unbounded).
func (s *poolSet) openValues(p *poolState, cp *sigCompat, zones uint32, key string) []string {
	if hasKey(p.fixed, key) {
		return nil
	}
	types := cp.types
	if cp.all {
		types = p.all
	}
	price := map[string]float64{}
	note := func(val string, pr float64) {
		if old, ok := price[val]; !ok || pr < old {
			price[val] = pr
		}
	}
	switch {
	case key == labelCapacityType:
		for ct := 0; ct < numCT; ct++ {
			if cp.ctMask&(1<<ct) == 0 {
				continue
			}
			prices := p.prices(s.zoneIdx, zones, 1<<ct)
			types.each(func(i int) bool {
				if !math.IsInf(prices[i], 1) {
					note(ctNames[ct], prices[i])
				}
				return true
			})
		}
	case cp.custom[key] != nil || p.custom[key] != nil:
		d := cp.custom[key]
		if d == nil {
			d = p.custom[key]
		}
		vals, ok := d.Finite()
		if !ok {
			return nil
		}
		for _, val := range vals {
			note(val, 0)
		}
	default:
		prices := p.prices(s.zoneIdx, zones, cp.ctMask)
		types.each(func(i int) bool {
			if val, ok := p.types[i].it.Labels[key]; ok && !math.IsInf(prices[i], 1) {
				note(val, prices[i])
			}
			return true
		})
	}
	vals := make([]string, 0, len(price))
	for val := range price {
		vals = append(vals, val)
	}
	sort.Slice(vals, func(i, j int) bool {
		if price[vals[i]] != price[vals[j]] {
			return price[vals[i]] < price[vals[j]]
		}
		return vals[i] < vals[j]
	})
	return vals
}

// narrowCompat is cp confined to nodes whose label key has value val (nil if no type is left).
func (s *poolSet) narrowCompat(p *poolState, cp *sigCompat, zones uint32, key, val string) *sigCompat {
	n := *cp
	n.all = false
	types := cp.types
	if cp.all {
		types = p.all
	}
	n.types = types.clone()
	switch {
	case key == labelCapacityType:
		n.ctMask = 1 << ctIndex(val)
	case cp.custom[key] != nil || p.custom[key] != nil:
		n.custom = make(map[string]*domain, len(cp.custom)+1)
		for k, d := range cp.custom {
			n.custom[k] = d
		}
		n.custom[key] = requirements.Of(newReq(key, corev1.NodeSelectorOpIn, []string{val}))
		return &n
	}
	left := false
	n.types.each(func(i int) bool {
		t := &p.types[i]
		if v, ok := t.it.Labels[key]; key != labelCapacityType && (!ok || v != val) || !t.offers(zones, n.ctMask) {
			n.types.clear(i)
		} else {
			left = true
		}
		return true
	})
	if !left {
		return nil
	}
	return &n
}
