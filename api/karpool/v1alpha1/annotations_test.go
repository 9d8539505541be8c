package v1alpha1

import (
	"strings"
	"testing"
)

func TestParseLimitPerHour(t *testing.T) {
	for in, want := range map[string]float64{"25": 25, "25.50": 25.5, "$25.50/h": 25.5, "$0": 0, "0.000001/h": 0.000001} {
		got, err := ParseLimitPerHour(in)
		if err != nil || got != want {
			t.Errorf("ParseLimitPerHour(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "25$", "1e3", "NaN", "Inf", "25 /h", "25/hour", " 25", "1234567890", "0.1234567", "$", "/h", "25,5"} {
		_, err := ParseLimitPerHour(in)
		if err == nil || !strings.Contains(err.Error(), AnnotationLimitPerHour) || !strings.Contains(err.Error(), "25.50") {
			t.Errorf("ParseLimitPerHour(%q): want an error naming the annotation and the form, got %v", in, err)
		}
	}
}

func FuzzParseLimitPerHour(f *testing.F) {
	for _, s := range []string{"25", "$25.50/h", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseLimitPerHour(s)
		if err == nil && !(v >= 0 && v < 1e10) {
			t.Fatalf("ParseLimitPerHour(%q) = %v: outside [0, 1e10)", s, v)
		}
	})
}
