package overlay

import (
	"cmp"
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// The cases follow Karpenter's NodeOverlay controller and store suites
// (pkg/controllers/nodeoverlay), on hand-made instance types.

func itype(name string, offs ...catalog.Offering) catalog.InstanceType {
	catalog.SortOfferings(offs)
	return catalog.InstanceType{Name: name, Labels: map[string]string{catalog.LabelInstanceType: name, "kubernetes.io/arch": "amd64"}, Offerings: offs}
}

func offer(zone, ct string, price float64) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: ct, PricePerHour: price, Available: true}
}

func pool(name string, labels map[string]string, its ...catalog.InstanceType) scheduling.Pool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	return scheduling.Pool{NodePool: np, InstanceTypes: its}
}

func basicPools() []scheduling.Pool {
	return []scheduling.Pool{pool("default", nil,
		itype("default-instance-type", offer("zone-1", "spot", 1), offer("zone-2", "on-demand", 2)),
		itype("small-instance-type", offer("zone-1", "on-demand", 0.5)),
		itype("gpu-vendor-instance-type", offer("zone-1", "on-demand", 4)),
	)}
}

type spec func(*v1alpha1.NodeOverlay)

func ov(name string, w int32, opts ...spec) v1alpha1.NodeOverlay {
	o := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if w != 0 {
		o.Spec.Weight = &w
	}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) spec {
	return func(o *v1alpha1.NodeOverlay) {
		o.Spec.Requirements = append(o.Spec.Requirements, v1alpha1.NodeSelectorRequirement{Key: key, Operator: op, Values: values})
	}
}

func types(names ...string) spec {
	return req(catalog.LabelInstanceType, corev1.NodeSelectorOpIn, names...)
}
func price(p string) spec  { return func(o *v1alpha1.NodeOverlay) { o.Spec.Price = &p } }
func adjust(p string) spec { return func(o *v1alpha1.NodeOverlay) { o.Spec.PriceAdjustment = &p } }
func capacity(name, q string) spec {
	return func(o *v1alpha1.NodeOverlay) {
		if o.Spec.Capacity == nil {
			o.Spec.Capacity = corev1.ResourceList{}
		}
		o.Spec.Capacity[corev1.ResourceName(name)] = resource.MustParse(q)
	}
}

func verdictOf(t *testing.T, vs []Verdict, name string) Verdict {
	t.Helper()
	for _, v := range vs {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no verdict for %q in %+v", name, vs)
	return Verdict{}
}

func typeOf(t *testing.T, p scheduling.Pool, name string) catalog.InstanceType {
	t.Helper()
	for _, it := range p.InstanceTypes {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("pool %s has no type %s", p.NodePool.Name, name)
	return catalog.InstanceType{}
}

func priceAt(t *testing.T, it catalog.InstanceType, zone, ct string) float64 {
	t.Helper()
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o.PricePerHour
		}
	}
	t.Fatalf("%s has no %s offering in %s", it.Name, ct, zone)
	return 0
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNoOverlaysLeavesPoolsAlone(t *testing.T) {
	ps := basicPools()
	out, vs := Apply(nil, ps)
	if len(vs) != 0 || &out[0] != &ps[0] {
		t.Fatalf("no overlays changed something: %+v", vs)
	}
}

func TestSameWeightOverlappingPricesConflict(t *testing.T) {
	for name, set := range map[string][2]spec{
		"price":           {price("1.03"), price("23")},
		"priceAdjustment": {adjust("+54"), adjust("-2")},
		"same values":     {price("100"), price("100")},
	} {
		t.Run(name, func(t *testing.T) {
			a := ov("overlay-a", 10, types("default-instance-type", "small-instance-type"), set[0])
			b := ov("overlay-b", 10, types("default-instance-type", "gpu-vendor-instance-type"), set[1])
			out, vs := Apply([]v1alpha1.NodeOverlay{a, b}, basicPools())
			if v := verdictOf(t, vs, "overlay-a"); v.Reason != ReasonConflict {
				t.Errorf("overlay-a (processed second among equal weights) = %+v, want a conflict", v)
			}
			if v := verdictOf(t, vs, "overlay-b"); !v.Applied() {
				t.Errorf("overlay-b = %+v, want applied", v)
			}
			// overlay-a is applied nowhere, not even to the type only it selects.
			if got := priceAt(t, typeOf(t, out[0], "small-instance-type"), "zone-1", "on-demand"); got != 0.5 {
				t.Errorf("small-instance-type priced %v by a conflicting overlay", got)
			}
		})
	}
}

func TestSameWeightDisjointOverlaysBothApply(t *testing.T) {
	a := ov("overlay-a", 10, types("small-instance-type"), price("54"))
	b := ov("overlay-b", 10, types("gpu-vendor-instance-type"), price("23"))
	out, vs := Apply([]v1alpha1.NodeOverlay{a, b}, basicPools())
	for _, v := range vs {
		if !v.Applied() || v.Changed != 1 {
			t.Errorf("%+v, want applied to one type", v)
		}
	}
	if got := priceAt(t, typeOf(t, out[0], "small-instance-type"), "zone-1", "on-demand"); got != 54 {
		t.Errorf("small = %v, want 54", got)
	}
	if got := priceAt(t, typeOf(t, out[0], "gpu-vendor-instance-type"), "zone-1", "on-demand"); got != 23 {
		t.Errorf("gpu = %v, want 23", got)
	}
}

func TestHeavierOverlayWinsThePrice(t *testing.T) {
	light := ov("overlay-z", 10, types("default-instance-type"), price("34"))
	heavy := ov("overlay-a", 20, types("default-instance-type"), price("2"))
	out, vs := Apply([]v1alpha1.NodeOverlay{light, heavy}, basicPools())
	for _, v := range vs {
		if !v.Applied() {
			t.Errorf("%+v: overlays of different weights never conflict", v)
		}
	}
	it := typeOf(t, out[0], "default-instance-type")
	if got := priceAt(t, it, "zone-2", "on-demand"); got != 2 {
		t.Errorf("price = %v, want the weight-20 overlay's 2", got)
	}
}

func TestOfferingRequirementsDecideOverlap(t *testing.T) {
	zone := func(z string) spec { return req(catalog.LabelZone, corev1.NodeSelectorOpIn, z) }
	ct := func(c string) spec { return req(catalog.LabelCapacityType, corev1.NodeSelectorOpIn, c) }
	t.Run("different zones", func(t *testing.T) {
		_, vs := Apply([]v1alpha1.NodeOverlay{
			ov("a", 10, types("default-instance-type"), zone("zone-1"), price("1")),
			ov("b", 10, types("default-instance-type"), zone("zone-2"), price("2")),
		}, basicPools())
		for _, v := range vs {
			if !v.Applied() {
				t.Errorf("%+v: disjoint offerings do not conflict", v)
			}
		}
	})
	t.Run("same capacity type", func(t *testing.T) {
		_, vs := Apply([]v1alpha1.NodeOverlay{
			ov("a", 10, ct("spot"), price("1")),
			ov("b", 10, types("default-instance-type"), ct("spot"), price("2")),
		}, basicPools())
		if v := verdictOf(t, vs, "a"); v.Reason != ReasonConflict {
			t.Errorf("a = %+v, want a conflict on the spot offering", v)
		}
	})
	t.Run("only selected offerings change", func(t *testing.T) {
		out, _ := Apply([]v1alpha1.NodeOverlay{ov("a", 0, ct("spot"), adjust("-50%"))}, basicPools())
		it := typeOf(t, out[0], "default-instance-type")
		if s, od := priceAt(t, it, "zone-1", "spot"), priceAt(t, it, "zone-2", "on-demand"); s != 0.5 || od != 2 {
			t.Errorf("spot %v, on-demand %v; want 0.5 and 2", s, od)
		}
	})
}

func TestCapacityConflictsWithTheLastOverlayOfItsWeight(t *testing.T) {
	// Karpenter's "conflicting capacity overlays with multiple overlays": in processing order
	// good-overlay-1 (fuse), conflicting-overlay-2 (hugepages), conflicting-overlay-1
	// (hugepages again) — only the last conflicts.
	os := []v1alpha1.NodeOverlay{
		ov("conflicting-overlay-1", 10, types("default-instance-type", "small-instance-type"), capacity("hugepage-1Gi", "2Gi")),
		ov("good-overlay-1", 10, types("default-instance-type"), capacity("smarter-devices/fuse", "1")),
		ov("conflicting-overlay-2", 10, types("default-instance-type"), capacity("hugepage-1Gi", "3Gi")),
	}
	_, vs := Apply(os, basicPools())
	if v := verdictOf(t, vs, "conflicting-overlay-1"); v.Reason != ReasonConflict {
		t.Errorf("conflicting-overlay-1 = %+v, want a conflict", v)
	}
	for _, n := range []string{"good-overlay-1", "conflicting-overlay-2"} {
		if v := verdictOf(t, vs, n); !v.Applied() {
			t.Errorf("%s = %+v, want applied", n, v)
		}
	}
}

func TestHeavierOverlayWinsCapacity(t *testing.T) {
	gpu := catalog.ResourceNames[catalog.NvidiaGPU]
	os := []v1alpha1.NodeOverlay{
		ov("overlay-a", 10, types("default-instance-type"), capacity(gpu, "5")),
		ov("overlay-b", 20, types("default-instance-type"), capacity(gpu, "99"), capacity("smarter-devices/fuse", "1")),
	}
	out, vs := Apply(os, basicPools())
	it := typeOf(t, out[0], "default-instance-type")
	if it.Capacity[catalog.NvidiaGPU] != 99 || it.Allocatable[catalog.NvidiaGPU] != 99 {
		t.Errorf("gpu capacity %d allocatable %d, want 99 from the heavier overlay", it.Capacity[catalog.NvidiaGPU], it.Allocatable[catalog.NvidiaGPU])
	}
	if v := verdictOf(t, vs, "overlay-b"); !slices.Equal(v.Unmodelled, []string{"smarter-devices/fuse"}) {
		t.Errorf("unmodelled = %v, want the fuse device named", v.Unmodelled)
	}
	if other := typeOf(t, out[0], "small-instance-type"); other.Capacity[catalog.NvidiaGPU] != 0 {
		t.Errorf("an unselected type gained GPUs")
	}
}

func TestNoPartialApplicationAcrossNodePools(t *testing.T) {
	ps := []scheduling.Pool{
		pool("team-a", map[string]string{"team": "a"}, itype("m", offer("zone-1", "on-demand", 1))),
		pool("team-b", map[string]string{"team": "b"}, itype("m", offer("zone-1", "on-demand", 1))),
	}
	os := []v1alpha1.NodeOverlay{
		ov("b-only", 10, req("team", corev1.NodeSelectorOpIn, "b"), price("3")),
		ov("all", 10, types("m"), price("2")), // processed second: conflicts in team-b
	}
	out, vs := Apply(os, ps)
	if v := verdictOf(t, vs, "all"); v.Reason != ReasonConflict {
		t.Fatalf("all = %+v, want a conflict", v)
	}
	if got := priceAt(t, out[0].InstanceTypes[0], "zone-1", "on-demand"); got != 1 {
		t.Errorf("team-a priced %v: a conflicting overlay applied to the pool it did not conflict in", got)
	}
	if got := priceAt(t, out[1].InstanceTypes[0], "zone-1", "on-demand"); got != 3 {
		t.Errorf("team-b priced %v, want 3", got)
	}
}

func TestNodePoolNameAndTemplateLabelsSelect(t *testing.T) {
	ps := []scheduling.Pool{
		pool("a", map[string]string{"team": "x"}, itype("m", offer("zone-1", "on-demand", 1))),
		pool("b", nil, itype("m", offer("zone-1", "on-demand", 1))),
	}
	cases := map[string]struct {
		overlay spec
		want    [2]float64
	}{
		"nodepool name":            {req(karpv1.LabelNodePool, corev1.NodeSelectorOpIn, "b"), [2]float64{1, 9}},
		"template label":           {req("team", corev1.NodeSelectorOpIn, "x"), [2]float64{9, 1}},
		"undefined key with In":    {req("other", corev1.NodeSelectorOpIn, "y"), [2]float64{1, 1}},
		"undefined key with NotIn": {req("other", corev1.NodeSelectorOpNotIn, "y"), [2]float64{9, 9}},
		"numeric on a type label":  {req("kubernetes.io/arch", corev1.NodeSelectorOpGt, "1"), [2]float64{1, 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, _ := Apply([]v1alpha1.NodeOverlay{ov("o", 0, tc.overlay, price("9"))}, ps)
			for i := range out {
				if got := priceAt(t, out[i].InstanceTypes[0], "zone-1", "on-demand"); got != tc.want[i] {
					t.Errorf("pool %s priced %v, want %v", out[i].NodePool.Name, got, tc.want[i])
				}
			}
		})
	}
}

func TestPriceArithmetic(t *testing.T) {
	mk := func() []scheduling.Pool {
		it := itype("m", catalog.Offering{Zone: "z", CapacityType: "on-demand", PricePerHour: 1.1, VolumesPerHour: 0.1, Available: true, Estimated: true},
			catalog.Offering{Zone: "z", CapacityType: "spot", PricePerHour: 0.5, VolumesPerHour: 0.1, Available: true, Estimated: true})
		return []scheduling.Pool{pool("p", nil, it)}
	}
	cases := map[string]struct {
		overlay   spec
		od        float64 // the on-demand offering's price, volumes included
		estimated bool
	}{
		"percent down":     {adjust("-10%"), 0.9 + 0.1, true},
		"percent up":       {adjust("+50%"), 1.5 + 0.1, true},
		"amount down":      {adjust("-0.25"), 0.75 + 0.1, true},
		"never below zero": {adjust("-5"), 0.1, true},
		"all of it":        {adjust("-100%"), 0.1, true},
		"absolute":         {price("0.3"), 0.3 + 0.1, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := mk()
			out, vs := Apply([]v1alpha1.NodeOverlay{ov("o", 0, req(catalog.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"), tc.overlay)}, in)
			if !vs[0].Applied() {
				t.Fatalf("%+v", vs[0])
			}
			offs := out[0].InstanceTypes[0].Offerings
			if !slices.IsSortedFunc(offs, func(a, b catalog.Offering) int { return cmp.Compare(a.PricePerHour, b.PricePerHour) }) {
				t.Errorf("offerings not sorted by price after the change: %+v", offs)
			}
			for _, o := range offs {
				if o.CapacityType == "on-demand" && (!near(o.PricePerHour, tc.od) || o.Estimated != tc.estimated) {
					t.Errorf("on-demand = %v (estimated %t), want %v (%t)", o.PricePerHour, o.Estimated, tc.od, tc.estimated)
				}
			}
			if got := in[0].InstanceTypes[0].Offerings; !near(got[1].PricePerHour, 1.1) && !near(got[0].PricePerHour, 1.1) {
				t.Errorf("the input's offerings were modified: %+v", got)
			}
		})
	}
}

func TestInvalidOverlaysAreNotApplied(t *testing.T) {
	cases := map[string][]spec{
		"price and adjustment": {price("1"), adjust("-1")},
		"well-known capacity":  {capacity("cpu", "4")},
		"bad adjustment":       {adjust("-150%")},
		"In without values":    {req("team", corev1.NodeSelectorOpIn)},
		"negative Gt":          {req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "-1")},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			out, vs := Apply([]v1alpha1.NodeOverlay{ov("bad", 0, opts...)}, basicPools())
			if vs[0].Reason != ReasonInvalid || vs[0].Message == "" {
				t.Errorf("verdict %+v, want %s with a message", vs[0], ReasonInvalid)
			}
			if got := priceAt(t, typeOf(t, out[0], "small-instance-type"), "zone-1", "on-demand"); got != 0.5 {
				t.Errorf("an invalid overlay changed a price to %v", got)
			}
		})
	}
}
