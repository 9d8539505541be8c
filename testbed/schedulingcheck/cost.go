package schedulingcheck

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// The cost limit (karpool.dev/limit-per-hour) as docs/cost-governance.md defines it: a node or
// launched NodeClaim counts at the price of its offering; a NodeClaim that has not launched at
// the dearest offering, in the pool's zones and capacity types, of the instance types it lists.

// costLimit is the pool's cost limit, false when it has none; one that does not parse is 0 (the
// pool may launch nothing).
func costLimit(np *karpv1.NodePool) (float64, bool) {
	v, ok := np.Annotations[karpoolv1alpha1.AnnotationLimitPerHour]
	if !ok {
		return 0, false
	}
	limit, _ := karpoolv1alpha1.ParseLimitPerHour(v) // 0 when it does not parse
	return limit, true
}

// dearest is the dearest available offering of the type the pool allows (0 if none).
func (c *checker) dearest(np *karpv1.NodePool, it *catalog.InstanceType) float64 {
	worst := 0.0
	for _, o := range it.Offerings {
		if o.Available && c.poolAllows(np, it, o) {
			worst = max(worst, o.PricePerHour)
		}
	}
	return worst
}

// nodeCost is what a node or NodeClaim counts against its pool's cost limit.
func (c *checker) nodeCost(n *node, inFlight *karpv1.NodeClaim) float64 {
	p := c.pool(n.pool)
	if p == nil || p.NodePool == nil {
		return 0
	}
	if _, ok := costLimit(p.NodePool); !ok {
		return 0
	}
	if n.claim != nil {
		return c.optionsCost(p.NodePool, n.claim.InstanceTypes)
	}
	if o, ok := catalog.OfferingOf(p.InstanceTypes, n.obj.Labels); ok {
		return o.PricePerHour
	}
	if it := c.findType(n.pool, n.obj.Labels[keyType]); it != nil {
		return c.dearest(p.NodePool, it)
	}
	worst := 0.0
	if inFlight != nil && n.obj.Labels[keyType] == "" {
		for _, r := range inFlight.Spec.Requirements {
			if r.Key != keyType || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, name := range r.Values {
				if it := c.findType(n.pool, name); it != nil {
					worst = max(worst, c.dearest(p.NodePool, it))
				}
			}
		}
	}
	return worst
}

func (c *checker) optionsCost(np *karpv1.NodePool, opts []scheduling.InstanceTypeOption) float64 {
	worst := 0.0
	for _, o := range opts {
		worst = max(worst, c.dearest(np, o.Type))
	}
	return worst
}

// poolCost sums what the pool's nodes and NodeClaims count against its cost limit.
func (c *checker) poolCost(pool string) float64 {
	sum := 0.0
	for _, n := range c.order {
		if n.pool == pool {
			sum += n.cost
		}
	}
	return sum
}

// checkCostLimits: a pool with new NodeClaims stays within its cost limit, whichever option
// each of them launches as.
func (c *checker) checkCostLimits() {
	for i := range c.in.Pools {
		np := c.in.Pools[i].NodePool
		if np == nil {
			continue
		}
		limit, ok := costLimit(np)
		if !ok {
			continue
		}
		fresh := false
		for _, n := range c.order {
			fresh = fresh || n.pool == np.Name && n.claim != nil
		}
		limit = c.withSlack(np.Name, limit)
		if cost := c.poolCost(np.Name); fresh && cost > limit+1e-6 {
			c.fail("pool %s exceeds its cost limit: $%.6f/h > $%.6f/h", np.Name, cost, limit)
		}
	}
}

// withinCostLimit reports whether one more node of type it keeps the pool within its cost limit.
func (c *checker) withinCostLimit(np *karpv1.NodePool, it *catalog.InstanceType) bool {
	limit, ok := costLimit(np)
	return !ok || c.poolCost(np.Name)+c.dearest(np, it) <= c.withSlack(np.Name, limit)+1e-6
}

// withSlack raises the pool's cost limit to what its nodes and in-flight NodeClaims cost plus
// the slack a disruption frees (Options.CostLimitSlack), when that is more.
func (c *checker) withSlack(pool string, limit float64) float64 {
	slack := c.in.Options.CostLimitSlack[pool]
	if slack <= 0 {
		return limit
	}
	before := 0.0
	for _, n := range c.order {
		if n.pool == pool && n.claim == nil {
			before += n.cost
		}
	}
	return max(limit, before+slack)
}
