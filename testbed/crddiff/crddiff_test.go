package crddiff

import (
	"reflect"
	"testing"
)

func TestCompareIgnoresDescriptionsAndOrder(t *testing.T) {
	ref := map[string]any{"spec": map[string]any{
		"description": "upstream words",
		"rules": []any{
			map[string]any{"rule": "a", "message": "A"},
			map[string]any{"rule": "b", "message": "B"},
		},
		"default": "720h",
	}}
	ours := map[string]any{"spec": map[string]any{
		"description": "our words",
		"rules": []any{
			map[string]any{"rule": "b", "message": "B"},
			map[string]any{"rule": "a", "message": "A"},
		},
		"default": "720h",
	}}
	if d := Compare(ours, ref); len(d) != 0 {
		t.Fatalf("want no differences, got %v", d)
	}
}

func TestCompareReportsBothSides(t *testing.T) {
	ref := map[string]any{"spec": map[string]any{"default": "720h", "enum": []any{"a", "b"}}}
	ours := map[string]any{"spec": map[string]any{"default": "24h", "enum": []any{"a"}, "extra": true}}
	want := []string{
		"+ .default = 24h",
		"- .default = 720h",
		"- .enum[b] = b",
		"+ .extra = true",
	}
	if got := Compare(ours, ref); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
