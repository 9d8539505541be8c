package provisioning

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	"github.com/karpool/karpool/autoscaler/overlay"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// overlaid applies the cluster's NodeOverlays to the pools when the NodeOverlay gate is on. A
// failed list leaves the pools without overlays for this round (and says so in the log): the
// catalog's prices are a safe plan, a round without a plan is not.
func (p *Provisioner) overlaid(ctx context.Context, pools []scheduling.Pool) []scheduling.Pool {
	if !p.opts.NodeOverlay {
		return pools
	}
	var list v1alpha1.NodeOverlayList
	if err := p.client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeOverlays; planning with the catalog's prices this round")
		return pools
	}
	out, _ := overlay.Apply(list.Items, pools)
	return out
}

// OverlayVerdicts evaluates the cluster's NodeOverlays against the pools as a provisioning
// round sees them, for their status.
func (p *Provisioner) OverlayVerdicts(ctx context.Context, overlays []v1alpha1.NodeOverlay) ([]overlay.Verdict, error) {
	c, err := state.Take(ctx, p.client)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	pools, _ := p.basePools(ctx, c)
	_, verdicts := overlay.Apply(overlays, pools)
	return verdicts, nil
}
