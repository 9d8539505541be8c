package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// Karpenter's instance-type drift cases: the type gone, no offering left in the NodeClaim's zone
// and capacity type, an offering that is only unavailable (not drifted), and a reserved node
// matched by the on-demand offering it may be demoted to.
func TestTypeGone(t *testing.T) {
	types := []catalog.InstanceType{{Name: "m5.large", Offerings: []catalog.Offering{
		{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Available: false},
		{Zone: "us-east-1b", CapacityType: karpv1.CapacityTypeSpot, Available: true},
	}}}
	claim := func(it, zone, ct string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			corev1.LabelInstanceTypeStable: it, corev1.LabelTopologyZone: zone, karpv1.LabelCapacityType: ct}}}
	}
	for _, tc := range []struct {
		nc   *karpv1.NodeClaim
		want string
	}{
		{claim("m5.large", "us-east-1a", karpv1.CapacityTypeOnDemand), ""},
		{claim("m5.large", "us-east-1a", karpv1.CapacityTypeReserved), ""},
		{claim("m5.large", "us-east-1b", karpv1.CapacityTypeSpot), ""},
		{claim("m5.large", "us-east-1b", karpv1.CapacityTypeOnDemand), "no longer offered as on-demand in us-east-1b"},
		{claim("m5.large", "us-east-1c", karpv1.CapacityTypeSpot), "no longer offered as spot in us-east-1c"},
		{claim("m4.large", "us-east-1a", karpv1.CapacityTypeOnDemand), "m4.large is no longer among"},
	} {
		got := typeGone(tc.nc, types)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.nc.Labels, got, tc.want)
		}
	}
}

// Only launched NodeClaims older than an hour, of pools that list instance types, are judged;
// the verdict stays until the next judgement and drifts the NodeClaim.
func TestInstanceTypeDrift(t *testing.T) {
	now := time.Unix(100000, 0)
	c := newCluster(nil, "old", "young", "other")
	for i, nc := range c.claims {
		nc.Labels[corev1.LabelInstanceTypeStable] = "m4.large"
		nc.Labels[corev1.LabelTopologyZone] = "us-east-1a"
		nc.Labels[karpv1.LabelCapacityType] = karpv1.CapacityTypeOnDemand
		nc.CreationTimestamp = metav1.NewTime(now.Add(-2 * time.Hour))
		if i == 1 {
			nc.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		}
	}
	c.claims[2].Labels[karpv1.LabelNodePool] = "not-ready"
	snap := c.snapshot()
	ctl := &Controller{}
	ctl.judgeTypes(snap, []scheduling.Pool{
		{NodePool: c.pool, InstanceTypes: []catalog.InstanceType{{Name: "m5.large"}}},
		{NodePool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "not-ready"}}},
	}, now)
	drift := drifted(snap)
	ctl.addTypeDrift(snap, drift)
	if len(drift) != 1 || drift["old"].Reason != DriftInstanceTypeNotFound {
		t.Errorf("drift %v, want only old drifted as InstanceTypeNotFound", drift)
	}
}
