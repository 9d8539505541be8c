package network

import (
	"testing"
	"time"
)

// A subnet marked full is skipped until its deadline; the zone's other subnet takes the
// launches, and a zone whose subnets are all full (or reported without free addresses) is left
// out.
func TestFullSubnets(t *testing.T) {
	now := time.Unix(1000, 0)
	subnets := []Subnet{
		{ID: "a1", Zone: "a", FreeIPs: 500}, {ID: "a2", Zone: "a", FreeIPs: 100},
		{ID: "b1", Zone: "b", FreeIPs: 300}, {ID: "c1", Zone: "c", FreeIPs: 0},
	}
	var f FullSubnets
	pick := func(at time.Time) map[string]string {
		out := map[string]string{}
		for z, s := range f.ByZone(subnets, at) {
			out[z] = s.ID
		}
		return out
	}
	if got := pick(now); got["a"] != "a1" || got["b"] != "b1" || len(got) != 2 {
		t.Fatalf("nothing marked: %v, want a1 and b1 (c has no free address)", got)
	}
	f.Mark("a1", now.Add(3*time.Minute))
	f.Mark("b1", now.Add(3*time.Minute))
	if got := pick(now.Add(time.Minute)); got["a"] != "a2" || len(got) != 1 {
		t.Errorf("a1 and b1 full: %v, want only a2", got)
	}
	f.Mark("a1", now) // an earlier deadline does not shorten the mark
	if got := pick(now.Add(3 * time.Minute)); got["a"] != "a1" || got["b"] != "b1" {
		t.Errorf("after the deadline: %v, want a1 and b1 again", got)
	}
}
