package nodeview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func node(name, pool, typ, ct, zone string, age time.Duration, cpu, mem string, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age)),
		Labels: map[string]string{corev1.LabelInstanceTypeStable: typ, karpv1.LabelCapacityType: ct, corev1.LabelTopologyZone: zone,
			corev1.LabelTopologyRegion: "us-east-1"}}}
	if pool != "" {
		n.Labels[karpv1.LabelNodePool] = pool
	}
	n.Spec.ProviderID = "aws:///" + zone + "/i-" + name
	n.Spec.Taints = taints
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse("29")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func pod(name, nodeName, cpu, mem string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	p.Spec.NodeName = nodeName
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}
	p.Status.Phase = corev1.PodRunning
	if nodeName == "" {
		p.Status.Phase = corev1.PodPending
	}
	return p
}

// TestBuildAndRender: the workshop's m5.large with five 1Gi pods, a spot node being disrupted,
// a drifted one, and a node no pool manages; prices from the catalog, totals per hour and month.
func TestBuildAndRender(t *testing.T) {
	m5 := node("a", "default", "m5.large", "on-demand", "us-east-1a", 3*time.Minute, "1930m", "6903Mi")
	spot := node("b", "spot", "c5.xlarge", "spot", "us-east-1b", 2*time.Hour, "3920m", "6584Mi", karpv1.DisruptedNoScheduleTaint)
	drifted := node("c", "default", "m5.large", "on-demand", "us-east-1a", 50*time.Hour, "1930m", "6903Mi")
	system := node("sys", "", "t3.medium", "on-demand", "us-east-1a", time.Hour, "1930m", "3300Mi")
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-c"}}
	claim.Status.ProviderID = drifted.Spec.ProviderID
	claim.Status.Conditions = []karpv1.Condition{{Type: karpv1.ConditionTypeDrifted, Status: "True"}}
	pods := []*corev1.Pod{pod("pending", "", "1", "1Gi")}
	for _, name := range []string{"i1", "i2", "i3", "i4", "i5"} {
		pods = append(pods, pod(name, "a", "0", "1Gi"))
	}
	done := pod("done", "a", "1", "1Gi")
	done.Status.Phase = corev1.PodSucceeded
	pods = append(pods, done)
	snap := state.New(pods, []*corev1.Node{system, m5, spot, drifted}, []*karpv1.NodeClaim{claim})
	v := Build(snap, prices("us-east-1"), now)

	if got := []string{v.Nodes[0].Name, v.Nodes[1].Name, v.Nodes[2].Name, v.Nodes[3].Name}; strings.Join(got, ",") != "a,c,b,sys" {
		t.Errorf("order %v, want pools then name, unmanaged last", got)
	}
	a := v.Nodes[0]
	if !a.Priced || math.Abs(a.PerHour-0.096) > 1e-9 || a.Pods != 5 || a.MemRequested != 5<<30 || a.CPURequested != 0 {
		t.Errorf("m5.large row %+v: want $0.096/h, 5 pods, 5Gi requested", a)
	}
	if v.Nodes[1].State != "Ready, drifted" || v.Nodes[2].State != "Ready, disrupting" || v.Nodes[3].State != "Ready" {
		t.Errorf("states %q %q %q", v.Nodes[1].State, v.Nodes[2].State, v.Nodes[3].State)
	}
	var sum float64
	for _, n := range v.Nodes {
		sum += n.PerHour + n.VolumesPerHour
	}
	if v.Pending != 1 || v.Unpriced != 0 || math.Abs(v.PerHour-sum) > 1e-9 || math.Abs(v.PerMonth-730*sum) > 1e-6 {
		t.Errorf("totals %+v, want the sum of the rows ($%.4f/h) and one pending pod", v, sum)
	}

	var out bytes.Buffer
	if err := Render(&out, v); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"m5.large", "$0.0960", "on-demand", "us-east-1a", "5/29", "3m", "2d", "Ready, disrupting",
		"███████░░░  74%", fmt.Sprintf("4 nodes  $%.4f/h  $%.2f/month (730 h)", v.PerHour, v.PerMonth), "1 pod pending"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}
}

// A node in a capacity reservation shows as reserved, priced as Karpenter prices reserved
// capacity (the on-demand price divided by ten million) plus its volumes.
func TestReservedNodeRow(t *testing.T) {
	n := node("r", "gpu", "m5.large", "reserved", "us-east-1a", time.Hour, "1930m", "6903Mi")
	n.Labels["karpenter.k8s.aws/capacity-reservation-id"] = "cr-0123"
	v := Build(state.New(nil, []*corev1.Node{n}, nil), prices("us-east-1"), now)
	row := v.Nodes[0]
	if !row.Priced || row.CapacityType != "reserved" || math.Abs(row.PerHour-0.096/1e7) > 1e-12 {
		t.Fatalf("reserved row %+v: want priced at $%g/h", row, 0.096/1e7)
	}
	var out bytes.Buffer
	if err := Render(&out, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "reserved") {
		t.Errorf("output lacks the capacity type:\n%s", out.String())
	}
}
