package operator_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpool/karpool/internal/awssim"
)

// buildKarpool builds the karpool binary for tests that need a separate process.
func buildKarpool(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "karpool")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/karpool/karpool/cmd/karpool")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestControllerKilledAfterCreateFleet: the controller process is SIGKILLed after EC2 created
// the instance but before the response reached it. The restarted controller finds the same
// instance (the fleet's client token is the NodeClaim's UID): no duplicate, no leak — after the
// garbage-collection window the simulator holds exactly as many instances as there are
// NodeClaims.
func TestControllerKilledAfterCreateFleet(t *testing.T) {
	h := newHarness(t)
	bin := buildKarpool(t)
	h.sim.SetFaults(awssim.Faults{ResponseLatency: map[string]awssim.Duration{"ec2:CreateFleet": {Duration: time.Minute}}})
	logPath := filepath.Join(t.TempDir(), "killed-controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "controller", "--cluster-name", clusterName, "--kubeconfig", h.env.Kubeconfig,
		"--leader-elect=false", "--metrics-bind-address", freeAddr(t), "--health-probe-bind-address", freeAddr(t))
	cmd.Env = append(os.Environ(), h.sim.Env()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status of a SIGKILLed process says nothing more
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by PID; a no-op once it exited
		<-exited
	})

	ns := h.namespace("crash")
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"), repoFile("examples", "workshop", "nodepool.yaml"))
	h.apply(ns, repoFile("examples", "seeds", "003-workshop", "inflate-deployment.yaml"))
	h.scale(ns, "inflate", 5)
	h.eventually("CreateFleet took effect", 2*time.Minute, func() error {
		for _, c := range h.sim.Calls() {
			if c.Action == "CreateFleet" && c.Output != nil {
				return nil
			}
		}
		return fmt.Errorf("no successful CreateFleet yet")
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
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
	if data, _ := os.ReadFile(logPath); !strings.Contains(string(data), "created nodeclaim") {
		t.Errorf("the killed controller's log has no \"created nodeclaim\":\n%s", data)
	}
	t.Logf("%d successful CreateFleet calls (the retry reuses the client token)", fleets)
}
