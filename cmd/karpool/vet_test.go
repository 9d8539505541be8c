package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func runWithStdin(stdin string, args ...string) (string, string, error) {
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// A file with six documents, three of them invalid: one run prints an error for each invalid
// one, at file:line:col, nothing for the valid ones, and exits 1.
func TestVetThreeInvalidOfSix(t *testing.T) {
	const file = "../../schema/vet/testdata/three-of-six.yaml"
	out, _, err := runWithStdin("", "vet", file)
	if code := exitCode(err); err == nil || code != 1 {
		t.Fatalf("exit code %d (%v), want 1", code, err)
	}
	errorLine := regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `:(\d+):(\d+): error: `)
	lines := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "    hint: ") {
			continue
		}
		m := errorLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("not an error at file:line:col: %q", l)
			continue
		}
		lines[m[1]] = true
	}
	if len(lines) < 3 {
		t.Errorf("errors on %d lines, want 3 or more:\n%s", len(lines), out)
	}
	// The valid documents are the EC2NodeClass "default" and the NodePools "spot" and
	// "on-demand": lines 3-14, 31-44 and 60-72.
	for l := range lines {
		n := 0
		for _, c := range l {
			n = n*10 + int(c-'0')
		}
		if n >= 3 && n <= 14 || n >= 31 && n <= 44 || n >= 60 && n <= 72 {
			t.Errorf("finding on line %d, in a valid document", n)
		}
	}
	if !strings.Contains(err.Error(), "errors in 1 file: 6 documents checked") {
		t.Errorf("summary %q", err)
	}
}

func TestVetValidExitsZero(t *testing.T) {
	out, stderr, err := runWithStdin("", "vet", "../../examples/workshop")
	if err != nil || out != "" {
		t.Fatalf("workshop example: %v\n%s", err, out)
	}
	// The kustomization and the two files it lists; the pools repository holds pools only.
	if !strings.Contains(stderr, "no problems in 3 files: 2 documents checked") {
		t.Errorf("summary %q", stderr)
	}
}

func TestVetStdinAndGitHubOutput(t *testing.T) {
	in := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  weight: 0\n"
	out, _, err := runWithStdin(in, "vet", "--output", "github", "--allow-external-refs", "-")
	if exitCode(err) != 1 {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
	if !strings.Contains(out, "::error file=<stdin>,line=6,col=11,title=karpool vet%3A schema::spec.weight: must be greater than or equal to 1") {
		t.Errorf("github output:\n%s", out)
	}
}

func TestVetUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"vet", "--output", "yaml", "x.yaml"},
		{"vet", "does-not-exist.yaml"},
		{"vet"},
		{"vet", "--max-file-size", "lots", "x.yaml"},
	} {
		_, _, err := runWithStdin("", args...)
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit code %d (%v), want 2", args, code, err)
		}
	}
}

// TestBuildTimeoutFlag: --build-timeout bounds the kustomize build of a directory.
func TestBuildTimeoutFlag(t *testing.T) {
	out, err := run("vet", "--build-timeout", "1ns", "../../examples/workshop")
	if err == nil || !strings.Contains(out, "the build took longer than its 1ns deadline") {
		t.Fatalf("got %v:\n%s", err, out)
	}
	if _, err := run("vet", "--build-timeout", "0s", "../../examples/workshop"); exitCode(err) != 2 {
		t.Fatalf("--build-timeout 0s: got %v, want a usage error", err)
	}
}
