// Package periodic runs a pass at a fixed interval until its context ends: the shape of the
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
	logger := log.FromContext(ctx).WithName(name)
	ctx = log.IntoContext(ctx, logger)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, name+" pass failed")
		}
	}
}
