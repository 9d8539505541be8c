package awssim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

const bottlerocketUserData = `[settings.kubernetes]
cluster-name = 'karpool'
api-server = 'https://127.0.0.1'

[settings.kubernetes.node-labels]
'karpenter.sh/nodepool' = 'arm'

[settings.kubernetes.node-taints]
'example.com/arch' = ['arm64:NoSchedule']
`

// waitNode waits for the Node of an instance to satisfy ok.
func waitNode(ctx context.Context, t *testing.T, kc kubernetes.Interface, name string, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var last *corev1.Node
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = n
			if ok(n) {
				return n
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s never became as expected; last seen: %+v", name, last)
			return nil
		case <-tick.C:
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestNodeBootstrapE2E launches instances through the real SDK against a simulator wired to the
// local control plane: each becomes a Ready kwok Node with the labels and taints of its user data
// and the catalog's allocatable, and its Node goes away when the instance terminates.
func TestNodeBootstrapE2E(t *testing.T) {
	env := localenvtest.Env(t)
	srv, cfg := newSim(t, awssim.Options{Kube: env.Config})
	ctx := testCtx(t, 3*time.Minute)
	kc, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := ec2.NewFromConfig(cfg)
	profile := nodeRole(t, cfg)
	subnets, sg := discovered(t, c)
	lt := createLT(t, c, "karpool-e2e", al2023AMI(t, cfg, "x86_64"), sg, profile)

	// CreateFleet with AL2023 user data.
	out := try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets, "m5.large")))).OK(t)
	if len(out.Instances) != 1 {
		t.Fatalf("fleet: %+v %+v", out.Instances, out.Errors)
	}
	id := out.Instances[0].InstanceIds[0]
	inst := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).OK(t).Reservations[0].Instances[0]
	name := aws.ToString(inst.PrivateDnsName)
	node := waitNode(ctx, t, kc, name, ready)
	if node.Spec.ProviderID != fmt.Sprintf("aws:///%s/%s", aws.ToString(inst.Placement.AvailabilityZone), id) {
		t.Errorf("providerID %s", node.Spec.ProviderID)
	}
	for k, v := range map[string]string{"karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "default", "team": "blue",
		"node.kubernetes.io/instance-type": "m5.large", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
		"topology.kubernetes.io/zone": aws.ToString(inst.Placement.AvailabilityZone), "topology.kubernetes.io/region": "us-east-1",
		"kubernetes.io/hostname": name} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	wantTaint := corev1.Taint{Key: "example.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	found := false
	for _, tt := range node.Spec.Taints {
		found = found || (tt.Key == wantTaint.Key && tt.Value == wantTaint.Value && tt.Effect == wantTaint.Effect)
	}
	if !found {
		t.Errorf("taints %+v, want %+v", node.Spec.Taints, wantTaint)
	}
	alloc := node.Status.Allocatable
	cpu, mem, pods := alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory], alloc[corev1.ResourcePods]
	if cpu.String() != "1930m" || mem.String() != "6903Mi" || pods.String() != "29" {
		t.Errorf("m5.large allocatable %s / %s / %s pods, want 1930m / 6903Mi / 29", cpu.String(), mem.String(), pods.String())
	}

	// RunInstances with Bottlerocket user data on arm64.
	br := aws.ToString(try(ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.36/arm64/latest/image_id")})).OK(t).Parameter.Value)
	run := try(c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m6g.large",
		ImageId: aws.String(br), SubnetId: subnets[2].SubnetId, UserData: b64(bottlerocketUserData)})).OK(t)
	brName := aws.ToString(run.Instances[0].PrivateDnsName)
	brNode := waitNode(ctx, t, kc, brName, ready)
	if brNode.Labels["karpenter.sh/nodepool"] != "arm" || brNode.Labels["kubernetes.io/arch"] != "arm64" || len(brNode.Spec.Taints) == 0 {
		t.Errorf("bottlerocket node %v %v", brNode.Labels, brNode.Spec.Taints)
	}

	// Termination removes the Node.
	try(c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id, aws.ToString(run.Instances[0].InstanceId)}})).OK(t)
	for _, n := range []string{name, brName} {
		eventually(t, 30*time.Second, "node "+n+" deleted after its instance terminated", func() bool {
			_, err := kc.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
	if !strings.HasPrefix(name, "ip-10-0-") || srv.State().Instances[0].State != "terminated" {
		t.Errorf("state %+v", srv.State().Instances)
	}
}
