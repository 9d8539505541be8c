package aws_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	cloudaws "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

// TestLaunchedNodesJoinE2E launches the workshop NodeClaim through the provider for each AMI
// family against a simulator with node bootstrap on the local control plane: the instance
// becomes a Ready Node whose labels, taints and allocatable are the NodeClaim's, read by the
// simulator from the user data karpool rendered for the family.
func TestLaunchedNodesJoinE2E(t *testing.T) {
	env := localenvtest.Env(t)
	// Kubernetes 1.32 is the last version with AL2 AMIs.
	srv, err := awssim.Start(awssim.Options{ClusterName: cluster, KubernetesVersion: "1.32", Kube: env.Config, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := srv.AWSConfig()
	must(t, func() error {
		_, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(nodeRole),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
		return err
	})
	p, err := cloudaws.New(cfg, cloudaws.Options{ClusterName: cluster})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ family, alias, osImage string }{
		{"al2023", "al2023@latest", "Amazon Linux 2023"},
		{"al2", "al2@latest", "Amazon Linux 2"},
		{"bottlerocket", "bottlerocket@latest", "Bottlerocket OS"},
	} {
		t.Run(tc.family, func(t *testing.T) {
			claim := workshopClaim("e2e-" + tc.family)
			claim.Labels["example.com/team"] = "blue"
			claim.Spec.Taints = []karpv1.Taint{{Key: "example.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
			claim.Spec.StartupTaints = []karpv1.Taint{{Key: "example.com/warming", Effect: corev1.TaintEffectNoExecute}}
			class := roleClass(tc.family, tc.alias)
			profile, err := p.EnsureInstanceProfile(ctx, class) // what the class controller records
			if err != nil {
				t.Fatal(err)
			}
			class.Status.InstanceProfile = profile
			got, err := p.Create(ctx, claim, class)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := p.Delete(context.Background(), got); err != nil {
					t.Errorf("terminating %s: %v", got.Status.ProviderID, err)
				}
			})
			node := waitReadyNode(ctx, t, kc, got.Status.ProviderID)

			if !strings.HasPrefix(node.Status.NodeInfo.OSImage, tc.osImage) {
				t.Errorf("OS image %q, want %s", node.Status.NodeInfo.OSImage, tc.osImage)
			}
			for k, v := range map[string]string{
				karpv1.LabelNodePool: "default", "example.com/team": "blue", karpv1.LabelCapacityType: "on-demand",
				"karpenter.k8s.aws/ec2nodeclass": tc.family, corev1.LabelInstanceTypeStable: got.Labels[corev1.LabelInstanceTypeStable],
				corev1.LabelTopologyZone: got.Labels[corev1.LabelTopologyZone], corev1.LabelArchStable: "amd64",
			} {
				if node.Labels[k] != v {
					t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
				}
			}
			var taints []string
			for _, tt := range node.Spec.Taints {
				taints = append(taints, tt.ToString())
			}
			for _, want := range []string{"example.com/dedicated=batch:NoSchedule", "example.com/warming:NoExecute", "karpenter.sh/unregistered:NoExecute"} {
				if !slices.Contains(taints, want) {
					t.Errorf("node taints %v lack %s", taints, want)
				}
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
				n, c := node.Status.Allocatable[r], got.Status.Allocatable[r]
				if n.Cmp(c) != 0 {
					t.Errorf("allocatable %s: node %s, NodeClaim %s", r, n.String(), c.String())
				}
			}
			if tc.family == "al2023" {
				alloc := node.Status.Allocatable
				cpu, mem, pods := alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory], alloc[corev1.ResourcePods]
				if got.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || cpu.String() != "1930m" || mem.String() != "6903Mi" || pods.String() != "29" {
					t.Errorf("%s allocatable %s / %s / %s pods, want m5.large 1930m / 6903Mi / 29", got.Labels[corev1.LabelInstanceTypeStable], cpu.String(), mem.String(), pods.String())
				}
			}
		})
	}
}

// waitReadyNode waits for the Ready Node with this provider ID.
func waitReadyNode(ctx context.Context, t *testing.T, kc kubernetes.Interface, providerID string) *corev1.Node {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "no node yet"
	for {
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range nodes.Items {
				n := &nodes.Items[i]
				if n.Spec.ProviderID != providerID {
					continue
				}
				last = fmt.Sprintf("%s conditions %+v", n.Name, n.Status.Conditions)
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						return n
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no Ready node with provider ID %s: %s", providerID, last)
			return nil
		case <-tick.C:
		}
	}
}
