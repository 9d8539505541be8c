// Package localenvtest gives a test package one shared local control plane.
//
// Plain `go test ./...` on a machine without the binaries skips the end-to-end tests with a message
// saying how to run them; `make test` sets KARPOOL_E2E=require, which turns a missing binary into a
// failure. After the package's tests, Main stops the environment and fails the run if any of its
// processes is still alive.
package localenvtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/karpool/karpool/testbed/localenv"
)

// RequireEnv is the variable that makes missing e2e prerequisites a failure instead of a skip.
const RequireEnv = "KARPOOL_E2E"

var (
	mu       sync.Mutex
	shared   *localenv.Env
	startErr error
	pids     []int
	envDir   string
)

// Main runs the tests of a package, then stops the shared environment and checks that none of its
// processes survived. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localenvtest: stopping the environment:", err)
			code = 1
		}
		if left := Survivors(pids, envDir); len(left) > 0 {
			fmt.Fprintln(os.Stderr, "localenvtest: processes left running after Stop:", strings.Join(left, "; "))
			code = 1
		}
	}
	os.Exit(code)
}

// Env returns the package's shared environment, starting it on first use. Without the binaries it
// skips the test, or fails it when KARPOOL_E2E=require.
func Env(t testing.TB) *localenv.Env {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && startErr == nil {
		if _, err := localenv.CheckBinaries(""); err != nil {
			var missing *localenv.MissingBinariesError
			if errors.As(err, &missing) && os.Getenv(RequireEnv) != "require" {
				t.Skipf("e2e test skipped: %v; `make test` builds them and runs it", err)
			}
			t.Fatalf("e2e prerequisites: %v", err)
		}
		shared, startErr = localenv.Start(context.Background(), localenv.Options{Logf: t.Logf})
		if startErr == nil {
			pids = shared.PIDs()
			envDir = shared.Dir
		}
	}
	if startErr != nil {
		t.Fatalf("starting the local control plane: %v", startErr)
	}
	return shared
}

// Survivors returns a description of every process that is still alive among pids, or whose
// command line mentions dir (the environment's private directory, unique to it). It reads /proc,
// which is what ps reads.
func Survivors(pids []int, dir string) []string {
	var out []string
	seen := map[int]bool{}
	for _, pid := range pids {
		if alive(pid) {
			out = append(out, fmt.Sprintf("pid %d (%s)", pid, cmdline(pid)))
			seen[pid] = true
		}
	}
	if dir == "" {
		return out
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || seen[pid] || pid == os.Getpid() {
			continue
		}
		if c := cmdline(pid); strings.Contains(c, dir) && alive(pid) {
			out = append(out, fmt.Sprintf("pid %d (%s)", pid, c))
		}
	}
	return out
}

// alive is true for a process that exists and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may itself hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func cmdline(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
}
