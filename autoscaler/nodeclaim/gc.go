package nodeclaim

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/internal/periodic"
)

// InstanceCollector is implemented by cloud providers that can find and terminate the
// instances no NodeClaim owns (the AWS provider: tagged for this cluster, no NodeClaim, older
// than its grace period). claims must be every NodeClaim of the cluster.
type InstanceCollector interface {
	GarbageCollect(ctx context.Context, claims []karpv1.NodeClaim, now time.Time) ([]string, error)
}

// GarbageCollector runs on the leader at a fixed interval. It deletes NodeClaims whose instance
// no longer exists (terminated by AWS or by hand), so their pods get new capacity, and asks the
// provider to terminate instances that have no NodeClaim (a launch whose NodeClaim was lost).
type GarbageCollector struct {
	client    client.Client
	reader    client.Reader
	opts      Options
	collector InstanceCollector
	interval  time.Duration
}

// NewGarbageCollector returns the collector. reader should read straight from the API server
// (the manager's APIReader): deciding that an instance has no NodeClaim from a lagging cache
// would terminate a node that was just launched. collector, when not nil, terminates the
// instances no NodeClaim owns (opts.Provider may be a wrapper that hides it).
func NewGarbageCollector(c client.Client, reader client.Reader, interval time.Duration, opts Options, collector InstanceCollector) *GarbageCollector {
	opts.defaults()
	if interval <= 0 {
		interval = time.Minute
	}
	return &GarbageCollector{client: c, reader: reader, opts: opts, collector: collector, interval: interval}
}

// vanishedAfter is how long a launched NodeClaim's instance must have been missing from the
// cloud before the NodeClaim is deleted: EC2's reads are eventually consistent right after a
// launch.
const vanishedAfter = 30 * time.Second

// Start collects until ctx ends.
func (g *GarbageCollector) Start(ctx context.Context) error {
	return periodic.Run(ctx, "garbagecollection", g.interval, g.Collect)
}

// Collect runs one pass.
func (g *GarbageCollector) Collect(ctx context.Context) error {
	logger := log.FromContext(ctx)
	var claims karpv1.NodeClaimList
	if err := g.reader.List(ctx, &claims); err != nil {
		return err
	}
	live, err := g.opts.Provider.List(ctx)
	if err != nil {
		return err
	}
	alive := map[string]bool{}
	for _, in := range live {
		alive[in.Status.ProviderID] = true
	}
	now := g.opts.Now()
	var errs []error
	for i := range claims.Items {
		nc := &claims.Items[i]
		if !state.Launched(nc) || nc.DeletionTimestamp != nil || alive[nc.Status.ProviderID] {
			continue
		}
		if c := state.Condition(nc, karpv1.ConditionTypeLaunched); c == nil || now.Sub(c.LastTransitionTime.Time) < vanishedAfter {
			continue
		}
		// List may lag; ask for this one instance before deleting anything.
		if _, err := g.opts.Provider.Get(ctx, nc.Status.ProviderID); !errors.Is(err, cloud.ErrNotFound) {
			continue
		}
		logger.Info("garbage collecting nodeclaim with no cloudprovider representation", "NodeClaim", klog.KRef("", nc.Name), "provider-id", nc.Status.ProviderID)
		if err := g.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	if g.collector != nil {
		ids, err := g.collector.GarbageCollect(ctx, claims.Items, now)
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range ids {
			logger.Info("garbage collected instance without nodeclaim", "instance", id)
		}
	}
	return errors.Join(errs...)
}

// NeedLeaderElection makes the collector run on the leader only.
func (g *GarbageCollector) NeedLeaderElection() bool { return true }
