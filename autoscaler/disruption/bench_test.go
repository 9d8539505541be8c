package disruption

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/costbound"
	"github.com/karpool/karpool/autoscaler/provisioning"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// fragmented builds a cluster after a scale-down: n m5.2xlarge nodes of one WhenEmptyOrUnderutilized
// pool, each running podsPer pods of 200–700m cpu and 0.5–2 GiB (about a third of the node), and
// the pool's instance types from the embedded catalog (every type of us-east-1).
func fragmented(b *testing.B, n, podsPer int) (*state.Cluster, []scheduling.Pool) {
	b.Helper()
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		b.Fatal(err)
	}
	its := cat.InstanceTypes(catalog.NodeClassOptions{})
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter.Duration = ptr.To(time.Duration(0))
	var m5 *catalog.InstanceType
	for i := range its {
		if its[i].Name == "m5.2xlarge" {
			m5 = &its[i]
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var pods []*corev1.Pod
	var nodes []*corev1.Node
	var claims []*karpv1.NodeClaim
	for i := range n {
		node, nc := benchNode(m5, fmt.Sprintf("node-%04d", i), "us-east-1a", karpv1.CapacityTypeOnDemand)
		nodes, claims = append(nodes, node), append(claims, nc)
		name := node.Name
		for j := range podsPer {
			cpu := resource.NewMilliQuantity(int64(200+rng.IntN(500)), resource.DecimalSI)
			mem := resource.NewQuantity(int64(512+rng.IntN(1536))<<20, resource.BinarySI)
			pods = append(pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", name, j), UID: types.UID(fmt.Sprintf("%s-%d", name, j))},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *cpu, corev1.ResourceMemory: *mem}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
	}
	c := state.New(pods, nodes, claims)
	c.NodePools = []*karpv1.NodePool{np}
	return c, []scheduling.Pool{{NodePool: np, InstanceTypes: its}}
}

// benchNode is an initialized, Ready node of the instance type, and its NodeClaim.
func benchNode(it *catalog.InstanceType, name, zone, capacityType string) (*corev1.Node, *karpv1.NodeClaim) {
	pid := "aws:///" + zone + "/i-" + name
	labels := map[string]string{karpv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: it.Name,
		corev1.LabelTopologyZone: zone, karpv1.LabelCapacityType: capacityType, corev1.LabelHostname: name}
	for k, v := range it.Labels {
		labels[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable.ResourceList(), Capacity: it.Capacity.ResourceList(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: karpv1.NodeClaimStatus{ProviderID: pid, NodeName: name,
			Conditions: []karpv1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(0, 0))}}}}
	return node, nc
}

// BenchmarkConsolidationPass is one decision pass over 1,000 nodes and 10,000 pods: candidates,
// the multi-node search, single nodes if that finds nothing, and the candidates that could
// follow the decision (aheadOf), each simulation a full run of the scheduling engine. With a
// budget of every node the decision takes the 100 candidates one search looks at and none can
// follow; with 10 the decision takes 10 and the rest of the 100 are tried as followers.
func BenchmarkConsolidationPass(b *testing.B) {
	c, pools := fragmented(b, 1000, 10)
	prov := provisioning.New(nil, provisioning.Options{Region: "us-east-1"})
	simulate := func(nodes map[string]bool) *scheduling.Result { return prov.SimulateWithout(c, pools, nodes) }
	for _, budget := range []int{1000, 10} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			var cmd *Command
			var ahead []Candidate
			b.ReportAllocs()
			for b.Loop() {
				cands, _ := consolidationCandidates(c, nodePrice(pools), time.Now())
				cmd, _ = consolidate(cands, map[string]int{"default": budget}, rules{}, simulate)
				ahead = aheadOf(cmd, cands, rules{}, simulate)
			}
			if cmd == nil {
				b.Fatal("no consolidation found on a fragmented cluster")
			}
			b.ReportMetric(float64(len(cmd.Candidates)), "candidates")
			b.ReportMetric(float64(len(ahead)), "followers")
			b.ReportMetric((cmd.Price-cmd.NewPrice)/cmd.Price*100, "%saved")
		})
	}
}

// BenchmarkConsolidationSettles runs decision passes over the fragmented cluster until none is
// found, each decision carried out as the controller ends it (the candidates gone, their pods
// where the simulation put them, each replacement launched as its cheapest offering), and reports
// the passes, the nodes left and their cost against the lower bound of the pods. The pool offers
// the on-demand m5 sizes only, so that the bound (the LP over the same offerings) is one the
// nodes consolidation may choose can reach; over every type and spot it is a fraction of any
// packing of these pods onto whole nodes.
func BenchmarkConsolidationSettles(b *testing.B) {
	var passes, left int
	var cost, bound float64
	for b.Loop() {
		c, pools := fragmented(b, 1000, 10)
		pools[0].InstanceTypes = onDemandM5(pools[0].InstanceTypes)
		prov := provisioning.New(nil, provisioning.Options{Region: "us-east-1"})
		for passes = 0; passes < 100; passes++ {
			cands, _ := consolidationCandidates(c, nodePrice(pools), time.Now())
			simulate := func(nodes map[string]bool) *scheduling.Result { return prov.SimulateWithout(c, pools, nodes) }
			cmd, _ := consolidate(cands, map[string]int{"default": len(cands)}, rules{}, simulate)
			if cmd == nil {
				break
			}
			c = carryOut(c, cmd, simulate, passes)
		}
		left, cost = len(c.Nodes), 0
		for _, nc := range c.NodeClaims {
			p, _ := nodePrice(pools)(nc)
			cost += p
		}
		bound = lowerBound(b, c.Pods, pools[0].InstanceTypes)
	}
	b.ReportMetric(float64(passes), "passes")
	b.ReportMetric(float64(left), "nodes")
	b.ReportMetric(cost, "$/h")
	b.ReportMetric(cost/bound, "xbound")
}

// onDemandM5 keeps the m5 sizes (not metal) and their on-demand offerings.
func onDemandM5(its []catalog.InstanceType) []catalog.InstanceType {
	var out []catalog.InstanceType
	for _, it := range its {
		if !strings.HasPrefix(it.Name, "m5.") || strings.HasSuffix(it.Name, ".metal") {
			continue
		}
		var offs []catalog.Offering
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeOnDemand {
				offs = append(offs, o)
			}
		}
		it.Offerings = offs
		out = append(out, it)
	}
	return out
}

// carryOut applies a command to the cluster: its candidates go, their pods are bound where the
// simulation without them placed them, and each replacement becomes a node of its cheapest
// offering.
func carryOut(c *state.Cluster, cmd *Command, simulate func(map[string]bool) *scheduling.Result, pass int) *state.Cluster {
	gone := map[string]bool{}
	for _, cand := range cmd.Candidates {
		gone[cand.Node.Name] = true
	}
	res := simulate(gone)
	var nodes []*corev1.Node
	var claims []*karpv1.NodeClaim
	for _, n := range c.Nodes {
		if !gone[n.Name] {
			nodes = append(nodes, n)
		}
	}
	for _, nc := range c.NodeClaims {
		if !gone[nc.Status.NodeName] {
			claims = append(claims, nc)
		}
	}
	newNames := make([]string, len(cmd.Replacements))
	for i, rc := range cmd.Replacements {
		o := rc.InstanceTypes[0]
		off := o.Offerings[0] // the cheapest
		newNames[i] = fmt.Sprintf("new-%d-%d", pass, i)
		node, nc := benchNode(o.Type, newNames[i], off.Zone, off.CapacityType)
		nodes, claims = append(nodes, node), append(claims, nc)
	}
	moved := map[types.UID]string{}
	for _, bd := range res.Bindings {
		switch {
		case bd.NodeClaim >= 0 && bd.NodeClaim < len(newNames):
			moved[bd.Pod.UID] = newNames[bd.NodeClaim]
		case bd.NodeClaim < 0:
			moved[bd.Pod.UID] = bd.Node
		}
	}
	pods := make([]*corev1.Pod, 0, len(c.Pods))
	for _, p := range c.Pods {
		if to, ok := moved[p.UID]; ok && gone[p.Spec.NodeName] {
			p = p.DeepCopy()
			p.Spec.NodeName = to
		}
		pods = append(pods, p)
	}
	out := state.New(pods, nodes, claims)
	out.NodePools = c.NodePools
	return out
}

// lowerBound is the resource LP bound of the pods over the instance types' cheapest offerings.
func lowerBound(b *testing.B, pods []*corev1.Pod, its []catalog.InstanceType) float64 {
	b.Helper()
	p := costbound.Problem{}
	for _, it := range its {
		price := -1.0
		for _, o := range it.Offerings {
			if o.Available && (price < 0 || o.PricePerHour < price) {
				price = o.PricePerHour
			}
		}
		if price >= 0 {
			p.Types = append(p.Types, costbound.Type{Name: it.Name, Price: price, Allocatable: it.Allocatable, Capacity: it.Capacity})
		}
	}
	groups := map[catalog.Resources]int{}
	for _, pod := range pods {
		r, _ := scheduling.PodRequests(pod)
		groups[r]++
	}
	for r, n := range groups {
		p.Pods = append(p.Pods, costbound.PodGroup{Requests: r, Count: n})
	}
	res, err := costbound.Bound(p)
	if err != nil {
		b.Fatal(err)
	}
	return res.LowerBound
}
