package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// AnnotationMinSavings on a NodePool overrides the controller's --consolidation-min-savings for
// its nodes.
const AnnotationMinSavings = "karpool.dev/consolidation-min-savings"

// MinSavings is the least a consolidation must save: a fraction of what the candidates cost,
// and an amount in USD per hour; both must be met. The zero value accepts any saving (Karpenter
// consolidates for any saving, however small).
type MinSavings struct {
	Fraction, PerHour float64
}

// ParseMinSavings reads "10%", "0.05" (USD per hour; "$0.05/h" too) or both joined with a
// comma ("10%,0.05").
func ParseMinSavings(s string) (MinSavings, error) {
	var m MinSavings
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if pct, ok := strings.CutSuffix(part, "%"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
			if err != nil || !(v >= 0 && v < 100) { // NaN fails both
				return MinSavings{}, fmt.Errorf("minimum savings %q: %q is not a percentage from 0 to 100 (e.g. 10%%)", s, part)
			}
			m.Fraction = v / 100
			continue
		}
		amount := strings.TrimSuffix(strings.TrimPrefix(part, "$"), "/h")
		v, err := strconv.ParseFloat(amount, 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 1) {
			return MinSavings{}, fmt.Errorf("minimum savings %q: %q is neither a percentage (10%%) nor USD per hour (0.05 or $0.05/h)", s, part)
		}
		m.PerHour = v
	}
	return m, nil
}

// minSavingsFor is the pool's threshold: its annotation if set, else the controller's.
func minSavingsFor(np *karpv1.NodePool, def MinSavings) (MinSavings, error) {
	s, ok := np.Annotations[AnnotationMinSavings]
	if !ok {
		return def, nil
	}
	m, err := ParseMinSavings(s)
	if err != nil {
		return MinSavings{}, fmt.Errorf("NodePool %s annotation %s: %w", np.Name, AnnotationMinSavings, err)
	}
	return m, nil
}

// enough reports whether going from price to newPrice (USD per hour) saves enough.
func (m MinSavings) enough(price, newPrice float64) bool {
	saved := price - newPrice
	return saved >= m.PerHour && saved >= m.Fraction*price
}

func (m MinSavings) String() string {
	switch {
	case m.Fraction > 0 && m.PerHour > 0:
		return fmt.Sprintf("%g %% and $%g/h", m.Fraction*100, m.PerHour)
	case m.PerHour > 0:
		return fmt.Sprintf("$%g/h", m.PerHour)
	default:
		return fmt.Sprintf("%g %%", m.Fraction*100)
	}
}
