package featuregates

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		spot    bool
		static  bool
		noRes   bool
		overlay bool
		repair  bool
		wantErr string
	}{
		{in: ""},
		{in: "SpotToSpotConsolidation=true", spot: true},
		// Karpenter's defaults parse as they are.
		{in: "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"},
		{in: " NodeRepair=false , SpotToSpotConsolidation=1,ReservedCapacity=false", spot: true, noRes: true},
		// Asking for what karpool does not do is refused, naming what Karpenter would do.
		{in: "NodeRepair=true", repair: true},
		{in: "CapacityBuffer=true", wantErr: "feature gate CapacityBuffer is not implemented by karpool (Karpenter keeps spare capacity"},
		{in: "SpotToSpotConsolidation=true, CapacityBuffer=true", wantErr: "CapacityBuffer is not implemented"},
		{in: "StaticCapacity=true", static: true},
		{in: "NodeOverlay=true", overlay: true},
		{in: "SpotToSpotConsolidaton=true", wantErr: `unknown feature gate "SpotToSpotConsolidaton"`},
		{in: "SpotToSpotConsolidation", wantErr: "want Name=true or Name=false"},
		{in: "SpotToSpotConsolidation=yes", wantErr: `"yes" is not true or false`},
		{in: "SpotToSpotConsolidation=true,SpotToSpotConsolidation=false", wantErr: "given twice"},
	} {
		g, err := Parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) error %v, want one saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || g.SpotToSpotConsolidation != tc.spot || g.StaticCapacity != tc.static || g.NoReservedCapacity != tc.noRes || g.NodeOverlay != tc.overlay || g.NodeRepair != tc.repair {
			t.Errorf("Parse(%q) = %+v, %v; want spot-to-spot %t, static capacity %t, reserved capacity off %t", tc.in, g, err, tc.spot, tc.static, tc.noRes)
		}
	}
}

// FuzzParse: any input either fails with a message or parses to gates that parse the same way
// again when written back.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "SpotToSpotConsolidation=true", "NodeRepair=true,ReservedCapacity=false", "a=b=c", ",,=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := Parse(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Parse(%q): empty error", s)
			}
			return
		}
		again, err := Parse(fmt.Sprintf("SpotToSpotConsolidation=%t,StaticCapacity=%t,ReservedCapacity=%t,NodeOverlay=%t,NodeRepair=%t",
			g.SpotToSpotConsolidation, g.StaticCapacity, !g.NoReservedCapacity, g.NodeOverlay, g.NodeRepair))
		if err != nil || again != g {
			t.Fatalf("Parse(%q) = %+v; written back it parses to %+v, %v", s, g, again, err)
		}
	})
}
