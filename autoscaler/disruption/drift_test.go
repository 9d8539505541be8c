package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// A NodeClaim stamped with its pool's hash drifts when the template changes, and when one of its
// labels leaves the pool's requirements; one stamped under another hash version is re-stamped,
// not drifted.
func TestDrift(t *testing.T) {
	c := newCluster(nil, "current", "old-template", "other-version", "wrong-type")
	stamp := func(nc *karpv1.NodeClaim, hash, version string) {
		nc.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: hash, karpv1.AnnotationNodePoolHashVersion: version}
	}
	hash := c.pool.TemplateHash()
	stamp(c.claims[0], hash, karpv1.NodePoolHashVersion)
	stamp(c.claims[1], "12345", karpv1.NodePoolHashVersion)
	stamp(c.claims[2], "12345", "v3")
	stamp(c.claims[3], hash, karpv1.NodePoolHashVersion)
	c.pool.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}}
	c.claims[0].Labels[corev1.LabelInstanceTypeStable] = "m5.large"
	c.claims[3].Labels[corev1.LabelInstanceTypeStable] = "c5.large"
	snap := c.snapshot()
	got := drifted(snap)
	if len(got) != 2 || got["old-template"].Reason != DriftNodePool || got["wrong-type"].Reason != DriftRequirements {
		t.Errorf("drifted %+v, want old-template: %s, wrong-type: %s", got, DriftNodePool, DriftRequirements)
	}
	if re := restamp(snap); len(re) != 1 || re[0].nc.Name != "other-version" || re[0].set[karpv1.AnnotationNodePoolHash] != hash {
		t.Errorf("re-stamped %+v, want other-version with the pool's hash", re)
	}
	c.pool.Spec.Template.Labels = map[string]string{"team": "a"}
	if c.pool.TemplateHash() == hash {
		t.Error("a template label did not change the hash")
	}
}

// A NodeClaim launched from an EC2NodeClass drifts when the class's static fields change; one
// launched before karpool stamped class hashes (or under another version) is re-stamped.
func TestNodeClassDrift(t *testing.T) {
	c := newCluster(nil, "stamped", "unstamped")
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{Role: "node-role"}}
	launchedHash := class.Hash()
	for _, nc := range c.claims {
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		nc.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: c.pool.TemplateHash(), karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion}
	}
	c.claims[0].Annotations[awsv1.AnnotationEC2NodeClassHash] = launchedHash
	c.claims[0].Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	snapshot := func() *state.Cluster {
		s := c.snapshot()
		s.NodeClasses[class.Name] = class
		return s
	}
	if got := drifted(snapshot()); len(got) != 0 {
		t.Errorf("drifted %+v before any change, want none", got)
	}
	if re := restamp(snapshot()); len(re) != 1 || re[0].nc.Name != "unstamped" || re[0].set[awsv1.AnnotationEC2NodeClassHash] != launchedHash {
		t.Errorf("re-stamped %+v, want unstamped with the class's hash", re)
	}
	class.Spec.UserData = ptr.To("echo hi")
	if got := drifted(snapshot()); len(got) != 1 || got["stamped"].Reason != DriftNodeClass {
		t.Errorf("after a user data change, drifted %+v, want stamped: %s", got, DriftNodeClass)
	}
}

// Drift replaces one node at a time within the Drifted budget, skipping nodes that opt out.
func TestDriftCommand(t *testing.T) {
	c := newCluster(nil, "pinned", "a", "b")
	c.node("pinned").Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	c.run("a", "web")
	drift := map[string]Verdict{"pinned": {DriftNodePool, ""}, "a": {DriftNodePool, ""}, "b": {DriftNodePool, ""}}
	price := func(*karpv1.NodeClaim) (float64, bool) { return 0.1, true }
	var simulated []string
	sim := func(nodes map[string]bool) *scheduling.Result {
		simulated = append(simulated, key(nodes))
		return &scheduling.Result{NodeClaims: []scheduling.NodeClaim{claim(0.2)}}
	}
	cmd, _ := driftCommand(c.snapshot(), drift, map[string]int{"default": 1}, price, sim, time.Now())
	if cmd == nil || cmd.Key() != "a" || cmd.Reason != karpv1.DisruptionReasonDrifted || len(cmd.Replacements) != 1 {
		t.Fatalf("command %+v (simulated %v), want a replaced", cmd, simulated)
	}
	if cmd, waits := driftCommand(c.snapshot(), map[string]Verdict{"pinned": {DriftNodePool, ""}}, map[string]int{"default": 1}, price, sim, time.Now()); cmd != nil || waits["pinned"].Reason != "DoNotDisrupt" {
		t.Errorf("pinned alone: %+v, %+v; want no command, DoNotDisrupt", cmd, waits["pinned"])
	}
	if cmd, waits := driftCommand(c.snapshot(), drift, map[string]int{"default": 0}, price, sim, time.Now()); cmd != nil || waits["a"].Reason != "Budget" {
		t.Errorf("with no budget: %+v, %+v; want no command, a waiting on Budget", cmd, waits)
	}
}
