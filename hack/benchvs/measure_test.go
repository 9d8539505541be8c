package main

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpool/karpool/api/scheme"
)

// The system node is there in every run but is not the autoscaler's: the fleet's counts, open
// nodes and price leave it out, while a tainted (not yet registered) autoscaler node counts and
// is not open.
func TestFleetLeavesOutSystemNode(t *testing.T) {
	launched := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Labels: map[string]string{
		corev1.LabelInstanceTypeStable: "m6g.large", corev1.LabelTopologyZone: region + "a"}}}
	opened := launched.DeepCopy()
	opened.Name = "ip-10-0-0-2"
	launched.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(systemNode(), launched, opened).Build()
	prices := map[[2]string]float64{{"m6g.large", region + "a"}: 0.077}
	seen, peak := map[string]bool{}, 0
	f, err := watchNodes(context.Background(), c, prices, seen, &peak)
	if err != nil {
		t.Fatal(err)
	}
	if f.nodes != 2 || f.open != 1 || f.perHour != 2*0.077 || peak != 2 || seen["system-0"] {
		t.Errorf("fleet %+v, peak %d, seen %v: want the two autoscaler nodes only, one open", f, peak, seen)
	}
}
