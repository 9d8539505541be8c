package disruption

import (
	"time"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// expired returns the NodeClaims that have lived longer than their spec.expireAfter (copied
// from the NodePool's template at creation). Expiration is forceful, as in Karpenter v1: no
// budget, no do-not-disrupt and no replacement first; the NodeClaim's deletion drains the node
// within its terminationGracePeriod, and the provisioner finds room for the evicted pods.
func expired(c *state.Cluster, now time.Time) []*karpv1.NodeClaim {
	var out []*karpv1.NodeClaim
	for _, nc := range c.NodeClaims {
		if nc.DeletionTimestamp != nil || nc.Spec.ExpireAfter == nil || nc.Spec.ExpireAfter.Duration == nil {
			continue
		}
		if now.Sub(nc.CreationTimestamp.Time) >= *nc.Spec.ExpireAfter.Duration {
			out = append(out, nc)
		}
	}
	return out
}
