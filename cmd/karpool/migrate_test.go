package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runIO runs karpool with separate stdout and stderr and the given stdin.
func runIO(stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := newRootCommand()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

const seed004 = "../../examples/seeds/004-weasel/nodepool-ec2nodeclass.yaml"

const legacyPool = `apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: a # the pool
spec:
  template:
    spec:
      requirements: []
      nodeClassRef:
        name: cls
`

const plainFile = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"

func TestMigratePrintsToStdout(t *testing.T) {
	stdout, stderr, err := runIO("", "migrate", seed004)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"apiVersion: karpenter.sh/v1\n", "group: karpenter.k8s.aws", "apiVersion: karpenter.k8s.aws/v1\n", "httpPutResponseHopLimit: 2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if want := seed004 + ":44: warning: metadataOptions written out"; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q, want a line starting %q", stderr, want)
	}
	if strings.Contains(stdout, "warning") {
		t.Errorf("warnings leaked into stdout")
	}
}

func TestMigrateReadsStdin(t *testing.T) {
	stdout, stderr, err := runIO(legacyPool, "migrate")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "name: a # the pool") || !strings.Contains(stdout, "group: karpenter.k8s.aws") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if stderr != "" {
		t.Errorf("stderr: %s", stderr)
	}
	// "-" is stdin too.
	if _, _, err := runIO(legacyPool, "migrate", "-"); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateWritesInPlace(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool.yaml")
	plain := filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(pool, []byte(legacyPool), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte(plainFile), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(plain)
	stdout, stderr, err := runIO("", "migrate", "-w", pool, plain)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "" {
		t.Errorf("-w printed to stdout: %s", stdout)
	}
	if !strings.Contains(stderr, pool+": migrated") || strings.Contains(stderr, plain) {
		t.Errorf("stderr %q", stderr)
	}
	got, _ := os.ReadFile(pool)
	if !strings.Contains(string(got), "apiVersion: karpenter.sh/v1\n") || !strings.Contains(string(got), "# the pool") {
		t.Errorf("pool.yaml not migrated:\n%s", got)
	}
	if fi, _ := os.Stat(pool); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	after, _ := os.Stat(plain)
	if data, _ := os.ReadFile(plain); string(data) != plainFile || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("unchanged file was rewritten")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*migrate*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestMigrateErrorsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(legacyPool), 0o644)
	badSrc := "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata:\n  name: u\nspec:\n  amiFamily: Ubuntu\n  role: R\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n"
	os.WriteFile(bad, []byte(badSrc), 0o644)
	stdout, stderr, err := runIO("", "migrate", "-w", good, bad)
	if err == nil {
		t.Fatal("want an error")
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(stderr, bad+":6: error: amiFamily Ubuntu no longer exists") {
		t.Errorf("stderr %q", stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q", stdout)
	}
	if data, _ := os.ReadFile(good); string(data) != legacyPool {
		t.Errorf("good.yaml was written although another file failed")
	}
	// Without -w nothing is printed either.
	stdout, _, err = runIO("", "migrate", good, bad)
	if err == nil || stdout != "" {
		t.Errorf("err %v, stdout %q", err, stdout)
	}
}

func TestMigrateUsageAndIOErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"migrate", filepath.Join(dir, "missing.yaml")},
		{"migrate", dir},
		{"migrate", "-w"},
		{"migrate", "-w", "-"},
		{"migrate", "-", "-"},
		{"migrate", "--bogus"},
	} {
		_, _, err := runIO("", args...)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit code %d (%v), want 2", args, code, err)
		}
	}
}

func TestMigrateSeveralFilesToStdout(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte("x: 1"), 0o644) // no trailing newline
	os.WriteFile(b, []byte(plainFile), 0o644)
	stdout, _, err := runIO("", "migrate", a, b)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "x: 1\n---\n"+plainFile {
		t.Errorf("stdout %q", stdout)
	}
}

func TestHelpListsMigrate(t *testing.T) {
	out, err := run("help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "migrate") {
		t.Errorf("help lacks migrate:\n%s", out)
	}
}
