package loadsim

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func deployment(load string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backend"}}
	if load != "" {
		d.Annotations = map[string]string{LoadAnnotation: load}
	}
	return d
}

func pod(name string, phase corev1.PodPhase, usage string, containers int) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Status: corev1.PodStatus{Phase: phase}}
	for range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c"})
	}
	if usage != "" {
		p.Annotations = map[string]string{UsageAnnotation: usage}
	}
	return p
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: name}
}

func TestSharesSpreadTheLoadOverRunningPods(t *testing.T) {
	pods := []corev1.Pod{
		pod("a", corev1.PodRunning, "", 1),
		pod("b", corev1.PodRunning, "500m", 1),   // already right: not patched
		pod("c", corev1.PodRunning, "2", 2),      // two containers share the pod's 500m
		pod("d", corev1.PodPending, "", 1),       // not running: no share, not counted
		pod("e", corev1.PodSucceeded, "900m", 1), // finished
	}
	got, err := Shares(deployment("1500m"), pods)
	if err != nil {
		t.Fatal(err)
	}
	want := []Share{{key("a"), "500m"}, {key("c"), "250m"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shares %v, want %v", got, want)
	}
}

func TestSharesNeverReportZero(t *testing.T) {
	got, err := Shares(deployment("0"), []corev1.Pod{pod("a", corev1.PodRunning, "", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Share{{key("a"), "1m"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("shares %v, want %v (metrics-server drops containers that used nothing)", got, want)
	}
}

func TestSharesWithoutLoadGiveTheUsageBack(t *testing.T) {
	got, err := Shares(deployment(""), []corev1.Pod{pod("a", corev1.PodRunning, "300m", 1), pod("b", corev1.PodRunning, "", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Share{{Pod: key("a")}}; !reflect.DeepEqual(got, want) {
		t.Errorf("shares %v, want %v", got, want)
	}
}

func TestSharesRejectABadLoad(t *testing.T) {
	for _, load := range []string{"lots", "-1"} {
		_, err := Shares(deployment(load), []corev1.Pod{pod("a", corev1.PodRunning, "", 1)})
		if err == nil || !strings.Contains(err.Error(), "deployment default/backend: annotation karpool.dev/cpu-load=") {
			t.Errorf("load %q: error %v, want one naming the Deployment and the annotation", load, err)
		}
	}
}
