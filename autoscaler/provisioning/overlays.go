package provisioning

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
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

// Overlaid prices one pool's instance types as a provisioning round does (for its status).
func (p *Provisioner) Overlaid(ctx context.Context, np *karpv1.NodePool, its []catalog.InstanceType) []catalog.InstanceType {
	return p.overlaid(ctx, []scheduling.Pool{{NodePool: np, InstanceTypes: its}})[0].InstanceTypes
}

// OverlayVerdicts evaluates the cluster's NodeOverlays against the pools as a provisioning
// round sees them, for their status.
func (p *Provisioner) OverlayVerdicts(ctx context.Context, overlays []v1alpha1.NodeOverlay) ([]overlay.Verdict, error) {
	// Only the pools and their classes matter: no pods, nodes or claims are listed.
	var pools karpv1.NodePoolList
	var classes awsv1.EC2NodeClassList
	for _, l := range []client.ObjectList{&pools, &classes} {
		if err := p.client.List(ctx, l); err != nil {
			return nil, fmt.Errorf("reading the cluster: %w", err)
		}
	}
	c := &state.Cluster{NodePools: state.Pointers(pools.Items), NodeClasses: map[string]*awsv1.EC2NodeClass{}}
	for i := range classes.Items {
		c.NodeClasses[classes.Items[i].Name] = &classes.Items[i]
	}
	base, _ := p.basePools(ctx, c)
	_, verdicts := overlay.Apply(overlays, base)
	return verdicts, nil
}
