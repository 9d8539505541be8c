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
	// NoReservedCapacity is ReservedCapacity=false: capacity reservations are not resolved
	// and nothing launches into them (the gate is on by default, as in Karpenter).
	NoReservedCapacity bool
	// NodeOverlay applies NodeOverlays' prices and extended resources to the instance types
	// the engine sees (provisioning, consolidation and pull-request plans).
	NodeOverlay bool
	// NodeRepair replaces nodes whose conditions stay unhealthy longer than the cloud
	// provider tolerates, while at most 20 % of a pool is unhealthy.
	NodeRepair bool
}

// karpenterOnly are Karpenter's other gates (unimplemented.Gates), all off by default there:
// accepted off so its settings parse.
var karpenterOnly = map[string]bool{"CapacityBuffer": true}

// Parse reads a comma-separated list of Name=bool. Unknown names are an error (a misspelt gate
// would otherwise be silently off), and so is turning on a gate karpool does not implement (the
// behaviour asked for would not happen).
func Parse(s string) (Gates, error) {
	var g Gates
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return Gates{}, fmt.Errorf("feature gate %q: want Name=true or Name=false", item)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return Gates{}, fmt.Errorf("feature gate %s: %q is not true or false", name, strings.TrimSpace(val))
		}
		if seen[name] {
			return Gates{}, fmt.Errorf("feature gate %s is given twice", name)
		}
		seen[name] = true
		if karpenterOnly[name] {
			if on {
				return Gates{}, fmt.Errorf("feature gate %s is not implemented by karpool (Karpenter %s): set it to false or remove it", name, unimplemented.Gates[name])
			}
			continue
		}
		switch name {
		case "SpotToSpotConsolidation":
			g.SpotToSpotConsolidation = on
		case "StaticCapacity":
			g.StaticCapacity = on
		case "ReservedCapacity":
			g.NoReservedCapacity = !on
		case "NodeOverlay":
			g.NodeOverlay = on
		case "NodeRepair":
			g.NodeRepair = on
		default:
			known := append(slices.Sorted(maps.Keys(karpenterOnly)), "NodeOverlay", "NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "StaticCapacity")
			slices.Sort(known)
			return Gates{}, fmt.Errorf("unknown feature gate %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	return g, nil
}
