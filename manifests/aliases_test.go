package manifests

import (
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

func parse(t *testing.T, s string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

func TestAdded(t *testing.T) {
	// Ten levels of ten aliases each: 10^9 nodes once expanded, from a few hundred bytes.
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat("*l"+string(rune('0'+i-1))+", ", 9) + "*l" + string(rune('0'+i-1)) + "]\n")
	}
	for _, c := range []struct {
		name, doc string
		over      bool
		line      int
	}{
		{"plain", "a: [1, 2, 3]\nb: {c: d}\n", false, 0},
		{"large without aliases", "a: [" + strings.Repeat("x, ", 2*MaxAliasNodes) + "x]\n", false, 0},
		{"a few aliases", "a: &a [1, 2]\nb: *a\nc: *a\n", false, 2},
		// 12,222 nodes behind each alias of line 5: ten of them pass the cap.
		{"bomb", b.String(), true, 5},
	} {
		n, worst := AliasesAdded(parse(t, c.doc), MaxAliasNodes)
		if (n > MaxAliasNodes) != c.over {
			t.Errorf("%s: %d nodes added, over the cap %v, want %v", c.name, n, n > MaxAliasNodes, c.over)
		}
		if c.line > 0 && (worst == nil || worst.Line != c.line) {
			t.Errorf("%s: worst alias %+v, want one at line %d", c.name, worst, c.line)
		}
	}
}
