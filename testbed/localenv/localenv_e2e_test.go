package localenv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/testbed/localenv"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

const workshop = "../../examples/workshop"

// TestWorkshopSchedulesOnKwokNode walks seed 003 by hand: the workshop EC2NodeClass and NodePool
// are stored, a node with m5.large allocatable and the pool's labels joins (kwok plays its
// kubelet), and scaling inflate to 5 lets the real kube-scheduler bind all five pods to it. One
// more replica than fits in 6903Mi must stay Pending, which proves the scheduler is really
// counting allocatable rather than placing pods anywhere.
func TestWorkshopSchedulesOnKwokNode(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, f := range []string{"ec2nodeclass.yaml", "nodepool.yaml", filepath.Join("workload", "inflate.yaml")} {
		for _, obj := range readObjects(t, filepath.Join(workshop, f)) {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("%s: creating %s %s: %v", f, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("karpenter.sh/v1")
	pool.SetKind("NodePool")
	if err := c.Get(ctx, types.NamespacedName{Name: "default"}, pool); err != nil {
		t.Fatalf("NodePool default not stored: %v", err)
	}
	class := &unstructured.Unstructured{}
	class.SetAPIVersion("karpenter.k8s.aws/v1")
	class.SetKind("EC2NodeClass")
	if err := c.Get(ctx, types.NamespacedName{Name: "default"}, class); err != nil {
		t.Fatalf("EC2NodeClass default not stored: %v", err)
	}
	// The API server applied the CRD's defaults: a sign that our schema, not just our YAML, is in force.
	if got, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "expireAfter"); got != "720h" {
		t.Errorf("NodePool template.spec.expireAfter = %q, want the CRD default 720h", got)
	}
	if got, _, _ := unstructured.NestedString(class.Object, "spec", "metadataOptions", "httpTokens"); got != "required" {
		t.Errorf("EC2NodeClass metadataOptions.httpTokens = %q, want the CRD default required", got)
	}

	templateLabels, _, _ := unstructured.NestedStringMap(pool.Object, "spec", "template", "metadata", "labels")
	node := m5LargeNode("ip-192-168-10-11.ec2.internal", templateLabels)
	// The node registers with its capacity and allocatable in the create, as a kubelet does. Set
	// in a second write, they would race kwok: a node seen without allocatable gets kwok's
	// defaults (1k cpu, 1Ti), and then every replica fits.
	node.Status = m5LargeStatus()
	if err := c.Create(ctx, node); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	waitFor(ctx, t, "node Ready and untainted, with m5.large allocatable", func() (bool, string) {
		n := &corev1.Node{}
		if err := c.Get(ctx, types.NamespacedName{Name: node.Name}, n); err != nil {
			return false, err.Error()
		}
		mem := n.Status.Allocatable[corev1.ResourceMemory]
		if mem.Cmp(resource.MustParse("6903Mi")) != 0 {
			t.Fatalf("node allocatable memory %s, want the registered 6903Mi", mem.String())
		}
		return nodeReady(n) && len(n.Spec.Taints) == 0, fmt.Sprintf("conditions %v taints %v", n.Status.Conditions, n.Spec.Taints)
	})

	scale(ctx, t, c, 5)
	waitFor(ctx, t, "5 inflate pods Running on the node", func() (bool, string) {
		running, pending := inflatePods(ctx, t, c)
		for _, p := range running {
			if p.Spec.NodeName != node.Name {
				return false, fmt.Sprintf("pod %s on %q", p.Name, p.Spec.NodeName)
			}
		}
		return len(running) == 5 && len(pending) == 0, fmt.Sprintf("%d running, %d pending", len(running), len(pending))
	})
	running, _ := inflatePods(ctx, t, c)
	for _, p := range running {
		if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s scheduler %q", p.Name, p.Spec.SchedulerName)
		}
		if !scheduledEvent(ctx, t, c, p) {
			t.Errorf("pod %s has no Scheduled event from %s: it was not bound by kube-scheduler", p.Name, corev1.DefaultSchedulerName)
		}
	}

	// 7 × 1Gi = 7168Mi > 6903Mi allocatable: exactly one replica must stay unschedulable.
	scale(ctx, t, c, 7)
	waitFor(ctx, t, "6 running and 1 unschedulable", func() (bool, string) {
		running, pending := inflatePods(ctx, t, c)
		unschedulable := 0
		for _, p := range pending {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		return len(running) == 6 && unschedulable == 1, fmt.Sprintf("%d running, %d pending (%d unschedulable)", len(running), len(pending), unschedulable)
	})
}

// TestStopLeavesNoProcess starts a second, private environment and checks that Stop ends every
// component and removes its directory.
func TestStopLeavesNoProcess(t *testing.T) {
	localenvtest.Env(t) // skips or fails like every e2e test when the binaries are missing
	env, err := localenv.Start(context.Background(), localenv.Options{SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	pids, dir := env.PIDs(), env.Dir
	if len(pids) != 6 {
		t.Errorf("started %d processes, want 6 (etcd, apiserver, controller-manager, scheduler, kwok, metrics-server)", len(pids))
	}
	if left := localenvtest.Survivors(pids, dir); len(left) != 6 {
		t.Errorf("before Stop, %d live processes found, want 6: %v", len(left), left)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := localenvtest.Survivors(pids, dir); len(left) > 0 {
		t.Errorf("processes left after Stop: %v", left)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s not removed: %v", dir, err)
	}
}

// TestHPAScalesOnPodCPU: the metrics API is real end to end. A pod on a kwok node whose
// annotation says it uses 400m of its 200m request shows that usage in metrics.k8s.io (kwok's
// kubelet metrics, scraped by metrics-server, served through the API server), and the
// kube-controller-manager's HPA controller, targeting 50 %, scales its Deployment out.
func TestHPAScalesOnPodCPU(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "hpa"
	node := m5LargeNode("ip-10-0-9-9.ec2.internal", nil)
	node.Spec.ProviderID = "aws:///us-east-1a/i-0000000000000hpa0"
	node.Status = m5LargeStatus()
	labels := map[string]string{"app": "backend"}
	replicas := int32(1)
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelHostname: node.Name},
				Containers: []corev1.Container{{Name: "backend", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}},
			}}},
	}
	fifty := int32(50)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "backend"},
			MinReplicas:    &replicas, MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &fifty}}}},
		},
	}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, node, deployment, hpa} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	var pod corev1.Pod
	waitFor(ctx, t, "the backend pod running", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				pod = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods, none running", len(pods.Items))
	})
	patch := client.MergeFrom(pod.DeepCopy())
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, "kwok.x-k8s.io/usage-cpu", "400m")
	if err := c.Patch(ctx, &pod, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the pod's usage in metrics.k8s.io", func() (bool, string) {
		m := &unstructured.Unstructured{}
		m.SetAPIVersion("metrics.k8s.io/v1beta1")
		m.SetKind("PodMetrics")
		if err := c.Get(ctx, client.ObjectKeyFromObject(&pod), m); err != nil {
			return false, err.Error()
		}
		containers, _, _ := unstructured.NestedSlice(m.Object, "containers")
		if len(containers) != 1 {
			return false, fmt.Sprintf("%d containers", len(containers))
		}
		cpu, _, _ := unstructured.NestedString(containers[0].(map[string]any), "usage", "cpu")
		q, err := resource.ParseQuantity(cpu)
		if err != nil {
			return false, err.Error()
		}
		return q.MilliValue() >= 300 && q.MilliValue() <= 500, "cpu " + cpu
	})
	waitFor(ctx, t, "the HPA scaling the Deployment out", func() (bool, string) {
		got := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), got); err != nil {
			return false, err.Error()
		}
		util := int32(0)
		for _, m := range got.Status.CurrentMetrics {
			if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
				util = *m.Resource.Current.AverageUtilization
			}
		}
		return got.Status.DesiredReplicas >= 2 && util > 100, fmt.Sprintf("desired %d, cpu %d%%", got.Status.DesiredReplicas, util)
	})
}

func m5LargeNode(name string, poolLabels map[string]string) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname":           name,
		"kubernetes.io/arch":               "amd64",
		"kubernetes.io/os":                 "linux",
		"node.kubernetes.io/instance-type": "m5.large",
		"topology.kubernetes.io/region":    "us-east-1",
		"topology.kubernetes.io/zone":      "us-east-1a",
		"karpenter.sh/nodepool":            "default",
		"karpenter.sh/capacity-type":       "on-demand",
		"karpenter.k8s.aws/ec2nodeclass":   "default",
	}
	for k, v := range poolLabels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{localenv.KwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"},
	}
}

func m5LargeStatus() corev1.NodeStatus {
	return corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("7910Mi"),
			corev1.ResourcePods:   resource.MustParse("29"),
		},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("1930m"),
			corev1.ResourceMemory: resource.MustParse("6903Mi"),
			corev1.ResourcePods:   resource.MustParse("29"),
		},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func scale(ctx context.Context, t *testing.T, c client.Client, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "inflate"}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	if err := c.Patch(ctx, d, patch); err != nil {
		t.Fatalf("scaling inflate to %d: %v", replicas, err)
	}
}

// inflatePods returns the inflate pods that are Running and those that are Pending.
func inflatePods(ctx context.Context, t *testing.T, c client.Client) (running, pending []corev1.Pod) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			running = append(running, p)
		case corev1.PodPending:
			pending = append(pending, p)
		}
	}
	return running, pending
}

func scheduledEvent(ctx context.Context, t *testing.T, c client.Client, p corev1.Pod) bool {
	t.Helper()
	found := false
	waitFor(ctx, t, "Scheduled event for "+p.Name, func() (bool, string) {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(p.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == p.UID && e.Reason == "Scheduled" &&
				(e.Source.Component == corev1.DefaultSchedulerName || e.ReportingController == corev1.DefaultSchedulerName) {
				found = true
			}
		}
		return found, fmt.Sprintf("%d events in namespace", len(events.Items))
	})
	return found
}

// waitFor polls cond every 200ms until it holds or ctx ends; the last detail goes into the failure.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var detail string
	for {
		var ok bool
		if ok, detail = cond(); ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s: %s", what, detail)
		case <-tick.C:
		}
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}
