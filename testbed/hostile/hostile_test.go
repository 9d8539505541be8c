package hostile

import (
	"os"
	"testing"
)

func TestCorpusCoversEveryClass(t *testing.T) {
	tr := NewTrap(t)
	cs, err := Cases(tr)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range cs {
		count[c.Class]++
		if c.Want.File == "" || c.Want.Message == "" {
			t.Errorf("%s: no expected error", c.Name)
		}
	}
	for _, class := range []string{"exec", "ssrf", "outside", "dos", "markdown", "iam", "yaml"} {
		if count[class] < 3 {
			t.Errorf("class %s has %d cases, want at least 3", class, count[class])
		}
	}
}

// TestTrapSprings: the trap sees what it is there to see.
func TestTrapSprings(t *testing.T) {
	tr := NewTrap(t)
	if _, err := os.ReadFile(tr.Outside); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	tr.Check(rec, "probe", "leaked "+tr.Secret)
	if rec.errors != 2 {
		t.Fatalf("%d errors, want the open and the printed secret", rec.errors)
	}
}

type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Helper()               {}
