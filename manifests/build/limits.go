package build

import (
	"context"

	"github.com/karpool/karpool/manifests/build/confined"
)

type limitsKey struct{}

// WithLimits returns a context whose builds are bounded by l (unset fields keep their
// defaults, confined.Defaults). A build's deadline is the sooner of l.Timeout and ctx's.
func WithLimits(ctx context.Context, l confined.Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l.WithDefaults())
}

// limitsOf returns the bounds of the builds made with ctx.
func limitsOf(ctx context.Context) confined.Limits {
	if l, ok := ctx.Value(limitsKey{}).(confined.Limits); ok {
		return l
	}
	return confined.Defaults
}
