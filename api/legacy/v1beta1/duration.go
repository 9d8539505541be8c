package v1beta1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// neverLiteral is the word v1beta1 accepts in place of a duration to switch a timer off.
const neverLiteral = "Never"

// NillableDuration is a v1beta1 duration field that may also hold the word "Never"
// (disruption.expireAfter and disruption.consolidateAfter). In a manifest it is always a string
// such as "720h", "30s" or "Never".
//
// Fields of this type are pointers in the structs below: nil means the field was not written.
type NillableDuration struct {
	// Never is true when the manifest said "Never"; Duration is then zero and meaningless.
	Never bool
	// Duration is the parsed value when Never is false.
	Duration time.Duration
}

// UnmarshalJSON accepts "Never" or any string time.ParseDuration understands; negative values
// and non-string JSON are rejected.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\", \"720h\" or %q: %w", neverLiteral, err)
	}
	if s == neverLiteral {
		*d = NillableDuration{Never: true}
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	*d = NillableDuration{Duration: v}
	return nil
}

// MarshalJSON writes the value back as a string, "Never" or a compact duration like "720h".
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// String returns "Never" or the duration without redundant zero units ("720h", "1h30m", "45s").
func (d NillableDuration) String() string {
	if d.Never {
		return neverLiteral
	}
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
