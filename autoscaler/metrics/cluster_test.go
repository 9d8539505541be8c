package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/state"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func resources(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func testPod(name, node, cpu string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: resources(cpu, "1Gi"), Limits: resources(cpu, "2Gi")}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if node != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// snapshot: one karpool node (m5.large, 1.93 cores and 7 GiB allocatable) with a pod of 500m,
// a DaemonSet pod of 100m and a finished pod of 1 core; one pending pod; the node's NodeClaim
// with two conditions.
func snapshot() *state.Cluster {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)), Labels: map[string]string{
			karpv1.LabelNodePool: "default", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m5.large",
			karpv1.LabelCapacityType: "on-demand", corev1.LabelArchStable: "amd64", awsv1.LabelInstanceFamily: "m5",
			awsv1.LabelNodeClass: "default", karpv1.LabelNodeInitialized: "true",
		}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"},
		Status: corev1.NodeStatus{Phase: corev1.NodeRunning, Capacity: resources("2", "8Gi"), Allocatable: resources("1930m", "7Gi"),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.NewTime(t0.Add(-50 * time.Minute))}}},
	}
	web := testPod("web", node.Name, "500m", corev1.PodRunning)
	web.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1"}}
	ds := testPod("agent", node.Name, "100m", corev1.PodRunning)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptrTrue()}}
	done := testPod("job", node.Name, "1", corev1.PodSucceeded)
	pending := testPod("waiting", "", "1", corev1.PodPending)
	claim := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{karpv1.LabelNodePool: "default", awsv1.LabelNodeClass: "default"}},
		Status: karpv1.NodeClaimStatus{ProviderID: node.Spec.ProviderID, Conditions: []karpv1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(t0.Add(-40 * time.Minute))},
			{Type: "Consolidatable", Status: metav1.ConditionFalse, Reason: "NotUnderused"},
		}},
	}
	return state.New([]*corev1.Pod{web, ds, done, pending}, []*corev1.Node{node}, []*karpv1.NodeClaim{claim})
}

func ptrTrue() *bool { b := true; return &b }

// find returns the value of the sample of desc whose labels include want.
func find(t *testing.T, samples []sample, desc *prometheus.Desc, names []string, want map[string]string) (float64, bool) {
	t.Helper()
	for _, s := range samples {
		if s.desc != desc {
			continue
		}
		if len(s.labels) != len(names) {
			t.Fatalf("%s: %d label values for %d labels", desc, len(s.labels), len(names))
		}
		match := true
		for i, n := range names {
			if v, ok := want[n]; ok && s.labels[i] != v {
				match = false
			}
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

func TestNodeGauges(t *testing.T) {
	samples := clusterSamples(snapshot(), t0)
	node := map[string]string{"node_name": "ip-10-0-0-1", "nodepool": "default", "zone": "us-east-1a", "instance_type": "m5.large",
		"instance_family": "m5", "capacity_type": "on-demand", "managed": "true", "phase": "Running", "instance_cpu": ""}
	cpu := func(extra string) map[string]string {
		m := map[string]string{labelResourceType: extra}
		for k, v := range node {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		desc *prometheus.Desc
		want float64
	}{
		{nodeAllocatable, 1.93},
		{nodeOverhead, 0.07},
		{nodePodRequests, 0.6}, // the finished pod's core is not counted
		{nodePodLimits, 0.6},
		{nodeDaemonRequests, 0.1},
		{nodeDaemonLimits, 0.1},
	} {
		got, ok := find(t, samples, c.desc, nodeResourceLabels, cpu("cpu"))
		if !ok || abs(got-c.want) > 1e-9 {
			t.Errorf("%s cpu = %v (found %t), want %v", c.desc, got, ok, c.want)
		}
	}
	if got, _ := find(t, samples, nodePodRequests, nodeResourceLabels, cpu("memory")); got != 2<<30 {
		t.Errorf("pod memory requests = %v, want 2Gi", got)
	}
	if got, _ := find(t, samples, nodeLifetime, nodeLabelNames, node); got != 3600 {
		t.Errorf("lifetime = %v, want 3600", got)
	}
	if got, _ := find(t, samples, clusterUtilization, []string{labelResourceType}, map[string]string{labelResourceType: "cpu"}); abs(got-100*0.6/1.93) > 1e-9 {
		t.Errorf("cpu utilization = %v%%, want %v%%", got, 100*0.6/1.93)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestPodGauges(t *testing.T) {
	samples := clusterSamples(snapshot(), t0)
	if got, ok := find(t, samples, podState, podStateLabels, map[string]string{"name": "web", "owner": "/apis/apps/v1/namespaces/team/replicasets/web-1",
		"node": "ip-10-0-0-1", "scheduled": "true", "nodepool": "default", "zone": "us-east-1a", "instance_type": "m5.large", "arch": "amd64",
		"capacity_type": "on-demand", "phase": "Running", "ready": "true", "managed": "true"}); !ok || got != 1 {
		t.Errorf("pods_state of web: %v, found %t", got, ok)
	}
	if _, ok := find(t, samples, podState, podStateLabels, map[string]string{"name": "waiting", "scheduled": "false", "nodepool": "", "managed": "false", "phase": "Pending"}); !ok {
		t.Error("no pods_state for the pending pod")
	}
	for _, d := range []*prometheus.Desc{podUnbound, podUnstarted} {
		if got, ok := find(t, samples, d, []string{"name", "namespace"}, map[string]string{"name": "waiting"}); !ok || got != 60 {
			t.Errorf("%s of the pending pod = %v (found %t), want 60", d, got, ok)
		}
		if _, ok := find(t, samples, d, []string{"name", "namespace"}, map[string]string{"name": "web"}); ok {
			t.Errorf("%s for a running pod", d)
		}
	}
}

func TestConditionGauges(t *testing.T) {
	samples := clusterSamples(snapshot(), t0)
	labels := append(append([]string{}, gaugeLabels...), nodeClaimKind.extraNames()...)
	ready := map[string]string{"name": "default-abc", "type": "Ready", "status": "True", "reason": "Ready",
		"karpenter_k8s_aws_ec2nodeclass": "default", "karpenter_sh_nodepool": "default"}
	if got, ok := find(t, samples, nodeClaimKind.count, labels, ready); !ok || got != 1 {
		t.Errorf("nodeclaim Ready count = %v (found %t)", got, ok)
	}
	if got, _ := find(t, samples, nodeClaimKind.current, labels, ready); got != 2400 {
		t.Errorf("nodeclaim Ready current_status_seconds = %v, want 2400", got)
	}
	// A condition without a transition time has a count but no age.
	consolidatable := map[string]string{"type": "Consolidatable", "status": "False"}
	if _, ok := find(t, samples, nodeClaimKind.count, labels, consolidatable); !ok {
		t.Error("no count for Consolidatable")
	}
	if _, ok := find(t, samples, nodeClaimKind.current, labels, consolidatable); ok {
		t.Error("an age for a condition without a transition time")
	}
	old := append(append([]string{}, gaugeLabels...), "group", "kind")
	if _, ok := find(t, samples, deprecatedCount, old, map[string]string{"type": "Ready", "group": "karpenter.sh", "kind": "NodeClaim"}); !ok {
		t.Error("no operator_status_condition_count for the NodeClaim")
	}
	nodeLabels := append(append([]string{}, gaugeLabels...), nodeKind.extraNames()...)
	if got, _ := find(t, samples, nodeKind.current, nodeLabels, map[string]string{"type": "Ready", "karpenter_sh_initialized": "true"}); got != 3000 {
		t.Errorf("node Ready current_status_seconds = %v, want 3000", got)
	}
	if _, ok := find(t, samples, deprecatedCount, old, map[string]string{"kind": "Node"}); ok {
		t.Error("nodes are not counted under the older names (as in Karpenter)")
	}
}

func TestConditionChanges(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	first := []condition{{"Launched", "True", "Launched", at(0)}, {"Registered", "Unknown", "AwaitingRegistration", at(0)}}
	if got := changes(nil, first); len(got) != 1 || got[0].after.Type != "Launched" || got[0].before != nil {
		t.Fatalf("first look: %+v, want Launched only (Unknown is where conditions start)", got)
	}
	second := []condition{{"Launched", "True", "Launched", at(0)}, {"Registered", "True", "Registered", at(3)}}
	got := changes(first, second)
	if len(got) != 1 || got[0].after.Type != "Registered" || got[0].before == nil || got[0].before.Status != "Unknown" {
		t.Fatalf("second look: %+v, want Registered from Unknown", got)
	}

	tr := newTransitions()
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{karpv1.LabelNodePool: "default"}}}
	tr.record(nodeClaimKind, claim, got)
	if n := testutil.ToFloat64(tr.total[nodeClaimKind].WithLabelValues("Registered", "True", "Registered", "", "default")); n != 1 {
		t.Errorf("transitions_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(tr.oldTotal.WithLabelValues("Registered", "True", "Registered", "karpenter.sh", "NodeClaim")); n != 1 {
		t.Errorf("operator_status_condition_transitions_total = %v, want 1", n)
	}
	out, err := testutil.CollectAndFormat(tr.seconds[nodeClaimKind], expfmt.TypeTextPlain, "operator_nodeclaim_status_condition_transition_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `operator_nodeclaim_status_condition_transition_seconds_sum{karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default",status="Unknown",type="Registered"} 180`) {
		t.Errorf("transition_seconds did not observe 180 s in Unknown:\n%s", out)
	}
}

// fakeCloud fails every call with err.
type fakeCloud struct{ err error }

func (f fakeCloud) Create(context.Context, *karpv1.NodeClaim, *awsv1.EC2NodeClass) (*karpv1.NodeClaim, error) {
	return nil, f.err
}
func (f fakeCloud) Delete(context.Context, *karpv1.NodeClaim) error        { return f.err }
func (f fakeCloud) Get(context.Context, string) (*karpv1.NodeClaim, error) { return nil, f.err }
func (f fakeCloud) List(context.Context) ([]*karpv1.NodeClaim, error)      { return nil, f.err }
func (f fakeCloud) Name() string                                           { return "fake" }
func (f fakeCloud) RepairPolicies() []cloud.RepairPolicy                   { return nil }
func (f fakeCloud) InstanceTypes(context.Context, *awsv1.EC2NodeClass) ([]catalog.InstanceType, error) {
	return nil, f.err
}
func (f fakeCloud) IsDrifted(context.Context, *karpv1.NodeClaim, *awsv1.EC2NodeClass) (cloud.DriftReason, error) {
	return "", f.err
}

func TestCloudCallsMeasured(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = m.Cloud(fakeCloud{&cloud.InsufficientCapacityError{NodeClaim: "a"}}, ControllerLifecycle).Create(ctx, nil, nil)
	_ = m.Cloud(fakeCloud{errors.Join(errors.New("terminating"), cloud.ErrNotFound)}, ControllerLifecycle).Delete(ctx, nil)
	_, _ = m.Cloud(fakeCloud{nil}, ControllerProvisioner).InstanceTypes(ctx, nil)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{ControllerLifecycle, "Create", "fake", "InsufficientCapacityError"}, 1},
		{[]string{ControllerLifecycle, "Delete", "fake", "NodeClaimNotFoundError"}, 1},
	} {
		if got := testutil.ToFloat64(m.CloudErrors.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("errors_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.CloudErrors); n != 2 {
		t.Errorf("%d error series, want 2 (a successful call counts no error)", n)
	}
	if n := testutil.CollectAndCount(m.CloudDuration); n != 3 {
		t.Errorf("%d duration series, want 3 (one per controller and method)", n)
	}
}

func TestClusterServesOnlyTheLeader(t *testing.T) {
	c := newCluster()
	c.now = func() time.Time { return t0 }
	leading := false
	c.Bind(func(context.Context) (*state.Cluster, error) { return snapshot(), nil }, func() bool { return leading })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("a replica that does not lead served %d series", n)
	}
	leading = true
	if n := testutil.CollectAndCount(c, "karpenter_pods_state"); n != 4 {
		t.Fatalf("leader served %d pods_state series, want 4", n)
	}
	c.Bind(func(context.Context) (*state.Cluster, error) { return nil, errors.New("cache not synced") }, func() bool { return true })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("a failed snapshot served %d series", n)
	}
}
