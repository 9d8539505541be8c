package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("package p\n\ntype big struct{}\n\n")
	for i := 0; i < 4; i++ {
		src.WriteString("func (b *big) m" + string(rune('a'+i)) + "() {}\n")
	}
	src.WriteString("\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 8) + "}\n\nfunc short() {}\n")
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A test file is not checked.
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc (b *big) t1() {}\nfunc (b *big) t2() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Check(dir, 9, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0], "function long is 10 lines (at most 9)") || !strings.Contains(got[1], "type big has 4 methods (at most 3)") {
		t.Fatalf("got %q", got)
	}
	if got, _ := Check(dir, 10, 4); len(got) != 0 {
		t.Fatalf("within the limits: got %q", got)
	}
}

// TestEngineWithinLimits runs the check the Makefile's lint target runs.
func TestEngineWithinLimits(t *testing.T) {
	for _, dir := range []string{"../../autoscaler/scheduling", "../../autoscaler/costbound", "../../autoscaler/lp"} {
		got, err := Check(dir, 100, 30)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range got {
			t.Error(v)
		}
	}
}
