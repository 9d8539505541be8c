package operator_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpool/karpool/internal/migrate"
	"github.com/karpool/karpool/testbed/awssim"
)

// migrated runs `karpool migrate` on a seed file and applies the listed text substitutions
// (the seeds' own cluster names, AMI ids and zones, which do not exist in the simulated
// account).
func migrated(t testing.TB, file string, replace ...string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := migrate.Bytes(file, data)
	if err != nil {
		t.Fatalf("migrate %s: %v", file, err)
	}
	text := strings.NewReplacer(replace...).Replace(string(out))
	return writeManifest(t, "migrated.yaml", text)
}

// al2AMI is the simulator's recommended EKS AL2 image for Kubernetes 1.32.
func al2AMI(t testing.TB, h *harness) string {
	t.Helper()
	out, err := ssm.NewFromConfig(h.sim.AWSConfig()).GetParameter(context.Background(), &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Parameter.Value)
}

// TestWeaselSpot is seed 004 after migration: a spot-only t3.medium pool (AL2) and three
// pending pods get one t3.medium spot node with 1930m / 3246Mi / 17 pods allocatable.
func TestWeaselSpot(t *testing.T) {
	// AL2 images exist up to Kubernetes 1.32.
	h := newHarnessWith(t, awssim.Options{KubernetesVersion: "1.32"})
	h.cfg.KubernetesVersion = "1.32"
	h.startController()
	ns := h.namespace("weasel")
	pools := migrated(t, repoFile("examples", "seeds", "004-weasel", "nodepool-ec2nodeclass.yaml"),
		"weasel-eks", clusterName, "ami-09c00c2e93ce7bd23", al2AMI(t, h))
	h.apply("", pools)
	h.apply(ns, writeManifest(t, "pods.yaml", strings.Replace(deployment("app", 3, "430m", "870Mi", ""), "namespace: default", "namespace: "+ns, 1)))
	h.runningPods(ns, "app", 3, 3*time.Minute)
	nodes := h.karpenterNodes()
	if len(nodes) != 1 {
		t.Fatalf("want 1 node, got %d", len(nodes))
	}
	n := nodes[0]
	if n.Labels[corev1.LabelInstanceTypeStable] != "t3.medium" || n.Labels["karpenter.sh/capacity-type"] != "spot" {
		t.Errorf("node is %s %s, want t3.medium spot", n.Labels[corev1.LabelInstanceTypeStable], n.Labels["karpenter.sh/capacity-type"])
	}
	for name, want := range map[corev1.ResourceName]string{"cpu": "1930m", "memory": "3246Mi", "pods": "17"} {
		if got := n.Status.Allocatable[name]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
		}
	}
}

// TestSpotAndDedicated is seed 000 after migration: inflate1 (nodeSelector spot) runs only on
// spot nodes of provisioner1; inflate2 (nodeType=cpu-node + toleration) runs only on c5.xlarge
// on-demand nodes of provisioner2 in its zone, three 1-cpu pods per node, so two nodes.
func TestSpotAndDedicated(t *testing.T) {
	h := newHarnessWith(t, awssim.Options{KubernetesVersion: "1.32"})
	h.cfg.KubernetesVersion = "1.32"
	h.startController()
	ns := h.namespace("karpenter-inflate")
	subst := []string{"${EKSCLUSTER_NAME}", clusterName, "ap-northeast-1a", "us-east-1a"}
	seed := func(f string) string { return repoFile("examples", "seeds", "000-spot-dedicated", f) }
	h.apply("", migrated(t, seed("karpenter-provisioner1.yaml"), subst...))
	h.apply("", migrated(t, seed("karpenter-provisioner2.yaml"), subst...))
	h.apply(ns, seed("karpenter-inflate1.yaml"), seed("karpenter-inflate2.yaml"))
	h.scale(ns, "inflate1", 5)
	h.scale(ns, "inflate2", 5)
	pods1 := h.runningPods(ns, "inflate1", 5, 3*time.Minute)
	pods2 := h.runningPods(ns, "inflate2", 5, 3*time.Minute)
	byName := map[string]corev1.Node{}
	for _, n := range h.karpenterNodes() {
		byName[n.Name] = n
	}
	for _, p := range pods1 {
		n := byName[p.Spec.NodeName]
		if n.Labels["karpenter.sh/capacity-type"] != "spot" || n.Labels["karpenter.sh/nodepool"] != "provisioner1" {
			t.Errorf("inflate1 pod %s on %s (%s, pool %s), want a spot node of provisioner1", p.Name, n.Name, n.Labels["karpenter.sh/capacity-type"], n.Labels["karpenter.sh/nodepool"])
		}
	}
	dedicated := map[string]bool{}
	for _, p := range pods2 {
		n := byName[p.Spec.NodeName]
		dedicated[n.Name] = true
		if n.Labels[corev1.LabelInstanceTypeStable] != "c5.xlarge" || n.Labels["karpenter.sh/capacity-type"] != "on-demand" || n.Labels[corev1.LabelTopologyZone] != "us-east-1a" {
			t.Errorf("inflate2 pod %s on %s (%s %s %s), want c5.xlarge on-demand in us-east-1a", p.Name, n.Name,
				n.Labels[corev1.LabelInstanceTypeStable], n.Labels["karpenter.sh/capacity-type"], n.Labels[corev1.LabelTopologyZone])
		}
	}
	if len(dedicated) != 2 {
		t.Errorf("inflate2 runs on %d nodes, want 2 (three 1-cpu pods per 3920m c5.xlarge)", len(dedicated))
	}
	for _, n := range byName {
		if n.Labels["karpenter.sh/nodepool"] == "provisioner2" && !dedicated[n.Name] {
			t.Errorf("provisioner2 node %s runs no inflate2 pod", n.Name)
		}
	}

}
