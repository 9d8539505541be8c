// Package periodic runs a pass again and again until its context ends: the shape of the
// autoscaler's background loops (garbage collection, disruption).
package periodic

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Run calls pass every interval until ctx ends, with a logger named name in its context. A
// failed pass is logged and the next one runs on time.
func Run(ctx context.Context, name string, interval time.Duration, pass func(context.Context) error) error {
	return Paced(ctx, name, interval, func(ctx context.Context) (time.Duration, error) {
		return interval, pass(ctx)
	})
}

// Paced calls pass until ctx ends, first after the pause first and then each time after the
// pause the previous pass asked for, so a loop can look again soon while work it started is
// in motion and rest otherwise. A failed pass is logged and keeps its pause.
func Paced(ctx context.Context, name string, first time.Duration, pass func(context.Context) (time.Duration, error)) error {
	logger := log.FromContext(ctx).WithName(name)
	ctx = log.IntoContext(ctx, logger)
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		pause, err := pass(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, name+" pass failed")
		}
		timer.Reset(pause)
	}
}
