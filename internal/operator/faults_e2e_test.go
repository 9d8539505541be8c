package operator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/testbed/awssim"
)

// writeManifest writes a YAML file in the test's temp dir and returns its path.
func writeManifest(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// deployment is a pause Deployment with the given replicas and requests.
func deployment(name string, replicas int, cpu, memory string, nodeSelector string) string {
	sel := ""
	if nodeSelector != "" {
		sel = "\n      nodeSelector:\n        " + nodeSelector
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:%[5]s
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.2
          resources:
            requests: {cpu: %[3]s, memory: %[4]s}
`, name, replicas, cpu, memory, sel)
}

// TestPoolLimits: a pool limited to 4 vCPU never goes beyond it, however many pods are
// pending; the pods left over stay Pending with an event naming the limit.
func TestPoolLimits(t *testing.T) {
	h := newHarness(t)
	h.startController()
	ns := h.namespace("limits")
	pool := writeManifest(t, "pool.yaml", `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: limited
spec:
  limits:
    cpu: "4"
  template:
    metadata:
      labels: {type: karpenter}
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large, c5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`)
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"), pool)
	h.apply(ns, writeManifest(t, "inflate.yaml", deployment("inflate", 50, "500m", "128Mi", "type: karpenter")))

	// Capacity appears, then stops at the limit: wait until some pods run and a limit event
	// was recorded, then check the pool's capacity over a few provisioning rounds.
	h.eventually("pods running and a limit event", 3*time.Minute, func() error {
		var events corev1.EventList
		if err := h.c.List(h.ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		limited := 0
		for _, e := range events.Items {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Message, `nodepool "limited" limits exceeded`) && strings.Contains(e.Message, "cpu") {
				limited++
			}
		}
		if limited == 0 {
			return fmt.Errorf("no FailedScheduling event naming the pool's cpu limit yet")
		}
		return nil
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		milli := int64(0)
		for _, nc := range h.nodeClaims() {
			if c, ok := nc.Status.Capacity[corev1.ResourceCPU]; ok {
				milli += c.MilliValue()
			}
		}
		if milli > 4000 {
			t.Fatalf("pool capacity %dm cpu exceeds the 4 vCPU limit", milli)
		}
		select {
		case <-h.ctx.Done():
			t.Fatal(h.ctx.Err())
		case <-time.After(time.Second):
		}
	}
	var pods corev1.PodList
	if err := h.c.List(h.ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	pending := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			pending++
		}
	}
	if pending == 0 || pending == len(pods.Items) {
		t.Errorf("want some pods scheduled and the rest pending, got %d of %d pending", pending, len(pods.Items))
	}
}

// TestInsufficientCapacityFallsBack: with m5.large out of capacity in every zone, the workshop
// pods get the next cheapest type that fits (r5.large).
func TestInsufficientCapacityFallsBack(t *testing.T) {
	h := newHarness(t)
	h.sim.SetFaults(awssim.Faults{InsufficientCapacity: []awssim.CapacityFault{{InstanceType: "m5.large"}}})
	h.startController()
	ns := h.namespace("ice")
	h.workshopScaleOut(ns, 5)
	nodes := h.karpenterNodes()
	if len(nodes) != 1 {
		t.Fatalf("want 1 node, got %d", len(nodes))
	}
	if got := nodes[0].Labels[corev1.LabelInstanceTypeStable]; got != "r5.large" {
		t.Errorf("instance type = %s, want r5.large (the next cheapest that fits 5Gi)", got)
	}
	// EC2 Fleet's lowest-price strategy skips the m5.large pools without capacity within the
	// one request; the fleet's error list names them.
	iceSeen := false
	for _, call := range h.sim.Calls() {
		out, ok := call.Output.(*ec2.CreateFleetOutput)
		if !ok {
			continue
		}
		for _, e := range out.Errors {
			if aws.ToString(e.ErrorCode) == "InsufficientInstanceCapacity" && e.LaunchTemplateAndOverrides != nil &&
				e.LaunchTemplateAndOverrides.Overrides != nil && e.LaunchTemplateAndOverrides.Overrides.InstanceType == "m5.large" {
				iceSeen = true
			}
		}
	}
	if !iceSeen {
		t.Errorf("no CreateFleet answered InsufficientInstanceCapacity for m5.large")
	}
	if n := h.liveInstances(); n != 1 {
		t.Errorf("the simulator holds %d instances, want 1", n)
	}
}

// TestRegistrationTimeout: an instance whose Node does not register within the registration
// TTL is given up: its NodeClaim is deleted with a RegistrationTimeout event and the instance
// terminated. Once nodes register again, the pods get a new NodeClaim and run.
func TestRegistrationTimeout(t *testing.T) {
	h := newHarness(t)
	h.sim.SetFaults(awssim.Faults{RegistrationLatency: awssim.Duration{Duration: time.Hour}})
	h.cfg.RegistrationTTL = 10 * time.Second
	h.startController()
	ns := h.namespace("registration")
	h.workshopPools()
	h.inflate(ns, 5)

	var first string // the providerID of the instance that never registers
	h.eventually("first instance launched", 2*time.Minute, func() error {
		for _, nc := range h.nodeClaims() {
			if nc.Status.ProviderID != "" {
				first = nc.Status.ProviderID
				return nil
			}
		}
		return fmt.Errorf("no launched NodeClaim yet")
	})
	h.eventually("timed-out instance terminated", 2*time.Minute, func() error {
		for _, nc := range h.nodeClaims() {
			if nc.Status.ProviderID == first {
				return fmt.Errorf("the NodeClaim of %s still exists", first)
			}
		}
		for _, in := range h.sim.Instances() {
			if in.ProviderID == first && (in.State == "pending" || in.State == "running") {
				return fmt.Errorf("%s is still %s", first, in.State)
			}
		}
		return nil
	})
	if len(h.logLines("deleting nodeclaim, node did not register")) == 0 {
		t.Errorf("no \"deleting nodeclaim, node did not register\" log line")
	}
	h.eventually("RegistrationTimeout event", time.Minute, func() error {
		var events corev1.EventList
		if err := h.c.List(h.ctx, &events, client.MatchingFields{"reason": "RegistrationTimeout"}); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "NodeClaim" && strings.Contains(e.Message, first) {
				return nil
			}
		}
		return fmt.Errorf("none yet among %d", len(events.Items))
	})

	h.sim.SetFaults(awssim.Faults{})
	h.runningPods(ns, "inflate", 5, 3*time.Minute)
	if n := len(h.nodeClaims()); n != 1 {
		t.Errorf("want 1 NodeClaim after recovery, got %d", n)
	}
	if n := h.liveInstances(); n != 1 {
		t.Errorf("the simulator holds %d live instances, want 1", n)
	}
}
