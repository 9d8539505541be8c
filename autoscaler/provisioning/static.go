package provisioning

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// Static keeps the NodeClaims of each static NodePool (spec.replicas set) at its replica count,
// behind the StaticCapacity feature gate, as Karpenter's static provisioning and deprovisioning
// controllers do: missing NodeClaims are created from the pool's template (the cloud provider
// picks the cheapest instance type its requirements allow; no pod is planned onto them), within
// the pool's nodes limit; NodeClaims past the count are deleted, those not launched yet first,
// then empty nodes, then the nodes with the fewest pods. Pending pods never size a static pool
// (the dynamic provisioner leaves it out) and consolidation leaves its nodes alone.
type Static struct {
	client client.Client
	// reader lists a pool's NodeClaims from the API server, not the cache: right after a
	// create the cache may not show the new NodeClaims yet, and counting from it would create
	// them again.
	reader   client.Reader
	recorder record.EventRecorder
}

// NewStatic returns the static-capacity controller; reader reads NodeClaims uncached (the
// manager's APIReader).
func NewStatic(c client.Client, reader client.Reader, recorder record.EventRecorder) *Static {
	return &Static{client: c, reader: reader, recorder: recorder}
}

// staticRecheck is how often a static pool is counted again without an event, as in Karpenter.
const staticRecheck = time.Minute

// Reconcile brings one static NodePool to its replica count.
func (s *Static) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := s.client.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if np.Spec.Replicas == nil || np.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
		return reconcile.Result{RequeueAfter: staticRecheck}, nil // its node class is not ready yet
	}
	var claims karpv1.NodeClaimList
	if err := s.reader.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: np.Name}); err != nil {
		return reconcile.Result{}, err
	}
	running := slices.DeleteFunc(slices.Clone(claims.Items), func(nc karpv1.NodeClaim) bool { return nc.DeletionTimestamp != nil })
	want := int(*np.Spec.Replicas)
	switch {
	case len(running) < want:
		return reconcile.Result{RequeueAfter: staticRecheck}, s.scaleUp(ctx, np, len(claims.Items), want-len(running))
	case len(running) > want:
		return reconcile.Result{RequeueAfter: staticRecheck}, s.scaleDown(ctx, np, running, len(running)-want)
	}
	return reconcile.Result{RequeueAfter: staticRecheck}, nil
}

// scaleUp creates n NodeClaims, fewer when they and the pool's all NodeClaims (those being
// deleted included) would pass the pool's nodes limit.
func (s *Static) scaleUp(ctx context.Context, np *karpv1.NodePool, all, n int) error {
	if q, ok := np.Spec.Limits[corev1.ResourceName("nodes")]; ok {
		n = min(n, int(q.Value())-all)
	}
	if n <= 0 {
		s.recorder.Eventf(np, corev1.EventTypeWarning, "NodeLimitReached", "static NodePool %s: the nodes limit leaves no room for the replicas it lacks", np.Name)
		return nil
	}
	log.FromContext(ctx).Info("provisioning NodeClaims for a static NodePool", "NodePool", np.Name, "count", n, "replicas", *np.Spec.Replicas)
	for range n {
		nc := newNodeClaim(np, &scheduling.NodeClaim{Requirements: templateRequirements(np)})
		if err := s.client.Create(ctx, nc); err != nil {
			return fmt.Errorf("creating a NodeClaim for static NodePool %s: %w", np.Name, err)
		}
	}
	return nil
}

// templateRequirements are the pool's requirements as a NodeClaim's, and the pool's label.
func templateRequirements(np *karpv1.NodePool) []karpv1.NodeSelectorRequirementWithMinValues {
	out := []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{np.Name}}}
	for _, r := range np.Spec.Template.Spec.Requirements {
		out = append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: slices.Clone(r.Values), MinValues: r.MinValues})
	}
	return out
}

// scaleDown deletes n of the running NodeClaims, in scaleDownOrder.
func (s *Static) scaleDown(ctx context.Context, np *karpv1.NodePool, running []karpv1.NodeClaim, n int) error {
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods); err != nil {
		return err
	}
	log.FromContext(ctx).Info("removing NodeClaims of a static NodePool", "NodePool", np.Name, "count", n, "replicas", *np.Spec.Replicas)
	for _, nc := range scaleDownOrder(running, podsByNode(pods.Items, time.Now()))[:n] {
		if err := s.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeClaim %s of static NodePool %s: %w", nc.Name, np.Name, err)
		}
	}
	return nil
}

// nodePods is what scale-down weighs on a node: the pods that would have to move, and those of
// them that ask not to be disrupted.
type nodePods struct{ moving, pinned int }

// podsByNode counts, per node, the pods a deletion would evict (state.Reschedulable), and those
// a karpenter.sh/do-not-disrupt annotation holds now.
func podsByNode(pods []corev1.Pod, now time.Time) map[string]nodePods {
	out := map[string]nodePods{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || !state.Reschedulable(p) {
			continue
		}
		c := out[p.Spec.NodeName]
		c.moving++
		if held, _, _ := state.DoNotDisrupt(p, now); held {
			c.pinned++
		}
		out[p.Spec.NodeName] = c
	}
	return out
}

// scaleDownOrder is the order in which a static pool gives NodeClaims up: those not launched
// yet (no provider ID), then nodes by how much their deletion disrupts (pods that ask not to be
// disrupted first in weight, then pods to move; empty nodes first), oldest name last on a tie.
func scaleDownOrder(claims []karpv1.NodeClaim, pods map[string]nodePods) []*karpv1.NodeClaim {
	out := make([]*karpv1.NodeClaim, len(claims))
	for i := range claims {
		out[i] = &claims[i]
	}
	slices.SortStableFunc(out, func(a, b *karpv1.NodeClaim) int {
		pa, pb := pods[a.Status.NodeName], pods[b.Status.NodeName]
		return cmp.Or(
			cmp.Compare(boolInt(a.Status.ProviderID != ""), boolInt(b.Status.ProviderID != "")),
			cmp.Compare(pa.pinned, pb.pinned),
			cmp.Compare(pa.moving, pb.moving),
			cmp.Compare(a.Name, b.Name))
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetupWithManager runs the controller for NodePools, and again when one of a pool's
// NodeClaims is created or deleted.
func (s *Static) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("static.capacity").
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if pool := o.GetLabels()[karpv1.LabelNodePool]; pool != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
			}
			return nil
		})).
		Complete(s)
}
