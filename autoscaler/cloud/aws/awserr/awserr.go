// Package awserr classifies the errors of karpool's AWS code: the error code of an AWS API
// error, and the errors only a change of the EC2NodeClass can fix (ErrInvalidClass), which the
// class controller reports as a condition instead of retrying.
package awserr

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
)

// Code is the AWS error code of err ("NoSuchEntity", "InvalidParameterValue"), "" when it is
// not an AWS API error.
func Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// ErrInvalidClass is matched by errors that retrying cannot fix: the EC2NodeClass must change.
var ErrInvalidClass = errors.New("the EC2NodeClass cannot be resolved as it is")

// classError is an ErrInvalidClass that may also match a further sentinel.
type classError struct {
	msg  string
	also error
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Is(target error) bool {
	return target == ErrInvalidClass || (e.also != nil && target == e.also)
}

// Invalidf is an ErrInvalidClass with a message saying what to change.
func Invalidf(format string, args ...any) error {
	return &classError{msg: fmt.Sprintf(format, args...)}
}

// InvalidAlso is Invalidf that also matches the sentinel also.
func InvalidAlso(also error, format string, args ...any) error {
	return &classError{msg: fmt.Sprintf(format, args...), also: also}
}
