// Package must shortens tests that make many calls returning a value and an error:
// must.Of(c.Op(ctx, in)).OK(t) is the value, or the test stops on the error.
package must

import "testing"

// Result is a call's value and error.
type Result[T any] struct {
	v   T
	err error
}

// Of holds a call's results.
func Of[T any](v T, err error) Result[T] { return Result[T]{v, err} }

// OK is the value; the test fails now when the call failed.
func (r Result[T]) OK(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// Err is the call's error (the value is dropped).
func (r Result[T]) Err() error { return r.err }
