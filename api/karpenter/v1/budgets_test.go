package v1

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func poolWithBudgets(bs ...Budget) *NodePool {
	np := &NodePool{}
	np.Name = "default"
	np.Spec.Disruption.Budgets = bs
	return np
}

func window(schedule string, d time.Duration) (*string, *metav1.Duration) {
	return &schedule, &metav1.Duration{Duration: d}
}

func TestAllowedDisruptions(t *testing.T) {
	at := func(hhmm string) time.Time {
		t, err := time.Parse("2006-01-02 15:04", "2026-11-24 "+hhmm)
		if err != nil {
			panic(err)
		}
		return t
	}
	workHours := Budget{Nodes: "0"}
	workHours.Schedule, workHours.Duration = window("0 9 * * *", 8*time.Hour)
	cases := []struct {
		name   string
		np     *NodePool
		reason DisruptionReason
		nodes  int
		now    time.Time
		want   int
	}{
		{"no budget, no limit", poolWithBudgets(), DisruptionReasonEmpty, 7, at("10:00"), math.MaxInt32},
		{"10 % of 5 rounds up to 1", poolWithBudgets(Budget{Nodes: "10%"}), DisruptionReasonEmpty, 5, at("10:00"), 1},
		{"10 % of 25 rounds up to 3", poolWithBudgets(Budget{Nodes: "10%"}), DisruptionReasonEmpty, 25, at("10:00"), 3},
		{"10 % of none is none", poolWithBudgets(Budget{Nodes: "10%"}), DisruptionReasonEmpty, 0, at("10:00"), 0},
		{"a count", poolWithBudgets(Budget{Nodes: "3"}), DisruptionReasonDrifted, 50, at("10:00"), 3},
		{"the most restrictive applies", poolWithBudgets(Budget{Nodes: "50%"}, Budget{Nodes: "2"}), DisruptionReasonEmpty, 10, at("10:00"), 2},
		{"a budget for another reason does not apply",
			poolWithBudgets(Budget{Nodes: "0", Reasons: []DisruptionReason{DisruptionReasonDrifted}}, Budget{Nodes: "20%"}),
			DisruptionReasonEmpty, 10, at("10:00"), 2},
		{"a budget for this reason applies",
			poolWithBudgets(Budget{Nodes: "0", Reasons: []DisruptionReason{DisruptionReasonDrifted}}, Budget{Nodes: "20%"}),
			DisruptionReasonDrifted, 10, at("10:00"), 0},
		{"inside the window", poolWithBudgets(workHours, Budget{Nodes: "20%"}), DisruptionReasonEmpty, 10, at("16:59"), 0},
		{"at the window's start", poolWithBudgets(workHours, Budget{Nodes: "20%"}), DisruptionReasonEmpty, 10, at("09:00"), 0},
		{"after the window", poolWithBudgets(workHours, Budget{Nodes: "20%"}), DisruptionReasonEmpty, 10, at("17:01"), 2},
		{"before the window", poolWithBudgets(workHours, Budget{Nodes: "20%"}), DisruptionReasonEmpty, 10, at("08:59"), 2},
	}
	for _, c := range cases {
		got, err := c.np.AllowedDisruptions(c.reason, c.nodes, c.now)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %d allowed, want %d", c.name, got, c.want)
		}
	}
}

// A budget that cannot be read blocks the pool's disruptions and says where it is.
func TestAllowedDisruptionsFailClosed(t *testing.T) {
	bad := Budget{Nodes: "10%"}
	bad.Schedule, bad.Duration = window("99 99 * * funday", time.Hour)
	got, err := poolWithBudgets(Budget{Nodes: "5"}, bad).AllowedDisruptions(DisruptionReasonEmpty, 10, time.Now())
	if got != 0 || err == nil || !strings.Contains(err.Error(), "budgets[1]") {
		t.Errorf("got %d, %v; want 0 and an error naming budgets[1]", got, err)
	}
	if _, err := poolWithBudgets(Budget{Nodes: "ten"}).AllowedDisruptions(DisruptionReasonEmpty, 10, time.Now()); err == nil {
		t.Error("nodes \"ten\" accepted")
	}
}
