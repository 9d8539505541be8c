// Package state is the autoscaler's view of the cluster: one consistent snapshot of the objects
// the provisioner and the status controllers read (pods, nodes, daemonsets, NodePools,
// EC2NodeClasses, NodeClaims, PDBs, namespaces, and the volume claims, volumes and storage
// classes that give pods a volume topology), taken from the manager's informer cache, plus
// the questions those controllers ask of it (which pods are provisionable, which NodeClaims are
// still in flight, which node a NodeClaim became).
//
// Reading from the cache costs no API calls; a snapshot is rebuilt for every provisioning round,
// so nothing here has to be kept in sync incrementally.
package state

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Cluster is a snapshot of the objects the autoscaler reasons about. Slices are sorted by name
// (namespace/name for namespaced kinds) so that everything derived from a snapshot is
// deterministic.
type Cluster struct {
	Pods           []*corev1.Pod
	Nodes          []*corev1.Node
	DaemonSets     []*appsv1.DaemonSet
	NodePools      []*karpv1.NodePool
	NodeClasses    map[string]*awsv1.EC2NodeClass
	NodeClaims     []*karpv1.NodeClaim
	PDBs           []*policyv1.PodDisruptionBudget
	Namespaces     []*corev1.Namespace
	VolumeClaims   []*corev1.PersistentVolumeClaim
	Volumes        []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass

	// podsByNode indexes Pods by the node they take room on (nodeOf); nodesByProviderID indexes Nodes.
	podsByNode        map[string][]*corev1.Pod
	nodesByProviderID map[string]*corev1.Node
}

// Take lists every kind from r (normally the manager's cache) into a snapshot.
func Take(ctx context.Context, r client.Reader) (*Cluster, error) {
	var (
		pods    corev1.PodList
		nodes   corev1.NodeList
		ds      appsv1.DaemonSetList
		pools   karpv1.NodePoolList
		classes awsv1.EC2NodeClassList
		claims  karpv1.NodeClaimList
		pdbs    policyv1.PodDisruptionBudgetList
		nss     corev1.NamespaceList
		pvcs    corev1.PersistentVolumeClaimList
		pvs     corev1.PersistentVolumeList
		scs     storagev1.StorageClassList
	)
	for _, l := range []client.ObjectList{&pods, &nodes, &ds, &pools, &classes, &claims, &pdbs, &nss, &pvcs, &pvs, &scs} {
		if err := r.List(ctx, l); err != nil {
			return nil, fmt.Errorf("list %T: %w", l, err)
		}
	}
	c := &Cluster{
		Pods: Pointers(pods.Items), Nodes: Pointers(nodes.Items), DaemonSets: Pointers(ds.Items),
		NodePools: Pointers(pools.Items), NodeClaims: Pointers(claims.Items), PDBs: Pointers(pdbs.Items),
		Namespaces: Pointers(nss.Items), VolumeClaims: Pointers(pvcs.Items), Volumes: Pointers(pvs.Items),
		StorageClasses: Pointers(scs.Items),
		NodeClasses:    make(map[string]*awsv1.EC2NodeClass, len(classes.Items)),
	}
	for i := range classes.Items {
		c.NodeClasses[classes.Items[i].Name] = &classes.Items[i]
	}
	c.index()
	return c, nil
}

// Pointers points at each item of a list (for New from listed objects).
func Pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// New builds a snapshot from objects already in memory (tests, simulations).
func New(pods []*corev1.Pod, nodes []*corev1.Node, claims []*karpv1.NodeClaim) *Cluster {
	c := &Cluster{Pods: pods, Nodes: nodes, NodeClaims: claims, NodeClasses: map[string]*awsv1.EC2NodeClass{}}
	c.index()
	return c
}

func (c *Cluster) index() {
	sort.Slice(c.Pods, func(i, j int) bool {
		a, b := c.Pods[i], c.Pods[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	sort.Slice(c.NodePools, func(i, j int) bool { return c.NodePools[i].Name < c.NodePools[j].Name })
	sort.Slice(c.NodeClaims, func(i, j int) bool { return c.NodeClaims[i].Name < c.NodeClaims[j].Name })
	c.podsByNode = map[string][]*corev1.Pod{}
	for _, p := range c.Pods {
		if node := nodeOf(p); node != "" {
			c.podsByNode[node] = append(c.podsByNode[node], p)
		}
	}
	c.nodesByProviderID = make(map[string]*corev1.Node, len(c.Nodes))
	for _, n := range c.Nodes {
		if n.Spec.ProviderID != "" {
			c.nodesByProviderID[n.Spec.ProviderID] = n
		}
	}
}

// PodsOn returns the pods bound to the node and the pending ones nominated to it.
func (c *Cluster) PodsOn(node string) []*corev1.Pod { return c.podsByNode[node] }

// nodeOf is the node a pod takes room on: the one it is bound to, or, while it is pending, the
// one it is nominated to (by the kube-scheduler's preemption, or by the autoscaler's hand-off
// when the node registered). The scheduler counts nominated pods against a node's room, so the
// autoscaler must too, or it plans other pods into room that is already promised.
func nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if p.DeletionTimestamp == nil {
		return p.Status.NominatedNodeName
	}
	return ""
}

// NodeFor returns the Node a NodeClaim's instance registered as, if any.
func (c *Cluster) NodeFor(nc *karpv1.NodeClaim) *corev1.Node {
	if nc.Status.ProviderID == "" {
		return nil
	}
	return c.nodesByProviderID[nc.Status.ProviderID]
}

// Provisionable reports whether the autoscaler should find capacity for the pod: the
// kube-scheduler tried and found no node (PodScheduled=False, reason Unschedulable), and the pod
// is pending (see waiting).
func Provisionable(p *corev1.Pod) bool {
	if !waiting(p) {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Untried reports whether the pod waits for the default kube-scheduler's first look: pending (see
// waiting), not gated, and without a PodScheduled condition. On a scale-out of a thousand pods
// the scheduler needs seconds to try each one once; Karpenter waits for every verdict, karpool
// plans for such pods as soon as they stop arriving. Pods of other schedulers wait for their
// verdict.
func Untried(p *corev1.Pod) bool {
	if !waiting(p) || len(p.Spec.SchedulingGates) > 0 {
		return false
	}
	if p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return false
		}
	}
	return true
}

// waiting: the pod is not bound, not terminating, not finished, not a DaemonSet pod (those
// follow nodes), and not waiting for a preemption the scheduler already started.
func waiting(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.NominatedNodeName != "" {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return !OwnedByDaemonSet(p)
}

// Reschedulable reports whether the pod would have to move if its node went: DaemonSet pods and
// static (mirror) pods stay until the node goes, finished pods need nothing. Draining evicts
// exactly these; a node without them is empty.
func Reschedulable(p *corev1.Pod) bool {
	if OwnedByDaemonSet(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	_, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	return !mirror
}

// DoNotDisrupt reads a pod's karpenter.sh/do-not-disrupt annotation as Karpenter does (v1.12):
// "true" holds the pod's node for good; a positive duration ("30m", "2h") holds it until the pod
// has run that long since status.startTime (until; a pod not started yet is held). Any other
// value holds nothing, and err says why: Karpenter ignores it too, with a warning.
func DoNotDisrupt(p *corev1.Pod, now time.Time) (held bool, until time.Time, err error) {
	v, ok := p.Annotations[karpv1.AnnotationDoNotDisrupt]
	if !ok {
		return false, time.Time{}, nil
	}
	if v == "true" {
		return true, time.Time{}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false, time.Time{}, fmt.Errorf("%s=%q is neither \"true\" nor a positive duration such as \"30m\"; it is ignored", karpv1.AnnotationDoNotDisrupt, v)
	}
	if p.Status.StartTime == nil {
		return true, time.Time{}, nil
	}
	until = p.Status.StartTime.Add(d)
	return now.Before(until), until, nil
}

// OwnedByDaemonSet reports whether a DaemonSet controls the pod.
func OwnedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// ProvisionablePods returns the pods of the snapshot the autoscaler plans for, in snapshot order:
// the provisionable ones, and the untried ones the kube-scheduler could not preempt for (no pod
// on a node has a lower priority, or the pod never preempts): for those it might free room
// instead.
func (c *Cluster) ProvisionablePods() []*corev1.Pod {
	lowest, found := c.lowestBoundPriority()
	var out []*corev1.Pod
	for _, p := range c.Pods {
		if Provisionable(p) || Untried(p) && (!found || !mayPreempt(p, lowest)) {
			out = append(out, p)
		}
	}
	return out
}

// lowestBoundPriority is the lowest priority of the pods running or starting on nodes (found:
// there is one).
func (c *Cluster) lowestBoundPriority() (lowest int32, found bool) {
	for _, p := range c.Pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if pr := priority(p); !found || pr < lowest {
			lowest, found = pr, true
		}
	}
	return lowest, found
}

// mayPreempt: the pod's priority is above lowest and its preemption policy lets it preempt.
func mayPreempt(p *corev1.Pod, lowest int32) bool {
	if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false
	}
	return priority(p) > lowest
}

// priority is the pod's resolved priority (0 when the admission plugin set none).
func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// Launched reports whether the NodeClaim's instance exists (status.providerID is set).
func Launched(nc *karpv1.NodeClaim) bool { return nc.Status.ProviderID != "" }

// QuietSince is when a pod last came to or left the NodeClaim's node (status.lastPodEventTime),
// or when the NodeClaim was initialized if that is later: consolidateAfter counts from it. ok is
// false while the NodeClaim is not initialized.
func QuietSince(nc *karpv1.NodeClaim) (since time.Time, ok bool) {
	initialized := Condition(nc, karpv1.ConditionTypeInitialized)
	if initialized == nil || initialized.Status != metav1.ConditionTrue {
		return time.Time{}, false
	}
	since = initialized.LastTransitionTime.Time
	if nc.Status.LastPodEventTime.After(since) {
		since = nc.Status.LastPodEventTime.Time
	}
	return since, true
}

// Condition returns the NodeClaim's condition of that type, or nil.
func Condition(nc *karpv1.NodeClaim, t string) *karpv1.Condition {
	for i := range nc.Status.Conditions {
		if nc.Status.Conditions[i].Type == t {
			return &nc.Status.Conditions[i]
		}
	}
	return nil
}

// IsTrue reports whether the NodeClaim's condition of that type is True.
func IsTrue(nc *karpv1.NodeClaim, t string) bool {
	c := Condition(nc, t)
	return c != nil && c.Status == "True"
}

// IsFalse reports whether the NodeClaim's condition of that type is False.
func IsFalse(nc *karpv1.NodeClaim, t string) bool {
	c := Condition(nc, t)
	return c != nil && c.Status == "False"
}

// NodeClassReady reports whether an EC2NodeClass exists and says Ready=True for its current
// generation, and if not, why (for the NodePool's NodeClassReady condition).
func (c *Cluster) NodeClassReady(np *karpv1.NodePool) (*awsv1.EC2NodeClass, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, "spec.template.spec.nodeClassRef is empty"
	}
	nc, ok := c.NodeClasses[ref.Name]
	if !ok {
		return nil, fmt.Sprintf("EC2NodeClass %q does not exist; create it or fix spec.template.spec.nodeClassRef.name", ref.Name)
	}
	if why := ClassNotReady(nc); why != "" {
		return nil, why
	}
	return nc, ""
}

// ClassNotReady is why an EC2NodeClass cannot be launched from ("" when it can): it must say
// Ready=True for its current generation and not be deleting. Pools (their NodeClassReady
// condition) and launches judge a class by this one rule.
func ClassNotReady(nc *awsv1.EC2NodeClass) string {
	if nc.DeletionTimestamp != nil {
		return fmt.Sprintf("EC2NodeClass %q is being deleted", nc.Name)
	}
	for _, cond := range nc.Status.Conditions {
		if cond.Type != "Ready" {
			continue
		}
		if cond.Status == "True" && cond.ObservedGeneration >= nc.Generation {
			return ""
		}
		if cond.Status == "True" {
			return fmt.Sprintf("EC2NodeClass %q has not been resolved since its last change", nc.Name)
		}
		msg := cond.Message
		if msg == "" {
			msg = cond.Reason
		}
		return fmt.Sprintf("EC2NodeClass %q is not ready: %s", nc.Name, msg)
	}
	return fmt.Sprintf("EC2NodeClass %q has no Ready condition yet", nc.Name)
}

// NominationPatch sets a pending pod's status.nominatedNodeName to node, or clears it when node
// is empty, only if the pod is still at the resourceVersion read (a nomination someone else made
// meanwhile stays). It is written out rather than diffed from two copies of the pod: a hand-off
// sends one per planned pod, a thousand in a large scale-out.
func NominationPatch(pod *corev1.Pod, node string) client.Patch {
	var nominated any // JSON null removes the field
	if node != "" {
		nominated = node
	}
	body, _ := json.Marshal(map[string]any{ // maps of strings always marshal
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"nominatedNodeName": nominated},
	})
	return client.RawPatch(types.MergePatchType, body)
}
