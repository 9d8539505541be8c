package workload

import (
	"reflect"
	"testing"
)

func TestSmallDeploymentsShapes(t *testing.T) {
	for _, count := range []int{1, 2000, 10000} {
		shapes := SmallDeploymentsShapes(count, 3)
		if !reflect.DeepEqual(shapes, SmallDeploymentsShapes(count, 3)) {
			t.Fatalf("%d pods: two draws with the same seed differ", count)
		}
		total := 0
		for _, s := range shapes {
			total += s.Replicas
			if s.Replicas < 1 || s.Replicas > 8 || s.CPU < 10 || s.CPU > 16000 {
				t.Errorf("%s: %d replicas of %dm", s.Name, s.Replicas, s.CPU)
			}
			// GiB per vCPU, allowing for the 1Mi rounding and the 16Mi floor.
			ratio := float64(s.Memory) / float64(gi) / (float64(s.CPU) / 1000)
			if s.Memory > 16*mi && (ratio < 1-1e-3*1000/float64(s.CPU) || ratio > 8+1e-3*1000/float64(s.CPU)) {
				t.Errorf("%s: %dm and %dMi, %.3f GiB per vCPU", s.Name, s.CPU, s.Memory/mi, ratio)
			}
		}
		if total != count {
			t.Errorf("%d pods asked, %d drawn", count, total)
		}
		if count == 10000 && (len(shapes) < 1000 || len(shapes) > 4000) {
			t.Errorf("%d Deployments for 10,000 pods, want a few thousand small ones", len(shapes))
		}
	}
	if reflect.DeepEqual(SmallDeploymentsShapes(100, 1), SmallDeploymentsShapes(100, 2)) {
		t.Error("seeds 1 and 2 draw the same Deployments")
	}
	if pods := SmallDeployments(50); len(pods) != 50 {
		t.Errorf("SmallDeployments(50) made %d pods", len(pods))
	}
}
