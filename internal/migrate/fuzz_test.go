package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzMigrate feeds arbitrary bytes to the migrator: it must not panic, and whatever it converts
// without errors must be stable (migrating the output again changes nothing).
func FuzzMigrate(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(seedDir, "*", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, p := range append(paths, more...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("---\n---\n...\n"))
	f.Add([]byte("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x}\nspec: {provider: {}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip()
		}
		r := Files([]Input{{Name: "fuzz.yaml", Data: data}})
		if len(r.Outputs) != 1 {
			t.Fatalf("%d outputs", len(r.Outputs))
		}
		if r.Errors() > 0 || !r.Outputs[0].Changed {
			return
		}
		r2 := Files([]Input{{Name: "fuzz.yaml", Data: r.Outputs[0].Data}})
		if r2.Errors() > 0 {
			t.Fatalf("migrated output does not migrate again: %v\n%s", r2.Diagnostics, r.Outputs[0].Data)
		}
		if r2.Outputs[0].Changed {
			t.Fatalf("migration not idempotent:\n%s\n---- became ----\n%s", r.Outputs[0].Data, r2.Outputs[0].Data)
		}
	})
}

// Pathological inputs (alias bombs, deep nesting, many documents, huge scalars) are handled
// without expanding aliases: a Karpenter document using aliases is refused, others pass through.
func TestPathologicalInputs(t *testing.T) {
	bomb := "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
		"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
	cases := []struct {
		name, in string
		errors   int
	}{
		{"bomb", bomb, 0},
		{"bomb in a provisioner", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x}\n" + bomb, 1},
		{"bomb in a pod", "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations: {karpenter.sh/do-not-evict: 'true'}\n" + bomb, 0},
		{"deep sequence", strings.Repeat("[", 5000) + strings.Repeat("]", 5000), 0},
		{"deep mapping", strings.Repeat("a: {", 3000) + strings.Repeat("}", 3000), 0},
		{"many documents", strings.Repeat("---\na: 1\n", 20000), 0},
		{"long line", "a: " + strings.Repeat("x", 1<<20) + "\n", 0},
	}
	for _, c := range cases {
		r := Files([]Input{{Name: "in.yaml", Data: []byte(c.in)}})
		if got := r.Errors(); got != c.errors {
			t.Errorf("%s: %d errors, want %d: %v", c.name, got, c.errors, r.Diagnostics)
		}
	}
}
