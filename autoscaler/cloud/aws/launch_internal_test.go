package aws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/testbed/awssim"
)

// The simulator answers a reused ClientToken with the first result whatever the request, so
// the lookup that handles AWS's IdempotentParameterMismatch is exercised directly.
func TestLaunchedEarlierFindsTheInstanceByNodeClaimTag(t *testing.T) {
	srv, err := awssim.Start(awssim.Options{ClusterName: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := srv.AWSConfig()
	ic := iam.NewFromConfig(cfg)
	if _, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("c1_node")}); err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, Options{ClusterName: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	d := map[string]string{"karpenter.sh/discovery": "c1"}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		SubnetSelectorTerms: []awsv1.SubnetSelectorTerm{{Tags: d}}, SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: d}},
		AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}, InstanceProfile: aws.String("c1_node")}}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "np-1", UID: "u1", Labels: map[string]string{karpv1.LabelNodePool: "np"}},
		Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large"}},
			{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}}}
	r := &resolved{}
	if _, err := p.launchedEarlier(ctx, claim, r); !errors.Is(err, cloud.ErrNotFound) {
		t.Fatalf("before any launch: want ErrNotFound, got %v", err)
	}
	got, err := p.Create(ctx, claim, class)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.launchedEarlier(ctx, claim, r)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ProviderID != got.Status.ProviderID || again.Labels[labelInstanceType] != "c5.large" ||
		again.Labels[karpv1.LabelCapacityType] != "on-demand" || again.Status.ImageID != got.Status.ImageID {
		t.Errorf("lookup %q %v, launch %q", again.Status.ProviderID, again.Labels, got.Status.ProviderID)
	}
}

func TestKubeletLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"team": true, "karpenter.sh/nodepool": true, "node.kubernetes.io/role": true, "example.kubelet.kubernetes.io/x": true,
		"kubernetes.io/hostname": false, "topology.kubernetes.io/zone": false, "k8s.io/x": false, "node-role.kubernetes.io/worker": false,
	} {
		if got := kubeletLabel(key); got != want {
			t.Errorf("kubeletLabel(%q) = %v, want %v", key, got, want)
		}
	}
}
