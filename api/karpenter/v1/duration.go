package v1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Never is the serialized form of a NillableDuration that never elapses.
const Never = "Never"

// NillableDuration is a duration that may also be "Never". It is serialized as a Go duration
// string ("30s", "720h") or as the literal "Never"; a nil Duration stands for Never, which is also
// what the zero value means.
//
// +kubebuilder:validation:Type=string
type NillableDuration struct {
	// Duration is the length of time, or nil for Never.
	Duration *time.Duration `json:"-"`
}

// MarshalJSON writes "Never" when Duration is nil, else the duration without trailing zero units
// ("720h", "1m", "1h30m").
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.Duration == nil {
		return json.Marshal(Never)
	}
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return json.Marshal(s)
}

// UnmarshalJSON reads a duration string or "Never". A JSON null leaves the value unchanged.
func (d *NillableDuration) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	if s == Never {
		d.Duration = nil
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", s)
	}
	d.Duration = &v
	return nil
}
