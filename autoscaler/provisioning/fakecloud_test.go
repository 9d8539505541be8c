package provisioning

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/state"
	b "github.com/karpool/karpool/testbed/builders"
	"github.com/karpool/karpool/testbed/fakecloud"
)

// provisioner runs on controller-runtime's fake client and the fake cloud, with pool "default"
// of the ready class "default" and the objects.
func provisioner(t *testing.T, provider *fakecloud.CloudProvider, objs ...client.Object) (*Provisioner, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(append(objs, b.NodePool("default"), b.NodeClass("default", true))...).Build()
	return New(c, Options{Provider: provider, Region: "us-east-1"}), c
}

// instanceTypes reads the instance-type requirement of the NodeClaims not being deleted.
func instanceTypes(t *testing.T, c client.Client) [][]string {
	t.Helper()
	var claims karpv1.NodeClaimList
	if err := c.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, nc := range claims.Items {
		for _, r := range nc.Spec.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable && nc.DeletionTimestamp == nil {
				out = append(out, r.Values)
			}
		}
	}
	return out
}

// After a launch found no capacity for an instance type, the next plan does not offer it: each
// round asks the cloud for the instance types afresh, and the cloud marks the offerings that
// failed unavailable.
func TestNextPlanAvoidsOfferingsWithoutCapacity(t *testing.T) {
	provider := fakecloud.New(
		fakecloud.InstanceType("small", 2, 4, fakecloud.Offering("us-east-1a", karpv1.CapacityTypeOnDemand, 0.1)),
		fakecloud.InstanceType("large", 8, 32, fakecloud.Offering("us-east-1a", karpv1.CapacityTypeOnDemand, 0.4)))
	p, c := provisioner(t, provider, b.Pod("web", b.Unschedulable(), b.CPU("1")))
	if err := p.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := instanceTypes(t, c); len(got) != 1 || !slices.Contains(got[0], "small") {
		t.Fatalf("first plan's instance types %v, want one NodeClaim that may be small", got)
	}
	provider.NoCapacity("small/us-east-1a/on-demand")
	ice := b.NodeClaim("tried", b.Requirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small"))
	var insufficient *cloud.InsufficientCapacityError
	if _, err := provider.Create(t.Context(), ice, nil); !errors.As(err, &insufficient) {
		t.Fatalf("launch on small: %v, want an insufficient capacity error", err)
	}
	var claims karpv1.NodeClaimList
	if err := c.List(t.Context(), &claims); err != nil || c.Delete(t.Context(), &claims.Items[0]) != nil {
		t.Fatal("could not delete the first NodeClaim", err)
	}
	if err := p.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := instanceTypes(t, c); len(got) != 1 || slices.Contains(got[0], "small") {
		t.Errorf("plan after the insufficient capacity: instance types %v, want a NodeClaim without small", got)
	}
}

// Pools that cannot launch are skipped with the reason the pods' events give: a class that
// does not exist or is not ready, a pool being deleted, a cloud that cannot list the types.
func TestPoolsSayWhyTheySkipAPool(t *testing.T) {
	provider := fakecloud.New(fakecloud.InstanceType("small", 2, 4, fakecloud.Offering("us-east-1a", karpv1.CapacityTypeOnDemand, 0.1)))
	missing, resolving := b.NodePool("missing"), b.NodePool("resolving")
	missing.Spec.Template.Spec.NodeClassRef.Name = "nowhere"
	resolving.Spec.Template.Spec.NodeClassRef.Name = "resolving"
	p, c := provisioner(t, provider, missing, resolving, b.NodeClass("resolving", false))
	snap, err := state.Take(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	provider.FailNext(fakecloud.InstanceTypes, errors.New("DescribeInstanceTypes throttled"))
	pools, skipped := p.Pools(t.Context(), snap)
	if len(pools) != 0 {
		t.Errorf("%d pools resolved, want none", len(pools))
	}
	for pool, want := range map[string]string{"default": "throttled", "missing": `"nowhere" does not exist`, "resolving": "no Ready condition"} {
		if !strings.Contains(skipped[pool], want) {
			t.Errorf("pool %s skipped for %q, want it to say %q", pool, skipped[pool], want)
		}
	}
	if pools, _ := p.Pools(t.Context(), snap); len(pools) != 1 || pools[0].NodePool.Name != "default" || len(pools[0].InstanceTypes) != 1 {
		t.Errorf("after the cloud recovered: %d pools, want default with its instance type", len(pools))
	}
}

// The provisioner records the pods of the NodeClaims it creates, and the NodeClaims of one
// decision as a cohort, where the lifecycle reads them.
func TestProvisionRecordsNominationsForTheLifecycle(t *testing.T) {
	provider := fakecloud.New(fakecloud.InstanceType("small", 2, 4, fakecloud.Offering("us-east-1a", karpv1.CapacityTypeOnDemand, 0.1)))
	p, c := provisioner(t, provider, b.Pod("a", b.Unschedulable(), b.CPU("1500m")), b.Pod("b", b.Unschedulable(), b.CPU("1500m")))
	if err := p.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	var claims karpv1.NodeClaimList
	if err := c.List(t.Context(), &claims); err != nil || len(claims.Items) != 2 {
		t.Fatalf("%d NodeClaims (%v), want one per pod", len(claims.Items), err)
	}
	noms := p.opts.Nominations
	for _, nc := range claims.Items {
		if pods := noms.Pods(nc.Name); len(pods) != 1 {
			t.Errorf("pods nominated to %s: %v, want one", nc.Name, pods)
		}
		if cohort := noms.Cohort(nc.Name); len(cohort) != 2 {
			t.Errorf("cohort of %s: %v, want both NodeClaims", nc.Name, cohort)
		}
	}
}
