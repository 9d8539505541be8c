package status

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/manifests/build"
)

func claim(name, pool, it, zone, node string) karpv1.NodeClaim {
	nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		karpv1.LabelNodePool: pool, corev1.LabelInstanceTypeStable: it, karpv1.LabelCapacityType: "on-demand", corev1.LabelTopologyZone: zone,
	}}}
	nc.Status.NodeName = node
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi")}
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	return nc
}

func pod(name, owner, hash, node, cpu string) corev1.Pod {
	yes := true
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner + "-" + hash, Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: node, NodeSelector: map[string]string{"team": "web"}, Containers: []corev1.Container{{
			Name: "server", Image: "registry.example.com/secret-app:1.2", Env: []corev1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		}}}}
	return p
}

func input() Input {
	ps := &v1alpha1.PoolSync{ObjectMeta: metav1.ObjectMeta{Name: "pools"}, Spec: v1alpha1.PoolSyncSpec{Path: "pools"}}
	ps.Status.LastAppliedRevision = "main@sha1:abc"
	ps.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Message: "Applied revision: main@sha1:abc"}}
	np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}
	c1, c2 := claim("default-a", "default", "m5.large", "us-east-1a", "node-a"), claim("default-b", "default", "m5.large", "us-east-1b", "node-b")
	c2.Status.Conditions = []karpv1.Condition{{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionFalse, Reason: "DoNotDisruptPod"}}
	other := claim("other-a", "other", "c5.large", "us-east-1a", "node-o")
	return Input{
		PoolSync:   ps,
		NodePools:  []karpv1.NodePool{np},
		NodeClaims: []karpv1.NodeClaim{c1, c2, other},
		Pods: []corev1.Pod{
			pod("web-1", "web", "5d9f", "node-a", "500m"), pod("web-2", "web", "5d9f", "node-b", "500m"),
			pod("web-3", "web", "5d9f", "", "500m"), pod("web-4", "web", "77aa", "node-a", "1"),
			pod("elsewhere", "batch", "1111", "node-o", "250m"),
		},
		Price: func(l map[string]string) (float64, bool) {
			return map[string]float64{"m5.large": 0.1, "c5.large": 0.08}[l[corev1.LabelInstanceTypeStable]], true
		},
	}
}

// TestReport: the pool's nodes, pods and cost are the ones on its NodeClaims; another pool's
// are left out; a blocked node is counted by its reason.
func TestReport(t *testing.T) {
	r := Build(input())
	if len(r.Pools) != 1 || r.Nodes != 2 || math.Abs(r.PerHour-0.2) > 1e-9 || r.PendingPods != 1 {
		t.Fatalf("report %+v", r)
	}
	p := r.Pools[0]
	if p.Pods != 3 || p.ReqCPU != 2000 || p.CapCPU != 4000 || p.LimitCPU != 20000 || len(p.Groups) != 2 || p.Blocked["DoNotDisruptPod"] != 1 {
		t.Errorf("pool %+v", p)
	}
	md := r.Markdown()
	for _, want := range []string{"PoolSync pools", "`main@sha1:abc`", "**2 nodes, $0.20 per hour ($146.00 per month)**; 1 pending pod", "| m5.large | on-demand | us-east-1a | 1 | $0.10 |", "Not consolidatable: DoNotDisruptPod (1)", "cpu 16 of 20"} {
		if !strings.Contains(md, want) {
			t.Errorf("page lacks %q:\n%s", want, md)
		}
	}
	// No timestamps: the same cluster gives the same bytes, so nothing is committed.
	a, b := Files(input(), Workload{}), Files(input(), Workload{})
	for name := range a {
		if string(a[name]) != string(b[name]) {
			t.Errorf("%s differs between two builds of the same input", name)
		}
	}
}

// TestReportAWS: a PoolSync with spec.aws reports the plan, with its condition, in both files;
// one without has no AWS section.
func TestReportAWS(t *testing.T) {
	if md := Build(input()).Markdown(); strings.Contains(md, "AWS") {
		t.Errorf("a PoolSync without spec.aws has an AWS section:\n%s", md)
	}
	in := input()
	in.PoolSync.Status.AWS = &v1alpha1.AWSStatus{Mode: v1alpha1.AWSModePlan, Revision: "main@sha1:abc",
		Changes: []string{"+ IAM role KarpenterNodeRole-demo", "~ SQS queue demo"}, Summary: "1 to create, 1 to update, 0 to delete"}
	in.PoolSync.Status.Conditions = append(in.PoolSync.Status.Conditions, metav1.Condition{Type: v1alpha1.AWSReadyCondition,
		Status: metav1.ConditionFalse, Message: "1 to create, 1 to update, 0 to delete (status.aws lists them)"})
	files := Files(in, Workload{})
	md := string(files["pools/"+PageFile])
	for _, want := range []string{"## AWS resources (spec.aws mode plan, revision `main@sha1:abc`)", "- AWSReady: False (1 to create",
		"+ IAM role KarpenterNodeRole-demo\n~ SQS queue demo\n```\n1 to create, 1 to update, 0 to delete."} {
		if !strings.Contains(md, want) {
			t.Errorf("page lacks %q:\n%s", want, md)
		}
	}
	var report struct {
		AWS struct {
			Mode    string   `json:"mode"`
			Ready   string   `json:"ready"`
			Changes []string `json:"changes"`
		} `json:"aws"`
	}
	if err := json.Unmarshal(files["pools/"+ReportFile], &report); err != nil || report.AWS.Mode != "plan" || report.AWS.Ready != "False" || len(report.AWS.Changes) != 2 {
		t.Errorf("status.json aws = %+v (%v)", report.AWS, err)
	}
}

// TestSnapshotIsAWorkload: the snapshot is a workload `simulate` and `plan` read back with the
// same pods (per owner and shape) and HPA, and it holds no image, environment or pod name.
func TestSnapshotIsAWorkload(t *testing.T) {
	in := input()
	min := int32(2)
	w := Workload{HPAs: []autoscalingv2.HorizontalPodAutoscaler{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MinReplicas: &min, MaxReplicas: 9}}}}
	files := Files(in, w)
	data := files["pools/"+WorkloadFile]
	for _, secret := range []string{"registry.example.com", "hunter2", "PASSWORD", "web-1", "server", "elsewhere"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("snapshot holds %q:\n%s", secret, data)
		}
	}
	objs, err := build.LoadFile(context.Background(), "workload.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	wl, err := simulate.WorkloadOf(objs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wl.Pods() != 4 {
		t.Errorf("%d pods read back, want the 4 of the pool and pending:\n%s", wl.Pods(), data)
	}
	hpas := wl.HPAs()
	if len(hpas) != 1 || hpas[0].Target != "Deployment/shop/web" || hpas[0].Replicas != 3 || hpas[0].Min != 2 || hpas[0].Max != 9 {
		t.Errorf("hpas %+v", hpas)
	}
	var rep Report
	if err := json.Unmarshal(files["pools/"+ReportFile], &rep); err != nil || rep.Path != "pools" || rep.Nodes != 2 {
		t.Errorf("report file: %v %+v", err, rep)
	}
}
