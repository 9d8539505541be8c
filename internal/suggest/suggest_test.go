package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"apiVersion", "kind", "patches", "resources"}
	cases := []struct{ in, want string }{
		{"resources", "resources"},
		{"Resources", "resources"}, // case only
		{"resource", "resources"},  // one edit
		{"pathces", "patches"},     // two edits
		{"patchesJson6902x", ""},   // too far
		{"", ""},
	}
	for _, c := range cases {
		if got := Closest(c.in, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "abc", 3}, {"kitten", "sitting", 3}, {"same", "same", 0}, {"ab", "ba", 2}} {
		if got := distance(c.a, c.b); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
