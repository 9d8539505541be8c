//go:build linux && (amd64 || arm64)

package confined

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestLockdownHelper runs only as the child of TestKernelRefusesProgramsAndSockets: it locks
// itself down, then tries to start a program and to connect, and reports what happened.
func TestLockdownHelper(t *testing.T) {
	addr := os.Getenv("KARPOOL_LOCKDOWN_HELPER")
	if addr == "" {
		t.Skip("run by TestKernelRefusesProgramsAndSockets")
	}
	if err := lockdown(); err != nil {
		t.Fatalf("lockdown: %v", err)
	}
	if err := exec.Command("/bin/true").Run(); !errors.Is(err, syscall.EPERM) {
		t.Errorf("starting a program: %v, want EPERM", err)
	}
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.EPERM) {
		if c != nil {
			c.Close()
		}
		t.Errorf("connecting: %v, want EPERM", err)
	}
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Errorf("reading a file: %v", err)
	}
}

func TestKernelRefusesProgramsAndSockets(t *testing.T) {
	addr, conns := listener(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockdownHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "KARPOOL_LOCKDOWN_HELPER="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLockdownHelper") {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}
}
