// Package featuregates reads Karpenter's --feature-gates / FEATURE_GATES setting
// ("SpotToSpotConsolidation=true,NodeRepair=false"), so a Karpenter deployment's value carries
// over unchanged.
package featuregates

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/karpool/karpool/internal/unimplemented"
)

// Gates are the optional behaviours karpool implements; zero values are the defaults.
type Gates struct {
	// SpotToSpotConsolidation lets consolidation replace spot nodes by cheaper spot nodes
	// (single nodes only with at least 15 cheaper instance types, as in Karpenter).
	SpotToSpotConsolidation bool
	// StaticCapacity keeps static NodePools (spec.replicas) at their replica count.
	StaticCapacity bool
}

// karpenterOnly are Karpenter's other gates (unimplemented.Gates), with their defaults there:
// accepted off so its settings parse.
var karpenterOnly = map[string]bool{
	"NodeRepair": false, "ReservedCapacity": true, "NodeOverlay": false, "CapacityBuffer": false,
}

// Parse reads a comma-separated list of Name=bool. Unknown names are an error (a misspelt gate
// would otherwise be silently off), and so is turning on a gate karpool does not implement (the
// behaviour asked for would not happen). ReservedCapacity=true, Karpenter's default, is accepted
// with a note: karpool behaves as with it off, and refuses the fields that need it.
func Parse(s string) (Gates, []string, error) {
	var g Gates
	var notes []string
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return Gates{}, nil, fmt.Errorf("feature gate %q: want Name=true or Name=false", item)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return Gates{}, nil, fmt.Errorf("feature gate %s: %q is not true or false", name, strings.TrimSpace(val))
		}
		if seen[name] {
			return Gates{}, nil, fmt.Errorf("feature gate %s is given twice", name)
		}
		seen[name] = true
		if def, ok := karpenterOnly[name]; ok {
			switch {
			case on && !def:
				return Gates{}, nil, fmt.Errorf("feature gate %s is not implemented by karpool (Karpenter %s): set it to false or remove it", name, unimplemented.Gates[name])
			case on:
				notes = append(notes, fmt.Sprintf("feature gate %s=true: karpool does not implement it (Karpenter %s) and runs as with it off", name, unimplemented.Gates[name]))
			}
			continue
		}
		switch name {
		case "SpotToSpotConsolidation":
			g.SpotToSpotConsolidation = on
		case "StaticCapacity":
			g.StaticCapacity = on
		default:
			known := append(slices.Sorted(maps.Keys(karpenterOnly)), "SpotToSpotConsolidation", "StaticCapacity")
			slices.Sort(known)
			return Gates{}, nil, fmt.Errorf("unknown feature gate %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	return g, notes, nil
}
