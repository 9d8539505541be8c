package costbound

import (
	"github.com/karpool/karpool/autoscaler/catalog"
)

// Eligibility says which special kinds of instance types the bound may use. By default
// (the zero value) burstable (t*), HPC (hpc*) and bare-metal types are left out: burstable
// prices buy only a CPU baseline, and HPC and metal types are not what a general pool launches.
// Allow them when the pool's requirements explicitly select them.
type Eligibility struct {
	AllowBurstable bool
	AllowHPC       bool
	AllowMetal     bool
}

// Eligible reports whether an instance type may take part in the bound.
func Eligible(it *catalog.InstanceType, e Eligibility) bool {
	switch {
	case it.Burstable() && !e.AllowBurstable:
		return false
	case it.HPC() && !e.AllowHPC:
		return false
	case it.BareMetal() && !e.AllowMetal:
		return false
	}
	return true
}

// TypesFrom turns a pool's compatible instance types (already filtered by the pool's
// requirements, offerings already restricted to what the pool may buy) into bound types:
// eligible types with an available offering, priced at their cheapest available offering, with
// the daemonset overhead subtracted from allocatable. Types the overhead does not fit on are
// dropped. overhead[catalog.Pods] should count the daemonset pods.
func TypesFrom(its []catalog.InstanceType, overhead catalog.Resources, e Eligibility) []Type {
	out := make([]Type, 0, len(its))
	for i := range its {
		it := &its[i]
		if !Eligible(it, e) {
			continue
		}
		o, ok := it.CheapestOffering()
		if !ok {
			continue
		}
		t := Type{Name: it.Name, Price: o.PricePerHour, Capacity: it.Capacity}
		fit := true
		for r := range t.Allocatable {
			t.Allocatable[r] = it.Allocatable[r] - overhead[r]
			if t.Allocatable[r] < 0 {
				fit = false
			}
		}
		if fit {
			out = append(out, t)
		}
	}
	return out
}
