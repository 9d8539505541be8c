package disruption

import (
	"fmt"
	"time"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/internal/requirements"
)

// Drift reasons, as the NodeClaim's Drifted condition names them (Karpenter's).
const (
	DriftNodePool     = "NodePoolDrifted"
	DriftRequirements = "RequirementsDrifted"
	DriftNodeClass    = "NodeClassDrift"
)

// DriftOf says why a NodeClaim no longer matches its NodePool or EC2NodeClass ("" if it does):
// the template it was made from changed (the hash it was stamped with differs from the pool's,
// under the same hash version), one of its labels no longer meets the pool's requirements, or
// the class's static fields changed since the launch (class may be nil: not judged). Labels the
// NodeClaim does not carry are not judged.
func DriftOf(nc *karpv1.NodeClaim, np *karpv1.NodePool, class *awsv1.EC2NodeClass) (reason, message string) {
	if nc.Annotations[karpv1.AnnotationNodePoolHashVersion] == karpv1.NodePoolHashVersion &&
		nc.Annotations[karpv1.AnnotationNodePoolHash] != np.TemplateHash() {
		return DriftNodePool, fmt.Sprintf("NodePool %s's template changed since the NodeClaim was created", np.Name)
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		req := requirements.New(r.Key, r.Operator, r.Values)
		v, ok := nc.Labels[req.Key]
		if ok && !req.Matches(v, true) {
			return DriftRequirements, fmt.Sprintf("label %s=%s no longer meets NodePool %s's requirement %s", req.Key, v, np.Name, req.String())
		}
	}
	if class != nil && nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion &&
		nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != class.Hash() {
		return DriftNodeClass, fmt.Sprintf("EC2NodeClass %s changed since the instance was launched", class.Name)
	}
	return "", ""
}

// restamping gives a NodeClaim stamped under another hash version (or none) its pool's or
// class's current hash rather than drifting it, as Karpenter does when its hashing changes.
type restamping struct {
	nc  *karpv1.NodeClaim
	set map[string]string
}

// restamp lists the NodeClaims to re-stamp, with the annotations they get. The class's hash
// is stamped at launch, so only launched NodeClaims are re-stamped with it.
func restamp(c *state.Cluster) []restamping {
	var out []restamping
	for _, nc := range c.NodeClaims {
		np := poolOf(c, nc)
		if nc.DeletionTimestamp != nil || np == nil {
			continue
		}
		set := map[string]string{}
		if nc.Annotations[karpv1.AnnotationNodePoolHashVersion] != karpv1.NodePoolHashVersion {
			set[karpv1.AnnotationNodePoolHash], set[karpv1.AnnotationNodePoolHashVersion] = np.TemplateHash(), karpv1.NodePoolHashVersion
		}
		if class := classOf(c, nc); class != nil && nc.Status.ProviderID != "" &&
			nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
			set[awsv1.AnnotationEC2NodeClassHash], set[awsv1.AnnotationEC2NodeClassHashVersion] = class.Hash(), awsv1.EC2NodeClassHashVersion
		}
		if len(set) > 0 {
			out = append(out, restamping{nc, set})
		}
	}
	return out
}

// drifted returns the drifted NodeClaims of the snapshot with their reasons.
func drifted(c *state.Cluster) map[string]Verdict {
	out := map[string]Verdict{}
	for _, nc := range c.NodeClaims {
		np := poolOf(c, nc)
		if np == nil || nc.DeletionTimestamp != nil {
			continue
		}
		if reason, msg := DriftOf(nc, np, classOf(c, nc)); reason != "" {
			out[nc.Name] = Verdict{reason, msg}
		}
	}
	return out
}

// classOf is the EC2NodeClass the NodeClaim was made from, if it is in the snapshot.
func classOf(c *state.Cluster, nc *karpv1.NodeClaim) *awsv1.EC2NodeClass {
	if ref := nc.Spec.NodeClassRef; ref != nil {
		return c.NodeClasses[ref.Name]
	}
	return nil
}

func poolOf(c *state.Cluster, nc *karpv1.NodeClaim) *karpv1.NodePool {
	for _, np := range c.NodePools {
		if np.Name == nc.Labels[karpv1.LabelNodePool] {
			return np
		}
	}
	return nil
}

// driftCommand picks the first drifted node (in snapshot order) its pool's Drifted budget lets
// go and that may be disrupted now, and plans its pods onto the other nodes and, where they do
// not fit, new NodeClaims of the pool as it is now; drift replaces at any price. Verdicts say
// why drifted nodes wait.
func driftCommand(c *state.Cluster, drift map[string]Verdict, budget map[string]int, prices func(*karpv1.NodeClaim) (float64, bool),
	simulate func(nodes map[string]bool) *scheduling.Result, now time.Time) (*Command, map[string]Verdict) {
	waits := map[string]Verdict{}
	for _, nc := range c.NodeClaims {
		if _, ok := drift[nc.Name]; !ok {
			continue
		}
		np, node := poolOf(c, nc), c.NodeFor(nc)
		if node == nil {
			continue
		}
		pods := movingPods(c, node)
		v := notDisruptable(nc, node)
		if v.Reason == "" {
			v = podsHold(c, pods, now)
		}
		if v.Reason == "" && budget[np.Name] <= 0 {
			v = Verdict{"Budget", fmt.Sprintf("NodePool %s's disruption budgets allow no more nodes to be disrupted for Drifted now", np.Name)}
		}
		if v.Reason != "" {
			waits[nc.Name] = v
			continue
		}
		res := simulate(map[string]bool{node.Name: true})
		if len(res.Unschedulable) > 0 {
			u := res.Unschedulable[0]
			waits[nc.Name] = Verdict{"PodsDoNotFit", fmt.Sprintf("pod %s/%s would fit nowhere else: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)}
			continue
		}
		price, _ := prices(nc)
		return &Command{Candidates: []Candidate{{NodeClaim: nc, Node: node, Pool: np, Price: price, Pods: pods}},
			Replacements: res.NodeClaims, Reason: karpv1.DisruptionReasonDrifted, Method: "drift",
			Price: price, NewPrice: res.TotalPricePerHour()}, waits
	}
	return nil, waits
}
