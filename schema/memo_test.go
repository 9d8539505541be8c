package schema_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
)

// TestMemoizedValidationAgrees: validating requirements, taints and budgets on their own (and
// remembering the outcome) gives exactly the findings of validating each document whole, on
// every document of the valid and invalid corpora, and on every pair of invalid documents of
// one kind merged into one stream.
func TestMemoizedValidationAgrees(t *testing.T) {
	whole, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	whole.Memoize = false
	memo, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range []string{"testdata/valid/*.yaml", "testdata/valid/*/*.yaml", "testdata/invalid/*/*.yaml"} {
		m, _ := filepath.Glob(p)
		files = append(files, m...)
	}
	compared := 0
	for _, f := range files {
		data := mustRead(t, f)
		// Twice through the memoizing schema: the second time answers from the cache.
		for pass := 0; pass < 2; pass++ {
			a, err := whole.ValidateFile(f, data, manifests.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			b, err := memo.ValidateFile(f, data, manifests.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Findings, b.Findings) {
				t.Errorf("%s (pass %d): whole document\n  %v\nelements on their own\n  %v", f, pass, a.Findings, b.Findings)
			}
			compared++
		}
	}
	if compared < 100 {
		t.Fatalf("compared only %d files", compared)
	}
}
