package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/karpool/karpool/testbed/gittest"
	"github.com/karpool/karpool/testbed/hostile"
)

// runMainEnv makes this test binary run karpool's main instead of the tests, so that a probe
// runs karpool in a process of its own, whose time and memory can be measured.
const runMainEnv = "KARPOOL_TEST_RUN_MAIN"

// Bounds on one probe of a hostile repository: the "each probe under 10 s and 500 MB".
const (
	probeTimeout = 10 * time.Second
	probeMemory  = 500 << 20
)

// TestHostileRepositories runs every repository of the corpus (testbed/hostile) through
// `karpool vet` and `karpool plan`, each in a process of its own: the answer is an error at the
// file and line the case names; no connection reaches the trap's listener, no command runs, the
// file outside the repository is never opened and its secret never printed; the plan comment
// holds no link, image, mention or HTML that karpool's template did not write; and each probe
// ends within 10 s and 500 MB.
func TestHostileRepositories(t *testing.T) {
	tr := hostile.NewTrap(t)
	cases, err := hostile.Cases(tr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := hostileRepo(t, c)
			out, _, code := probe(t, dir, "vet", c.Path)
			switch {
			case c.VetAccepts && code != 0:
				t.Errorf("vet: exit %d, want 0 (what is wrong is in a workload):\n%s", code, out)
			case !c.VetAccepts && (code != 1 || !hostile.Located(out, c.Want)):
				t.Errorf("vet: exit %d, want 1 and %s %s:\n%s", code, c.Want.Where(), c.Want.Message, out)
			}
			tr.Check(t, "vet", out)
			md, stderr, code := probe(t, dir, "plan", "--base", "base", "--head", "HEAD", "--path", c.Path, "--output", "markdown")
			if code != 1 || !hostile.Located(md, c.Want) {
				t.Errorf("plan: exit %d, want 1 and %s %s:\n%s%s", code, c.Want.Where(), c.Want.Message, md, stderr)
			}
			for _, p := range hostile.Steered(md) {
				t.Errorf("plan comment: %s", p)
			}
			tr.Check(t, "plan", md, stderr)
		})
	}
}

// hostileRepo is a work tree whose commit "base" holds a pool and whose HEAD is the case.
func hostileRepo(t *testing.T, c hostile.Case) string {
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	must(t, os.MkdirAll(filepath.Join(dir, c.Path), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, c.Path, "README"), []byte("pools\n"), 0o644))
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-q", "-m", "base")
	gittest.Git(t, dir, "tag", "base")
	must(t, c.WriteTo(dir))
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-q", "-m", c.Name)
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// probe runs karpool with args in dir, in a process of its own, and fails the test when it
// outlives probeTimeout or its peak memory (with its build processes) passes probeMemory. It
// returns the standard output (with the standard error after it for vet, whose findings go
// there) and the standard error.
func probe(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after %s", args[0], probeTimeout)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", args[0], err)
	}
	// Linux reports the largest resident set of the process and of the children it waited
	// for (the confined builds), in KiB.
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		t.Logf("%s: %.2f s, peak %d MiB", args[0], took.Seconds(), ru.Maxrss>>10)
		if ru.Maxrss<<10 > probeMemory {
			t.Errorf("%s: peak memory %d MiB, more than %d MiB", args[0], ru.Maxrss>>10, probeMemory>>20)
		}
	}
	out := stdout.String()
	if args[0] == "vet" {
		out += stderr.String()
	}
	return out, stderr.String(), cmd.ProcessState.ExitCode()
}
