package main

import (
	"bytes"
	"strings"
	"testing"
)

func run(args ...string) (string, error) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestVersionNamesTheAPIs(t *testing.T) {
	version = "v9.9.9-test"
	defer func() { version = "" }()
	out, err := run("version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"karpool v9.9.9-test", "karpenter.sh/v1", "karpenter.k8s.aws/v1", "karpool.dev/v1alpha1"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}
}

func TestHelpListsCommands(t *testing.T) {
	out, err := run("help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "version") || !strings.Contains(out, "Usage:") {
		t.Errorf("help output lacks the command list:\n%s", out)
	}
}

func TestUnknownFlagIsAUsageError(t *testing.T) {
	_, err := run("version", "--no-such-flag")
	if err == nil {
		t.Fatal("unknown flag accepted")
	}
	if code := exitCode(err); code != 2 {
		t.Errorf("exit code %d, want 2 for a usage error", code)
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	_, err := run("no-such-command")
	if err == nil || !strings.Contains(err.Error(), "no-such-command") {
		t.Fatalf("error %v, want one naming the unknown command", err)
	}
	if code := exitCode(err); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
}

// A misspelt feature gate stops the controller before it connects anywhere, naming the gate.
func TestControllerRejectsUnknownFeatureGate(t *testing.T) {
	_, err := run("controller", "--cluster-name", "demo", "--feature-gates", "SpotToSpotConsolidaton=true")
	if err == nil || !strings.Contains(err.Error(), `--feature-gates: unknown feature gate "SpotToSpotConsolidaton"`) {
		t.Fatalf("error %v, want one naming the unknown gate", err)
	}
	if code := exitCode(err); code != 2 {
		t.Errorf("exit code %d, want 2 for a usage error", code)
	}
}

// A Karpenter Lease named without its namespace stops the controller before it connects
// anywhere, saying the form it wants.
func TestControllerRejectsLeaseWithoutNamespace(t *testing.T) {
	_, err := run("controller", "--cluster-name", "demo", "--karpenter-leases", "karpenter-leader-election")
	if err == nil || !strings.Contains(err.Error(), `--karpenter-leases: lease "karpenter-leader-election": want namespace/name`) {
		t.Fatalf("error %v, want one naming the lease and the form", err)
	}
	if code := exitCode(err); code != 2 {
		t.Errorf("exit code %d, want 2 for a usage error", code)
	}
}
