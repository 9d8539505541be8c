package provisioning

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/scheme"
	b "github.com/karpool/karpool/testbed/builders"
)

// staticPool is NodePool "static" with these replicas, Ready unless notReady.
func staticPool(replicas int64, opts ...b.PoolOption) *karpv1.NodePool {
	np := b.NodePool("static", opts...)
	np.Spec.Replicas = ptr.To(replicas)
	np.Spec.Template.Spec.Requirements = []karpv1.NodePoolRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}
	np.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
	return np
}

// claimOf is a NodeClaim of pool "static".
func claimOf(name string, opts ...b.ClaimOption) *karpv1.NodeClaim {
	nc := b.NodeClaim(name, opts...)
	nc.Labels[karpv1.LabelNodePool] = "static"
	return nc
}

// reconcileStatic runs the controller once over the objects and returns the pool's NodeClaims
// that are not being deleted, by name.
func reconcileStatic(t *testing.T, objs ...client.Object) ([]karpv1.NodeClaim, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).WithStatusSubresource(&karpv1.NodePool{}).Build()
	if _, err := NewStatic(c, c, record.NewFakeRecorder(10)).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "static"}}); err != nil {
		t.Fatal(err)
	}
	var claims karpv1.NodeClaimList
	if err := c.List(context.Background(), &claims, client.MatchingLabels{karpv1.LabelNodePool: "static"}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(claims.Items, func(nc karpv1.NodeClaim) bool { return nc.DeletionTimestamp != nil }), c
}

// A static pool short of its replicas gets NodeClaims from its template: its requirements (no
// instance-type list: the cloud provider picks the cheapest), labels, node class and owner.
func TestStaticPoolScalesUpFromItsTemplate(t *testing.T) {
	claims, _ := reconcileStatic(t, staticPool(3), claimOf("static-a"))
	if len(claims) != 3 {
		t.Fatalf("%d NodeClaims, want 3", len(claims))
	}
	for _, nc := range claims {
		if nc.Name == "static-a" {
			continue
		}
		arch := slices.ContainsFunc(nc.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
			return r.Key == corev1.LabelArchStable && slices.Equal(r.Values, []string{"arm64"})
		})
		types := slices.ContainsFunc(nc.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
			return r.Key == corev1.LabelInstanceTypeStable
		})
		if !arch || types || nc.Labels[karpv1.LabelNodePool] != "static" || nc.Spec.NodeClassRef.Name != "default" ||
			len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].Name != "static" {
			t.Errorf("NodeClaim %s: labels %v, requirements %v, class %v, owners %v; want the pool's template and owner", nc.Name, nc.Labels, nc.Spec.Requirements, nc.Spec.NodeClassRef, nc.OwnerReferences)
		}
	}
}

// The nodes limit caps what a static pool creates, counting NodeClaims still being deleted.
func TestStaticPoolStopsAtItsNodesLimit(t *testing.T) {
	limited := staticPool(5, func(np *karpv1.NodePool) {
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceName("nodes"): resource.MustParse("3")}
	})
	going := claimOf("static-going", b.WithFinalizer(), b.DeletingSince(time.Unix(0, 0)))
	claims, _ := reconcileStatic(t, limited, claimOf("static-a"), going)
	if len(claims) != 2 {
		t.Errorf("%d running NodeClaims, want 2: the limit of 3 holds the running one, the deleting one and one more", len(claims))
	}
}

// A static pool whose node class is not ready, and a dynamic pool, get nothing.
func TestStaticPoolWaitsUntilReadyAndIgnoresDynamicPools(t *testing.T) {
	notReady := staticPool(2)
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	if claims, _ := reconcileStatic(t, notReady); len(claims) != 0 {
		t.Errorf("not ready: %d NodeClaims, want 0", len(claims))
	}
	dynamic := staticPool(2)
	dynamic.Spec.Replicas = nil
	if claims, _ := reconcileStatic(t, dynamic); len(claims) != 0 {
		t.Errorf("dynamic pool: %d NodeClaims, want 0", len(claims))
	}
}

// Scale-down gives up NodeClaims not launched yet first, then empty nodes, then the nodes with
// the fewest pods to move, and nodes with pods that ask not to be disrupted last.
func TestStaticPoolScalesDownTheLeastDisruptiveFirst(t *testing.T) {
	launched := func(name string) *karpv1.NodeClaim {
		return claimOf(name, b.Launched("aws:///"+name, time.Unix(0, 0)), b.Registered("node-"+name, time.Unix(0, 0)))
	}
	objs := []client.Object{staticPool(2), claimOf("static-unlaunched"), launched("static-busy"), launched("static-empty"),
		launched("static-pinned"), launched("static-one"),
		b.Pod("a", b.OnNode("node-static-busy")), b.Pod("b", b.OnNode("node-static-busy")),
		b.Pod("c", b.OnNode("node-static-one")), b.Pod("ds", b.OnNode("node-static-empty"), b.OwnedByDaemonSet()),
		b.Pod("keep", b.OnNode("node-static-pinned"), b.PodAnnotation(karpv1.AnnotationDoNotDisrupt, "true")),
	}
	claims, _ := reconcileStatic(t, objs...)
	var names []string
	for _, nc := range claims {
		names = append(names, nc.Name)
	}
	slices.Sort(names)
	if want := []string{"static-busy", "static-pinned"}; !slices.Equal(names, want) {
		t.Errorf("kept %v, want %v (unlaunched, empty and one-pod nodes go first)", names, want)
	}
}
