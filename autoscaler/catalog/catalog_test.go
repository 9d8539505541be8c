package catalog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func mustLoad(t testing.TB, region string, opts LoadOptions) *Catalog {
	t.Helper()
	c, err := LoadWithOptions(region, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAllocatableMatchesKarpenterOnEveryRow is the acceptance check: for every row of every
// embedded CSV that carries Karpenter's AL2023 numbers, the allocatable computed from the raw
// hardware columns equals alloc_cpu_m, alloc_memory_mib and karpenter_pods exactly.
func TestAllocatableMatchesKarpenterOnEveryRow(t *testing.T) {
	want := map[string]struct{ checked, unsupported int }{
		// 1367 priced rows; 22 are not in Karpenter's reference (no alloc columns).
		"data/us-east-1.csv":                       {1345, 22},
		"data/ap-northeast-2.csv":                  {505, 16},
		"data/ap-northeast-2-newgen-estimated.csv": {459, 0},
	}
	got := map[string]struct{ checked, unsupported int }{}
	for _, region := range Regions() {
		c := mustLoad(t, region, LoadOptions{IncludeEstimated: true})
		for _, s := range c.Specs() {
			g := got[s.Source]
			if s.OnDemandPrice <= 0 {
				t.Errorf("%s %s: no on-demand price", s.Source, s.Name)
				continue
			}
			if !s.Supported {
				g.unsupported++
				got[s.Source] = g
				if c.Offered(s.Name) {
					t.Errorf("%s %s: offered although Karpenter does not list it", s.Source, s.Name)
				}
				continue
			}
			g.checked++
			got[s.Source] = g
			it, ok := c.InstanceType(s.Name, NodeClassOptions{})
			if !ok {
				t.Errorf("%s %s: priced and supported but not offered", s.Source, s.Name)
				continue
			}
			a := it.Allocatable
			if a[CPU] != s.KarpenterAllocCPUMilli || a[Memory] != s.KarpenterAllocMemoryMiB*Mi || a[Pods] != s.KarpenterPods {
				t.Errorf("%s row %s (vcpu %d, memory %dMiB, %s, ENIs %d × %d IPv4): computed cpu %dm memory %dMi (%d bytes) pods %d; CSV says cpu %dm memory %dMi pods %d",
					s.Source, s.Name, s.VCPU, s.MemoryMiB, s.Arch, s.MaxENIs, s.IPv4PerENI,
					a[CPU], a[Memory]/Mi, a[Memory], a[Pods], s.KarpenterAllocCPUMilli, s.KarpenterAllocMemoryMiB, s.KarpenterPods)
			}
			if a[EphemeralStorage] != 17*Gi {
				t.Errorf("%s %s: ephemeral-storage %d, want 17Gi", s.Source, s.Name, a[EphemeralStorage])
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows checked/unsupported per file = %v, want %v", got, want)
	}
}

func TestSeedChecks(t *testing.T) {
	c := mustLoad(t, "us-east-1", LoadOptions{})
	for _, tc := range []struct {
		name              string
		cpu, memMiB, pods int64
	}{
		{"m5.large", 1930, 6903, 29},
		{"t3.medium", 1930, 3246, 17},
		{"c5.xlarge", 3920, 6584, 58},
	} {
		it, ok := c.InstanceType(tc.name, NodeClassOptions{})
		if !ok {
			t.Fatalf("%s not offered", tc.name)
		}
		a := it.Allocatable
		if a[CPU] != tc.cpu || a[Memory] != tc.memMiB*Mi || a[Pods] != tc.pods || a[EphemeralStorage] != 17*Gi {
			t.Errorf("%s allocatable = cpu %dm memory %dMi pods %d eph %d; want %dm %dMi %d 17Gi",
				tc.name, a[CPU], a[Memory]/Mi, a[Pods], a[EphemeralStorage], tc.cpu, tc.memMiB, tc.pods)
		}
	}
}

func TestLabelsM5Large(t *testing.T) {
	c := mustLoad(t, "us-east-1", LoadOptions{})
	it, _ := c.InstanceType("m5.large", NodeClassOptions{})
	want := map[string]string{
		"node.kubernetes.io/instance-type":                           "m5.large",
		"kubernetes.io/arch":                                         "amd64",
		"kubernetes.io/os":                                           "linux",
		"topology.kubernetes.io/region":                              "us-east-1",
		"karpenter.k8s.aws/instance-category":                        "m",
		"karpenter.k8s.aws/instance-family":                          "m5",
		"karpenter.k8s.aws/instance-generation":                      "5",
		"karpenter.k8s.aws/instance-size":                            "large",
		"karpenter.k8s.aws/instance-cpu":                             "2",
		"karpenter.k8s.aws/instance-memory":                          "8192",
		"karpenter.k8s.aws/instance-hypervisor":                      "nitro",
		"karpenter.k8s.aws/instance-cpu-manufacturer":                "intel",
		"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz":   "3100",
		"karpenter.k8s.aws/instance-ebs-bandwidth":                   "4750",
		"karpenter.k8s.aws/instance-network-bandwidth":               "750",
		"karpenter.k8s.aws/instance-encryption-in-transit-supported": "false",
		"karpenter.k8s.aws/instance-capability-flex":                 "false",
		"karpenter.k8s.aws/instance-tenancy":                         "default",
	}
	if !reflect.DeepEqual(it.Labels, want) {
		t.Errorf("m5.large labels:\n got %v\nwant %v", it.Labels, want)
	}
	g, _ := c.InstanceType("g5.xlarge", NodeClassOptions{})
	for k, v := range map[string]string{
		"karpenter.k8s.aws/instance-gpu-name":         "a10g",
		"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
		"karpenter.k8s.aws/instance-gpu-count":        "1",
		"karpenter.k8s.aws/instance-gpu-memory":       "22888",
		"karpenter.k8s.aws/instance-local-nvme":       "250",
	} {
		if g.Labels[k] != v {
			t.Errorf("g5.xlarge %s = %q, want %q", k, g.Labels[k], v)
		}
	}
	if g.Allocatable[NvidiaGPU] != 1 {
		t.Errorf("g5.xlarge nvidia.com/gpu = %d", g.Allocatable[NvidiaGPU])
	}
	m, _ := c.InstanceType("m5.metal", NodeClassOptions{})
	if h, ok := m.Labels["karpenter.k8s.aws/instance-hypervisor"]; !ok || h != "" || !m.BareMetal() {
		t.Errorf("m5.metal hypervisor label = %q (present %v), BareMetal %v", h, ok, m.BareMetal())
	}
	inf, _ := c.InstanceType("inf2.xlarge", NodeClassOptions{})
	if inf.Allocatable[Neuron] != 1 || inf.Allocatable[NeuronCore] != 2 || inf.Labels["karpenter.k8s.aws/instance-accelerator-name"] != "inferentia2" {
		t.Errorf("inf2.xlarge neuron %d cores %d labels %v", inf.Allocatable[Neuron], inf.Allocatable[NeuronCore], inf.Labels)
	}
}

// TestAgainstMergedJSON compares every offered type with the reference in
// testdata/instance-types.jsonl: labels and the full AL2023 allocatable.
func TestAgainstMergedJSON(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "instance-types.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type entry struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Allocatable map[string]string `json:"allocatable_al2023"`
	}
	var entries []entry
	for dec := json.NewDecoder(f); dec.More(); {
		var e entry
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	byName := map[string]int{}
	for i, e := range entries {
		byName[e.Name] = i
	}
	n := 0
	for _, region := range Regions() {
		c := mustLoad(t, region, LoadOptions{IncludeEstimated: true})
		for _, it := range c.InstanceTypes(NodeClassOptions{}) {
			i, ok := byName[it.Name]
			if !ok {
				t.Errorf("%s is not in the reference data", it.Name)
				continue
			}
			e := entries[i]
			labels := map[string]string{}
			for k, v := range it.Labels {
				if k != LabelRegion && k != "karpenter.k8s.aws/instance-tenancy" {
					labels[k] = v
				}
			}
			if !reflect.DeepEqual(labels, e.Labels) {
				t.Errorf("%s labels differ:\n got %v\nwant %v", it.Name, labels, e.Labels)
			}
			for r := Resource(0); r < NumResources; r++ {
				want := int64(0)
				if s, ok := e.Allocatable[ResourceNames[r]]; ok {
					q := resource.MustParse(s)
					want = q.Value()
					if r == CPU {
						want = q.MilliValue()
					}
				}
				if it.Allocatable[r] != want {
					t.Errorf("%s %s: allocatable %d, JSON %d", it.Name, ResourceNames[r], it.Allocatable[r], want)
				}
			}
			n++
		}
	}
	t.Logf("compared %d offered types", n)
}

func TestOfferings(t *testing.T) {
	c := mustLoad(t, "us-east-1", LoadOptions{})
	m5, _ := c.InstanceType("m5.large", NodeClassOptions{})
	s, _ := c.Spec("m5.large")
	if len(m5.Offerings) != 6 {
		t.Fatalf("m5.large offerings = %+v", m5.Offerings)
	}
	for i, o := range m5.Offerings {
		wantCT, wantPrice := CapacityTypeSpot, s.SpotPrice
		if i >= 3 {
			wantCT, wantPrice = CapacityTypeOnDemand, 0.096
		}
		wantZone := fmt.Sprintf("us-east-1%c", 'a'+i%3)
		if o.CapacityType != wantCT || o.Zone != wantZone || o.PricePerHour != wantPrice || !o.Available || o.Estimated != (wantCT == CapacityTypeSpot) {
			t.Errorf("m5.large offering %d = %+v, want %s %s %v", i, o, wantZone, wantCT, wantPrice)
		}
	}
	if o, ok := m5.CheapestOffering(); !ok || o.CapacityType != CapacityTypeSpot || o.Zone != "us-east-1a" {
		t.Errorf("cheapest = %+v", o)
	}
	// A type without a spot price has on-demand offerings only.
	for _, sp := range c.Specs() {
		if offered(&sp) && sp.SpotPrice == 0 {
			it, _ := c.InstanceType(sp.Name, NodeClassOptions{Zones: []string{"us-east-1d", "us-east-1a", "eu-west-1a", "us-east-1a"}})
			if len(it.Offerings) != 2 || it.Offerings[0].Zone != "us-east-1a" || it.Offerings[1].Zone != "us-east-1d" || it.Offerings[0].CapacityType != CapacityTypeOnDemand {
				t.Errorf("%s offerings with zones a,d = %+v", sp.Name, it.Offerings)
			}
			break
		}
	}
	// Estimated Seoul types only on request, with estimated on-demand prices.
	seoul := mustLoad(t, "ap-northeast-2", LoadOptions{})
	if seoul.Offered("c8a.large") {
		t.Error("c8a.large offered in Seoul without IncludeEstimated")
	}
	seoulAll := mustLoad(t, "ap-northeast-2", LoadOptions{IncludeEstimated: true})
	c8, ok := seoulAll.InstanceType("c8a.large", NodeClassOptions{})
	if !ok || len(c8.Offerings) != 3 || !c8.Offerings[0].Estimated || c8.Offerings[0].Zone != "ap-northeast-2a" {
		t.Errorf("c8a.large in Seoul with estimates: %v %+v", ok, c8.Offerings)
	}
}

func TestInstanceTypesDeterministic(t *testing.T) {
	c := mustLoad(t, "us-east-1", LoadOptions{})
	a := c.InstanceTypes(NodeClassOptions{})
	b := c.InstanceTypes(NodeClassOptions{})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two calls differ")
	}
	if !slices.IsSortedFunc(a, func(x, y InstanceType) int { return strings.Compare(x.Name, y.Name) }) {
		t.Error("not sorted by name")
	}
	if len(a) != 1345 {
		t.Errorf("us-east-1 offers %d types, want 1345", len(a))
	}
	for _, it := range a {
		if !slices.IsSortedFunc(it.Offerings, func(x, y Offering) int {
			if x.PricePerHour != y.PricePerHour {
				if x.PricePerHour < y.PricePerHour {
					return -1
				}
				return 1
			}
			return strings.Compare(x.Zone+x.CapacityType, y.Zone+y.CapacityType)
		}) {
			t.Errorf("%s offerings not sorted: %+v", it.Name, it.Offerings)
		}
	}
	// Fresh offerings on every call.
	a[0].Offerings[0].Available = false
	if !c.InstanceTypes(NodeClassOptions{})[0].Offerings[0].Available {
		t.Error("InstanceTypes shares offerings between calls")
	}
}

func TestUnknownRegion(t *testing.T) {
	_, err := Load("eu-west-9")
	if err == nil || !strings.Contains(err.Error(), "us-east-1") {
		t.Errorf("err = %v", err)
	}
}

// A reserved node is priced from its reservation's offering when the view lists it, else from
// its zone's on-demand offering as Karpenter prices reserved capacity (the status report and
// `karpool nodes` see no reservations).
func TestOfferingOfReservedNode(t *testing.T) {
	its := []InstanceType{{Name: "m5.xlarge", Offerings: []Offering{
		{Zone: "a", CapacityType: CapacityTypeOnDemand, PricePerHour: 0.2, VolumesPerHour: 0.008},
		{Zone: "a", CapacityType: CapacityTypeReserved, PricePerHour: 0.01, ReservationID: "cr-listed"},
	}}}
	labels := map[string]string{LabelInstanceType: "m5.xlarge", LabelZone: "a", LabelCapacityType: "reserved", LabelCapacityReservationID: "cr-listed"}
	if o, ok := OfferingOf(its, labels); !ok || o.PricePerHour != 0.01 {
		t.Errorf("listed reservation: %+v, %v", o, ok)
	}
	labels[LabelCapacityReservationID] = "cr-other"
	o, ok := OfferingOf(its, labels)
	if want := (0.2-0.008)/ReservedPriceDivisor + 0.008; !ok || o.PricePerHour != want || o.ReservationID != "cr-other" {
		t.Errorf("unlisted reservation: %+v, %v; want price %g", o, ok, want)
	}
	labels[LabelCapacityType] = "spot"
	if _, ok := OfferingOf(its, labels); ok {
		t.Error("a spot node found an offering the type does not have")
	}
}
