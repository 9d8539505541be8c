package scheduling

import "fmt"

// Karpenter's operator settings for the scheduler; the first of each pair is the default.
const (
	PreferencesRespect  = "Respect"    // PREFERENCE_POLICY: preferences are tried, then relaxed
	PreferencesIgnore   = "Ignore"     // preferences are treated as absent
	MinValuesStrict     = "Strict"     // MIN_VALUES_POLICY: minValues hold, pods wait
	MinValuesBestEffort = "BestEffort" // minValues are lowered to what there is
)

// PolicyOptions reads Karpenter's PREFERENCE_POLICY and MIN_VALUES_POLICY values into the
// engine's options; an unknown value is an error naming the ones accepted.
func PolicyOptions(preferencePolicy, minValuesPolicy string) (Options, error) {
	var o Options
	switch preferencePolicy {
	case PreferencesRespect:
	case PreferencesIgnore:
		o.IgnorePreferences = true
	default:
		return o, fmt.Errorf("preference policy %q: want %s or %s", preferencePolicy, PreferencesRespect, PreferencesIgnore)
	}
	switch minValuesPolicy {
	case MinValuesStrict:
	case MinValuesBestEffort:
		o.MinValuesBestEffort = true
	default:
		return o, fmt.Errorf("min values policy %q: want %s or %s", minValuesPolicy, MinValuesStrict, MinValuesBestEffort)
	}
	return o, nil
}
