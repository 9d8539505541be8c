package awserr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

func TestClassification(t *testing.T) {
	api := fmt.Errorf("creating: %w", &smithy.GenericAPIError{Code: "NoSuchEntity", Message: "no role"})
	if Code(api) != "NoSuchEntity" || Code(errors.New("plain")) != "" || Code(nil) != "" {
		t.Errorf("Code: %q %q", Code(api), Code(errors.New("plain")))
	}
	other := errors.New("sentinel")
	err := fmt.Errorf("class x: %w", InvalidAlso(other, "spec.role %q is missing", "R"))
	if !errors.Is(err, ErrInvalidClass) || !errors.Is(err, other) || err.Error() != `class x: spec.role "R" is missing` {
		t.Errorf("InvalidAlso: %v", err)
	}
	if plain := Invalidf("x"); !errors.Is(plain, ErrInvalidClass) || errors.Is(plain, other) {
		t.Errorf("Invalidf matches %v", plain)
	}
}
