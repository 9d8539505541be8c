package fakecloud

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
)

func claim(name string, instanceTypes ...string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(instanceTypes) > 0 {
		nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: instanceTypes}}
	}
	return nc
}

// The fake keeps the interface's contract: Create is idempotent per UID; offerings without
// capacity fail the launch, are listed in the error and become unavailable; Reset forgets it all.
func TestFakeKeepsTheContract(t *testing.T) {
	ctx := context.Background()
	p := New(InstanceType("small", 2, 4, Offering("a", "on-demand", 0.1)), InstanceType("large", 8, 32, Offering("a", "on-demand", 0.4)))
	first, err := p.Create(ctx, claim("c1"), nil)
	if err != nil || first.Labels[corev1.LabelInstanceTypeStable] != "small" {
		t.Fatalf("launch: %v %v, want the cheapest type", first, err)
	}
	again, _ := p.Create(ctx, claim("c1"), nil)
	if again.Status.ProviderID != first.Status.ProviderID || len(p.Instances()) != 1 {
		t.Errorf("a second Create for the same UID launched %s, want %s", again.Status.ProviderID, first.Status.ProviderID)
	}
	p.NoCapacity("large/a/on-demand")
	var ice *cloud.InsufficientCapacityError
	if _, err := p.Create(ctx, claim("c2", "large"), nil); !errors.As(err, &ice) || !slices.Equal(ice.Offerings, []string{"large/a/on-demand"}) {
		t.Fatalf("launch without capacity: %v, want an insufficient capacity error naming large/a/on-demand", err)
	}
	its, _ := p.InstanceTypes(ctx, nil)
	if its[1].Offerings[0].Available || !its[0].Offerings[0].Available {
		t.Errorf("offerings after the failure: %+v, want only large's unavailable", its)
	}
	if err := p.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, first.Status.ProviderID); !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	p.Reset()
	if len(p.CreateCalls())+len(p.DeleteCalls())+len(p.GetCalls()) != 0 {
		t.Error("calls kept after Reset")
	}
}
