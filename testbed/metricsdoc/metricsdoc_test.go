package metricsdoc

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseExpandsLabelSets(t *testing.T) {
	page := "| metric | type | labels |\n| `a_total` | counter | `z`, *set* | x |\n| `b` | gauge | | y |\n\n| *set* | `m`, `b` |\n"
	got, err := Parse("page.md", []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Metric{
		"a_total": {Name: "a_total", Type: "counter", Labels: []string{"b", "m", "z"}},
		"b":       {Name: "b", Type: "gauge", Labels: []string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseErrorsSayWhere(t *testing.T) {
	for page, want := range map[string]string{
		"intro\n| `a` | gauge | *nodes* | x |\n":         "page.md:2: a names the label set *nodes*",
		"| `a` | gauge | | x |\n| `a` | gauge | | x |\n": "page.md:2: a is listed twice",
		"no table here\n": "page.md: no metrics table",
	} {
		_, err := Parse("page.md", []byte(page))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", page, err, want)
		}
	}
}
