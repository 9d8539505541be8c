package disruption

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
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
	old := metav1.NewTime(time.Unix(0, 0))
	for i := range n {
		name, pid := fmt.Sprintf("node-%04d", i), fmt.Sprintf("aws:///us-east-1a/i-%017d", i)
		labels := map[string]string{karpv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: "m5.2xlarge",
			corev1.LabelTopologyZone: "us-east-1a", karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand, corev1.LabelHostname: name}
		for k, v := range m5.Labels {
			labels[k] = v
		}
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: pid},
			Status: corev1.NodeStatus{Allocatable: m5.Allocatable.ResourceList(), Capacity: m5.Capacity.ResourceList(),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
		claims = append(claims, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: karpv1.NodeClaimStatus{ProviderID: pid, NodeName: name,
				Conditions: []karpv1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: old}}}})
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
