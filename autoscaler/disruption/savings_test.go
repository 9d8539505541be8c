package disruption

import (
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

func TestParseMinSavings(t *testing.T) {
	for in, want := range map[string]MinSavings{
		"": {}, "10%": {Fraction: 0.1}, "0.05": {PerHour: 0.05}, "$0.05/h": {PerHour: 0.05}, "12.5%, $1/h": {Fraction: 0.125, PerHour: 1},
	} {
		if got, err := ParseMinSavings(in); err != nil || got != want {
			t.Errorf("ParseMinSavings(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"ten", "-1", "100%", "5%%", "$-2/h", "NaN%", "Inf"} {
		if _, err := ParseMinSavings(in); err == nil || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseMinSavings(%q): error %v, want one quoting the input", in, err)
		}
	}
}

func FuzzParseMinSavings(f *testing.F) {
	for _, s := range []string{"10%", "0.05", "$0.05/h", "10%,0.05", ",", "1e3", "NaN%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMinSavings(s)
		if err == nil && !(m.Fraction >= 0 && m.Fraction < 1 && m.PerHour >= 0 && !math.IsInf(m.PerHour, 0)) {
			t.Errorf("ParseMinSavings(%q) = %+v: out of range", s, m)
		}
	})
}

// A pool's annotation sets how much a consolidation must save; below it nothing happens and
// the verdict says so; an unreadable annotation keeps the pool's nodes out.
func TestConsolidateHonoursMinSavings(t *testing.T) {
	cheaper := func(map[string]bool) *scheduling.Result {
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.95)}}
	}
	for _, tc := range []struct {
		annotation string
		want       string // verdict reason; "" means consolidated
	}{
		{"", ""}, {"10%", "MinSavings"}, {"4%", ""}, {"$0.10/h", "MinSavings"}, {"4%,0.06", "MinSavings"}, {"lots", "MinSavings"},
	} {
		cands := candidates(map[string]float64{"n": 1.0})
		if tc.annotation != "" {
			cands[0].Pool = &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{AnnotationMinSavings: tc.annotation}}}
		}
		cmd, why := consolidate(cands, map[string]int{"default": 1}, rules{}, cheaper)
		if got := why["n"].Reason; (cmd == nil) != (tc.want != "") || got != tc.want {
			t.Errorf("annotation %q: command %v, verdict %+v; want reason %q", tc.annotation, cmd != nil, why["n"], tc.want)
		}
	}
}
