package catalog

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestUnavailable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var u Unavailable // zero value usable
	if u.IsUnavailable("m5.large", "us-east-1a", "spot", t0) {
		t.Fatal("empty set marks something")
	}
	u.Mark("m5.large", "us-east-1a", "spot", t0.Add(3*time.Minute))
	for _, tc := range []struct {
		it, zone, ct string
		at           time.Duration
		want         bool
	}{
		{"m5.large", "us-east-1a", "spot", 0, true},
		{"m5.large", "us-east-1a", "spot", 3*time.Minute - 1, true},
		{"m5.large", "us-east-1a", "spot", 3 * time.Minute, false}, // deadline is exclusive
		{"m5.large", "us-east-1b", "spot", 0, false},
		{"m5.large", "us-east-1a", "on-demand", 0, false},
		{"m5.xlarge", "us-east-1a", "spot", 0, false},
	} {
		if got := u.IsUnavailable(tc.it, tc.zone, tc.ct, t0.Add(tc.at)); got != tc.want {
			t.Errorf("IsUnavailable(%s, %s, %s, +%v) = %v", tc.it, tc.zone, tc.ct, tc.at, got)
		}
	}
	// An earlier deadline does not shorten; a later one extends.
	v := u.Version()
	u.Mark("m5.large", "us-east-1a", "spot", t0.Add(time.Minute))
	if u.Version() != v || !u.IsUnavailable("m5.large", "us-east-1a", "spot", t0.Add(2*time.Minute)) {
		t.Error("earlier deadline shortened the mark")
	}
	u.Mark("m5.large", "us-east-1a", "spot", t0.Add(10*time.Minute))
	if u.Version() == v || !u.IsUnavailable("m5.large", "us-east-1a", "spot", t0.Add(5*time.Minute)) {
		t.Error("later deadline did not extend")
	}
	// Wildcards: a whole zone, all spot.
	u.Mark("", "us-east-1c", "", t0.Add(time.Minute))
	u.Mark("", "", "spot", t0.Add(time.Minute))
	if !u.IsUnavailable("c5.large", "us-east-1c", "on-demand", t0) || !u.IsUnavailable("c5.large", "us-east-1b", "spot", t0) ||
		u.IsUnavailable("c5.large", "us-east-1b", "on-demand", t0) {
		t.Error("wildcards")
	}
	u.Prune(t0.Add(2 * time.Minute))
	if u.IsUnavailable("c5.large", "us-east-1c", "on-demand", t0) {
		t.Error("prune kept an expired zone mark")
	}
	u.Clear("m5.large", "us-east-1a", "spot")
	if u.IsUnavailable("m5.large", "us-east-1a", "spot", t0) {
		t.Error("clear")
	}
}

func TestUnavailableApply(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := mustLoad(t, "us-east-1", LoadOptions{})
	its := c.InstanceTypes(NodeClassOptions{})
	u := NewUnavailable()
	u.Mark("m5.large", "us-east-1a", CapacityTypeSpot, t0.Add(time.Minute))
	out := u.Apply(its, t0)
	var m5in, m5out InstanceType
	for i := range its {
		if its[i].Name == "m5.large" {
			m5in, m5out = its[i], out[i]
		}
	}
	for i, o := range m5out.Offerings {
		want := !(o.Zone == "us-east-1a" && o.CapacityType == CapacityTypeSpot)
		if o.Available != want {
			t.Errorf("offering %d %+v: available %v", i, o, o.Available)
		}
		if !m5in.Offerings[i].Available {
			t.Error("Apply modified its input")
		}
	}
	if o, _ := m5out.CheapestOffering(); o.Zone != "us-east-1b" || o.CapacityType != CapacityTypeSpot {
		t.Errorf("cheapest after ICE = %+v", o)
	}
	if out := u.Apply(its, t0.Add(time.Minute)); !out[0].Offerings[0].Available {
		t.Error("expired mark applied")
	}
}

func TestUnavailableConcurrent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := NewUnavailable()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				name := fmt.Sprintf("t%d.%d", g, i%10)
				u.Mark(name, "z", "spot", t0.Add(time.Duration(i)*time.Second))
				u.IsUnavailable(name, "z", "spot", t0)
				u.Version()
				if i%50 == 0 {
					u.Prune(t0)
				}
			}
		}(g)
	}
	wg.Wait()
	if !u.IsUnavailable("t3.9", "z", "spot", t0) {
		t.Error("lost a mark")
	}
}
