package operator_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/karpool/karpool/testbed/awssim"
)

// TestControllerKilledAfterCreateFleet: the controller process is SIGKILLed after EC2 created
// the instance but before the response reached it. The restarted controller finds the same
// instance (the fleet's client token is the NodeClaim's UID): no duplicate, no leak — after the
// garbage-collection window the simulator holds exactly as many instances as there are
// NodeClaims.
func TestControllerKilledAfterCreateFleet(t *testing.T) {
	h := newHarness(t)
	h.sim.SetFaults(awssim.Faults{ResponseLatency: map[string]awssim.Duration{"ec2:CreateFleet": {Duration: time.Minute}}})
	proc := h.startProcess("--leader-elect=false")

	ns := h.namespace("crash")
	h.workshopPools()
	h.inflate(ns, 5)
	h.eventually("CreateFleet took effect", 2*time.Minute, func() error {
		for _, c := range h.sim.Calls() {
			if c.Action == "CreateFleet" && c.Output != nil {
				return nil
			}
		}
		return fmt.Errorf("no successful CreateFleet yet")
	})
	proc.signal(syscall.SIGKILL)
	killedAt := time.Now()
	if n := h.liveInstances(); n != 1 {
		t.Fatalf("after the kill the simulator holds %d live instances, want 1", n)
	}
	if claims := h.nodeClaims(); len(claims) != 1 || claims[0].Status.ProviderID != "" {
		t.Fatalf("want one NodeClaim without a providerID (the kill came before the status write), got %d: %+v", len(claims), claims)
	}

	h.sim.SetFaults(awssim.Faults{})
	h.startController()
	h.runningPods(ns, "inflate", 5, 3*time.Minute)
	// Past the leak grace period (30 s) plus a garbage-collection pass (5 s here).
	h.eventually("garbage-collection window passed", 2*time.Minute, func() error {
		if time.Since(killedAt) < 45*time.Second {
			return fmt.Errorf("%s since the kill", time.Since(killedAt).Round(time.Second))
		}
		return nil
	})
	claims := h.nodeClaims()
	if len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(claims))
	}
	var live []string
	for _, in := range h.sim.Instances() {
		if in.State == "pending" || in.State == "running" {
			live = append(live, in.ProviderID)
		}
	}
	if len(live) != 1 || live[0] != claims[0].Status.ProviderID {
		t.Errorf("live instances %v, want exactly the NodeClaim's %s", live, claims[0].Status.ProviderID)
	}
	fleets := 0
	for _, c := range h.sim.Calls() {
		if c.Action == "CreateFleet" && c.Output != nil {
			fleets++
		}
	}
	if !proc.logs("created nodeclaim") {
		t.Errorf("the killed controller's log has no \"created nodeclaim\":\n%s", proc.log())
	}
	t.Logf("%d successful CreateFleet calls (the retry reuses the client token)", fleets)
}
