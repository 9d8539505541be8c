package schema_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

// cueBinary finds the cue CLI that `make tools` builds (hack/tools/cue): $KARPOOL_BIN_DIR/cue or
// bin/cue of the repository. Without it the test is skipped, or fails under KARPOOL_E2E=require.
func cueBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KARPOOL_BIN_DIR")
	if dir == "" {
		dir = "../bin"
	}
	bin, err := filepath.Abs(filepath.Join(dir, "cue"))
	if err == nil {
		if _, err = os.Stat(bin); err == nil {
			return bin
		}
	}
	if os.Getenv(localenvtest.RequireEnv) != "require" {
		t.Skipf("e2e test skipped: no cue binary (%v); `make tools` builds it", err)
	}
	t.Fatalf("e2e prerequisites: no cue binary: %v", err)
	return ""
}

// cueVet runs the stock cue CLI from the repository root, as README.md and docs/validating.md tell users to.
func cueVet(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("running %s: %v", bin, err)
	return "", -1
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("..", pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("glob %s: %v %v", pattern, m, err)
	}
	for i := range m {
		m[i] = strings.TrimPrefix(m[i], "../")
	}
	return m
}

// TestStockCueVet runs the commands of docs/validating.md with the pinned
// cue CLI: the v1 examples and the valid corpus pass, every document of the invalid corpus fails
// (exit 1), and a failure names the field with the CRD rule's message.
func TestStockCueVet(t *testing.T) {
	bin := cueBinary(t)

	// The schema itself evaluates cleanly.
	if out, code := cueVet(t, bin, "vet", "-c", "./schema"); code != 0 {
		t.Fatalf("cue vet -c ./schema: exit %d\n%s", code, out)
	}

	// One kind per file.
	for _, c := range [][]string{
		{"#NodePool", "examples/workshop/nodepool.yaml"},
		{"#EC2NodeClass", "examples/workshop/ec2nodeclass.yaml"},
		{"#NodePool", "examples/seeds/002-hpa-terraform/nodepool.yaml"},
		{"#EC2NodeClass", "examples/seeds/002-hpa-terraform/ec2nodeclass.yaml"},
	} {
		if out, code := cueVet(t, bin, "vet", "-c", "-d", c[0], "./schema", c[1]); code != 0 {
			t.Errorf("cue vet -c -d '%s' ./schema %s: exit %d\n%s", c[0], c[1], code, out)
		}
	}

	// Mixed files and whole directories: #Resource checks the kinds it knows and lets the others
	// (the workshop's Deployment and Kustomization) through.
	mixed := append([]string{"vet", "-c", "-d", "#Resource", "./schema"}, glob(t, "examples/workshop/*.yaml")...)
	mixed = append(mixed, glob(t, "examples/workshop/workload/*.yaml")...)
	mixed = append(mixed, glob(t, "examples/seeds/002-hpa-terraform/*.yaml")...)
	mixed = append(mixed, glob(t, "schema/testdata/valid/*.yaml")...)
	if out, code := cueVet(t, bin, mixed...); code != 0 {
		t.Errorf("cue vet -c -d '#Resource' ./schema examples/workshop/*.yaml ...: exit %d\n%s", code, out)
	}

	// An invalid file: exit 1, and the message names the field and the rule.
	const bad = "schema/testdata/invalid/nodepool/requirement-karpenter-sh-domain.yaml"
	out, code := cueVet(t, bin, "vet", "-c", "-d", "#Resource", "./schema", bad)
	if code != 1 || !strings.Contains(out, `spec.template.spec.requirements.0: label domain "karpenter.sh" is restricted`) {
		t.Errorf("cue vet on %s: exit %d, want 1 with the rule's message\n%s", bad, code, out)
	}
	// A role the CRD accepts and karpool refuses: stock cue vet refuses it too.
	const role = "schema/testdata/stricter/ec2nodeclass-role-wildcard.yaml"
	out, code = cueVet(t, bin, "vet", "-c", "-d", "#Resource", "./schema", role)
	if code != 1 || !strings.Contains(out, "role must be an IAM role") {
		t.Errorf("cue vet on %s: exit %d, want 1 with the rule's message\n%s", role, code, out)
	}
	// A retired API: the message says what to run.
	out, code = cueVet(t, bin, "vet", "-c", "-d", "#Resource", "./schema", "examples/seeds/004-weasel/nodepool-ec2nodeclass.yaml")
	if code != 1 || !strings.Contains(out, "run `karpool migrate FILE`") {
		t.Errorf("cue vet on seed 004: exit %d, want 1 with the migrate hint\n%s", code, out)
	}

	// Every document of the invalid corpus fails with the stock CLI too.
	files := glob(t, "schema/testdata/invalid/*/*.yaml")
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if out, code := cueVet(t, bin, "vet", "-c", "-d", "#Resource", "./schema", f); code != 1 {
				t.Errorf("cue vet on %s: exit %d, want 1\n%s", f, code, out)
			}
		}()
	}
	wg.Wait()
}
