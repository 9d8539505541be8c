package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpool/karpool/autoscaler/catalog"
)

func TestWorkloadSeededAndComplete(t *testing.T) {
	a, b := workload(7, 40, 1000), workload(7, 40, 1000)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew two workloads")
	}
	if reflect.DeepEqual(a, workload(8, 40, 1000)) {
		t.Fatal("two seeds drew the same workload")
	}
	if n := podCount(a); n != 1000 || len(a) != 40 {
		t.Fatalf("%d Deployments with %d pods, want 40 with 1000", len(a), n)
	}
	for _, d := range a {
		if d.Replicas < 5 || d.CPUMilli <= 0 || d.MemMiB < d.CPUMilli {
			t.Errorf("deployment %+v", d)
		}
	}
	down := scaled(a, 0.3)
	for i := range down {
		if want := (a[i].Replicas*3 + 9) / 10; down[i].Replicas != want {
			t.Errorf("%s scaled to %d, want ceil(30 %% of %d) = %d", a[i].Name, down[i].Replicas, a[i].Replicas, want)
		}
	}
}

// Karpenter's kwok provider takes 100m cpu and 10Mi memory from a type's resources; the file
// must add them back so both systems schedule against the same allocatable, at list prices.
func TestKwokTypesKeepAllocatable(t *testing.T) {
	cat, err := catalog.Load(region)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := catalog.NodeClassOptionsFor(nil)
	if err != nil {
		t.Fatal(err)
	}
	types := poolTypes(cat, opts)
	kt := kwokTypes(cat, types)
	if len(kt) != len(types) || len(kt) == 0 {
		t.Fatalf("%d kwok types for %d pool types", len(kt), len(types))
	}
	for i, it := range types {
		if c := it.Labels["karpenter.k8s.aws/instance-category"]; c != "c" && c != "m" && c != "r" {
			t.Errorf("%s of category %q in the pool", it.Name, c)
		}
		k := kt[i]
		for r, reserved := range map[catalog.Resource]int64{catalog.CPU: 100, catalog.Memory: 10 << 20, catalog.Pods: 0} {
			q := resource.MustParse(k.Resources[catalog.ResourceNames[r]])
			got := q.Value()
			if r == catalog.CPU {
				got = q.MilliValue()
			}
			if got-reserved != it.Allocatable[r] {
				t.Errorf("%s %s: %d less %d reserved, want karpool's allocatable %d", k.Name, catalog.ResourceNames[r], got, reserved, it.Allocatable[r])
			}
		}
		spec, _ := cat.Spec(it.Name)
		if len(k.Offerings) != 3 {
			t.Errorf("%s: %d offerings, want on-demand in 3 zones", k.Name, len(k.Offerings))
		}
		for _, o := range k.Offerings {
			if o.Price != spec.OnDemandPrice {
				t.Errorf("%s: price %v, want the list price %v", k.Name, o.Price, spec.OnDemandPrice)
			}
		}
	}
}

// The scenarios are named on the command line; the boot scenario's delay reaches both
// systems (the kwok provider through its node class), and an unknown name is refused.
func TestScenarios(t *testing.T) {
	got, err := scenarios([]string{"system-node", "empty", "boot"}, 45*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].systemNode || got[1].systemNode || got[2].registration != 45*time.Second || !got[2].systemNode {
		t.Errorf("scenarios %+v", got)
	}
	if !strings.Contains(karpenterPools(got[2].registration), "nodeRegistrationDelay: 45s") {
		t.Error("Karpenter's node class does not carry the boot delay")
	}
	if _, err := scenarios([]string{"cold"}, 0); err == nil || !strings.Contains(err.Error(), "system-node, empty, boot") {
		t.Errorf("unknown scenario: %v", err)
	}
}
