package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// DriftInstanceTypeNotFound is Karpenter's drift reason for a NodeClaim whose instance type, or
// every offering of it in the NodeClaim's zone and capacity type, is no longer among its pool's
// instance types (the cloud stopped offering it, or the node class no longer allows it).
const DriftInstanceTypeNotFound = "InstanceTypeNotFound"

// typeDriftAge: NodeClaims younger than this are not judged (Karpenter's hour): a type missing
// from one listing is more often a passing gap than a withdrawal.
const typeDriftAge = time.Hour

// typeGone says why the NodeClaim's instance type or offering is gone from types ("" if it is
// still there). Availability does not count: an offering short of capacity still exists. A
// reserved node may also be matched by an on-demand offering (a reservation may end and the node
// be demoted to on-demand).
func typeGone(nc *karpv1.NodeClaim, types []catalog.InstanceType) string {
	name := nc.Labels[corev1.LabelInstanceTypeStable]
	zone, ct := nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.LabelCapacityType]
	for i := range types {
		if types[i].Name != name {
			continue
		}
		for _, o := range types[i].Offerings {
			if o.Zone == zone && (o.CapacityType == ct || ct == karpv1.CapacityTypeReserved && o.CapacityType == karpv1.CapacityTypeOnDemand) {
				return ""
			}
		}
		return fmt.Sprintf("instance type %s is no longer offered as %s in %s to its NodePool", name, ct, zone)
	}
	return fmt.Sprintf("instance type %s is no longer among its NodePool's instance types", name)
}

// judgeTypes records which NodeClaims' instance types went, for the NodeClaims older than
// typeDriftAge whose pool is among the pools (a pool whose node class is not ready lists no
// types and judges nothing). The record outlives the pass, so passes that do not list the
// pools (capacity being added) keep the verdicts.
func (c *Controller) judgeTypes(snap *state.Cluster, pools []scheduling.Pool, now time.Time) {
	types := map[string][]catalog.InstanceType{}
	for _, p := range pools {
		if len(p.InstanceTypes) > 0 {
			types[p.NodePool.Name] = p.InstanceTypes
		}
	}
	gone := map[string]Verdict{}
	for _, nc := range snap.NodeClaims {
		its, ok := types[nc.Labels[karpv1.LabelNodePool]]
		if !ok || !state.Launched(nc) || nc.DeletionTimestamp != nil || now.Sub(nc.CreationTimestamp.Time) < typeDriftAge {
			continue
		}
		if why := typeGone(nc, its); why != "" {
			gone[nc.Name] = Verdict{DriftInstanceTypeNotFound, why}
		}
	}
	c.typesGone = gone
}

// addTypeDrift adds the recorded instance-type drift of the NodeClaims not drifted otherwise.
func (c *Controller) addTypeDrift(snap *state.Cluster, drift map[string]Verdict) {
	for _, nc := range snap.NodeClaims {
		if v, ok := c.typesGone[nc.Name]; ok && nc.DeletionTimestamp == nil {
			if _, done := drift[nc.Name]; !done {
				drift[nc.Name] = v
			}
		}
	}
}
