// Package builders makes the Kubernetes objects the autoscaler's unit tests need — NodeClaims,
// NodePools, EC2NodeClasses, Nodes and Pods — with functional options, so a test states only
// what its rule depends on. Defaults: NodeClaims belong to NodePool "default" and EC2NodeClass
// "default", pods live in namespace "default", and UIDs are "uid-" + name.
package builders

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// ClaimOption changes a NodeClaim.
type ClaimOption func(*karpv1.NodeClaim)

// NodeClaim builds a NodeClaim of pool "default" and class "default", created at the zero time.
func NodeClaim(name string, opts ...ClaimOption) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Spec:       karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
	}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

// CreatedAt sets the creation time.
func CreatedAt(t time.Time) ClaimOption {
	return func(nc *karpv1.NodeClaim) { nc.CreationTimestamp = metav1.NewTime(t) }
}

// WithFinalizer adds the termination finalizer.
func WithFinalizer() ClaimOption {
	return func(nc *karpv1.NodeClaim) { nc.Finalizers = append(nc.Finalizers, karpv1.TerminationFinalizer) }
}

// DeletingSince marks the NodeClaim deleted at t; it keeps the termination finalizer.
func DeletingSince(t time.Time) ClaimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.DeletionTimestamp = &metav1.Time{Time: t}
		if len(nc.Finalizers) == 0 {
			nc.Finalizers = []string{karpv1.TerminationFinalizer}
		}
	}
}

// Launched gives the NodeClaim an instance and a Launched=True condition at t.
func Launched(providerID string, t time.Time) ClaimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.Status.ProviderID = providerID
		nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(t))
	}
}

// Registered sets the node name and a Registered=True condition at t.
func Registered(node string, t time.Time) ClaimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.Status.NodeName = node
		nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(t))
	}
}

// Initialized sets an Initialized=True condition at t.
func Initialized(t time.Time) ClaimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(t))
	}
}

// Requirement adds a requirement.
func Requirement(key string, op corev1.NodeSelectorOperator, values ...string) ClaimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
}

// StartupTaint adds a startup taint (NoSchedule).
func StartupTaint(key string) ClaimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.Spec.StartupTaints = append(nc.Spec.StartupTaints, karpv1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

// TerminationGracePeriod sets spec.terminationGracePeriod.
func TerminationGracePeriod(d time.Duration) ClaimOption {
	return func(nc *karpv1.NodeClaim) { nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: d} }
}

// ExpireAfter sets spec.expireAfter (nil: Never).
func ExpireAfter(d *time.Duration) ClaimOption {
	return func(nc *karpv1.NodeClaim) { nc.Spec.ExpireAfter = &karpv1.NillableDuration{Duration: d} }
}

// PoolOption changes a NodePool.
type PoolOption func(*karpv1.NodePool)

// NodePool builds a NodePool of class "default" whose nodes are never consolidated.
func NodePool(name string, opts ...PoolOption) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	for _, o := range opts {
		o(np)
	}
	return np
}

// NodeClass builds an EC2NodeClass; ready gives it Ready=True for its generation.
func NodeClass(name string, ready bool) *awsv1.EC2NodeClass {
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
	if ready {
		class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: "Ready"}}
	}
	return class
}

// NodeOption changes a Node.
type NodeOption func(*corev1.Node)

// Node builds a Node with this provider ID.
func Node(name, providerID string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Ready gives the node a Ready=True condition.
func Ready() NodeOption {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
	}
}

// Taint adds a NoSchedule taint.
func Taint(key string) NodeOption {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

// PodOption changes a Pod.
type PodOption func(*corev1.Pod)

// Pod builds a pod in namespace "default" with one container.
func Pod(name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// OnNode binds the pod to the node.
func OnNode(node string) PodOption { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// Unschedulable marks the pod as the kube-scheduler leaves one it found no node for.
func Unschedulable() PodOption {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable})
	}
}

// CPU sets the container's cpu request.
func CPU(q string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
}

// OwnedByDaemonSet makes a DaemonSet the pod's controller.
func OwnedByDaemonSet() PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "uid-ds", Controller: &yes})
	}
}

// PodAnnotation sets an annotation.
func PodAnnotation(key, value string) PodOption {
	return func(p *corev1.Pod) { p.Annotations = set(p.Annotations, key, value) }
}

// Phase sets the pod's phase.
func Phase(phase corev1.PodPhase) PodOption { return func(p *corev1.Pod) { p.Status.Phase = phase } }

func set(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}
