package disruption

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
)

// drifter answers from a table and counts the questions.
type drifter struct {
	answer map[string]cloud.DriftReason
	asked  int
}

func (d *drifter) IsDrifted(_ context.Context, nc *karpv1.NodeClaim, _ *awsv1.EC2NodeClass) (cloud.DriftReason, error) {
	d.asked++
	return d.answer[nc.Name], nil
}

// The cloud is asked once per NodeClaim and class resolution: again only when the class
// resolves to other AMIs, subnets or security groups.
func TestCloudDriftAsksOncePerResolution(t *testing.T) {
	c := newCluster(nil, "a", "b")
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.AMIs = []awsv1.AMI{{ID: "ami-1"}}
	for _, nc := range c.claims {
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	}
	d := &drifter{answer: map[string]cloud.DriftReason{}}
	ctl := New(nil, Options{Drift: d})
	pass := func() map[string]Verdict {
		snap := c.snapshot()
		snap.NodeClasses[class.Name] = class
		drift := map[string]Verdict{}
		ctl.addCloudDrift(context.Background(), snap, drift)
		return drift
	}
	if got := pass(); len(got) != 0 || d.asked != 2 {
		t.Fatalf("first pass: drifted %v after %d questions, want none after 2", got, d.asked)
	}
	if pass(); d.asked != 2 {
		t.Errorf("an unchanged class was asked about again (%d questions)", d.asked)
	}
	class.Status.AMIs = []awsv1.AMI{{ID: "ami-2"}}
	d.answer["a"] = cloud.DriftAMI
	got := pass()
	if d.asked != 4 || got["a"].Reason != string(cloud.DriftAMI) || len(got) != 1 {
		t.Errorf("after the AMI changed: drifted %+v after %d questions, want a: AMIDrift after 4", got, d.asked)
	}
	c.claims = c.claims[:1]
	pass()
	if _, kept := ctl.clouds["b"]; kept {
		t.Error("the answer for a NodeClaim that is gone was kept")
	}
}

// A pass asks about at most maxCloudChecks NodeClaims; the next pass asks about the rest.
func TestCloudDriftSpreadsItsQuestions(t *testing.T) {
	names := make([]string, maxCloudChecks+10)
	for i := range names {
		names[i] = fmt.Sprintf("n%03d", i)
	}
	c := newCluster(nil, names...)
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	for _, nc := range c.claims {
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	}
	d := &drifter{answer: map[string]cloud.DriftReason{names[len(names)-1]: cloud.DriftSubnet}}
	ctl := New(nil, Options{Drift: d})
	snap := c.snapshot()
	snap.NodeClasses[class.Name] = class
	drift := map[string]Verdict{}
	ctl.addCloudDrift(context.Background(), snap, drift)
	if d.asked != maxCloudChecks || len(drift) != 0 {
		t.Fatalf("first pass: %d questions, drifted %v; want %d questions", d.asked, drift, maxCloudChecks)
	}
	ctl.addCloudDrift(context.Background(), snap, drift)
	if d.asked != len(names) || drift[names[len(names)-1]].Reason != string(cloud.DriftSubnet) {
		t.Errorf("second pass: %d questions in all, drifted %v; want %d and the last one drifted", d.asked, drift, len(names))
	}
}
