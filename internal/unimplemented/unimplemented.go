// Package unimplemented is the one list of what Karpenter v1.14 does with its API that karpool
// does not do yet. karpool serves Karpenter's CRDs leaf for leaf, so a field from this list is
// accepted by the API server; without this list it would be ignored without a word. Every place a
// user looks reads it: `karpool vet` and PoolSync validation (an error unless the object opts
// out), the NodePool and EC2NodeClass status (condition FieldsHonored), the pull-request plan,
// and the controller's feature-gate parser. When karpool implements one, its entry goes.
package unimplemented

import "strings"

// Gap is one field of a kind, or one value of it, that karpool accepts and does not act on.
type Gap struct {
	Kind string
	// Path is the field, as keys from the object's root.
	Path []string
	// Value, when set, limits the gap to the field holding this value; the field's other values
	// are implemented.
	Value string
	// Karpenter says what Karpenter does with the field, and so what the user would miss.
	Karpenter string
}

// Field is the gap's path written with dots: "spec.placementGroupSelector".
func (g Gap) Field() string { return strings.Join(g.Path, ".") }

// Subject is the field, with the value when the gap is one value of it.
func (g Gap) Subject() string {
	if g.Value == "" {
		return g.Field()
	}
	return g.Field() + ": " + g.Value
}

// String names the field and what Karpenter would do with it.
func (g Gap) String() string { return g.Subject() + " " + g.Explain() }

// Explain says what Karpenter would do with the field, for a finding that names it already.
func (g Gap) Explain() string {
	return "is not implemented by karpool: Karpenter " + g.Karpenter
}

// Gaps are the fields, in the order of the kinds' specs.
var Gaps = []Gap{
	{"EC2NodeClass", []string{"spec", "cpuOptions", "nestedVirtualization"}, "enabled", "turns nested virtualization on in the launch template and launches only instance types that support it"},
	{"EC2NodeClass", []string{"spec", "placementGroupSelector"}, "", "launches into the selected placement group and reports it in status"},
	{"EC2NodeClass", []string{"spec", "instanceStorePolicy"}, "RAID0", "builds one RAID0 array of the instance-store disks for the kubelet's ephemeral storage in the user data; karpool counts that storage but does not build the array"},
	{"NodeOverlay", []string{"spec", "capacity"}, "", "adds these extended resources to the selected instance types, so pods requesting them get nodes; karpool applies the amounts of the resources its engine schedules on (GPUs, Neuron, EFA, pod ENIs) and ignores the others"},
}

// OptOutAnnotation on a NodePool or EC2NodeClass, with the value OptOut, makes its unimplemented
// fields a warning instead of an error in `karpool vet` and PoolSync: for a migration that accepts,
// in Git, that karpool will not do what Karpenter did.
const (
	OptOutAnnotation = "karpool.dev/unimplemented-fields"
	OptOut           = "ignore"
)

// In returns the gaps an object of kind uses: the fields it sets to something other than null or
// an empty list or map, and the values it sets that karpool does not implement. obj is the
// object as JSON decodes it.
func In(kind string, obj map[string]any) []Gap {
	var out []Gap
	for _, g := range Gaps {
		if g.Kind == kind && set(obj, g.Path, g.Value) {
			out = append(out, g)
		}
	}
	return out
}

// set reports whether obj sets path, to value when value is not "".
func set(obj map[string]any, path []string, value string) bool {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok {
			return false
		}
	}
	if value != "" {
		return v == value
	}
	switch x := v.(type) {
	case nil:
		return false
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// Message is the gaps in one line, for a status condition or a log line.
func Message(gaps []Gap) string {
	parts := make([]string, len(gaps))
	for i, g := range gaps {
		parts[i] = g.String()
	}
	return strings.Join(parts, "; ")
}

// Gates are Karpenter's feature gates karpool does not implement, with what turning them on
// does in Karpenter.
var Gates = map[string]string{
	"CapacityBuffer": "keeps spare capacity ready for pods not yet created",
}
