// Package nodeclaim runs a NodeClaim's life: launch its instance through the cloud provider,
// register the Node the instance's kubelet creates (labels, taints, finalizer), mark it
// initialized once it is ready, give up on instances that never join, and — when the NodeClaim
// or its Node is deleted — drain the node and terminate the instance before letting go of the
// finalizers. It also garbage-collects NodeClaims whose instance vanished and instances without a
// NodeClaim.
package nodeclaim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/state"
)

// Options configure the NodeClaim controllers.
type Options struct {
	Provider cloud.CloudProvider
	// RegistrationTTL is how long a launched instance may take to register its Node before the
	// NodeClaim is deleted and the instance terminated (default 15 min).
	RegistrationTTL time.Duration
	Recorder        record.EventRecorder
	Metrics         *metrics.Metrics
	// CapacityGone is called when a NodeClaim goes away without having served its pods (a
	// launch without capacity, a registration timeout, a deletion), so the provisioner looks at
	// the pending pods again at once.
	CapacityGone func()
	// Nominations is the provisioner's record of the pods it planned onto each NodeClaim and of
	// the NodeClaims it created together: registration hands the pods to the kube-scheduler
	// and opens a decision's nodes together (see cohortWaiting).
	Nominations *state.Nominations
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.RegistrationTTL <= 0 {
		o.RegistrationTTL = 15 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CapacityGone == nil {
		o.CapacityGone = func() {}
	}
	if o.Nominations == nil {
		o.Nominations = state.NewNominations()
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
}

// Lifecycle reconciles NodeClaims.
type Lifecycle struct {
	client client.Client
	opts   Options
	// launched remembers the NodeClaims (by UID) this process launched: the informer cache
	// may still show one unlaunched for a moment after its status was written, and a second
	// launch would only find the same instance again, but log and count it twice.
	launched sync.Map
	// early holds, by NodeClaim UID, a channel closed when the hand-off started at launch ends.
	early sync.Map
}

// NewLifecycle returns the NodeClaim lifecycle reconciler.
func NewLifecycle(c client.Client, opts Options) *Lifecycle {
	opts.defaults()
	return &Lifecycle{client: c, opts: opts}
}

// waitingForNode is how often a NodeClaim waiting for its Node is looked at again when no Node
// event arrives; Node events wake it earlier.
const waitingForNode = 5 * time.Second

// launchRetry is the wait before retrying a launch that failed for a reason other than capacity.
const launchRetry = 10 * time.Second

// Reconcile moves the NodeClaim one step along its lifecycle.
func (l *Lifecycle) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := l.client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		return l.finalize(ctx, nc)
	}
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		patch := client.MergeFrom(nc.DeepCopy())
		controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
		if err := l.client.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !state.Launched(nc) {
		if _, done := l.launched.Load(nc.UID); done {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return l.launch(ctx, nc)
	}
	if !isTrue(nc, karpv1.ConditionTypeRegistered) {
		return l.register(ctx, nc)
	}
	if !isTrue(nc, karpv1.ConditionTypeInitialized) {
		return l.initialize(ctx, nc)
	}
	return reconcile.Result{}, nil
}

func isTrue(nc *karpv1.NodeClaim, t string) bool { return state.IsTrue(nc, t) }

// requeueOnConflict turns a conflict (another reconcile got there first) into a quiet
// requeue that starts over from the stored object; other errors are returned.
func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}

// launch creates the instance. The cloud provider is idempotent per NodeClaim UID, so a launch
// interrupted after the instance was created (crash, lost response) finds the same instance on
// the next attempt instead of creating a second one.
func (l *Lifecycle) launch(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	before := nc.DeepCopy()
	now := metav1.NewTime(l.opts.Now())
	class, err := l.nodeClass(ctx, nc)
	if err != nil {
		nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "NodeClassNotReady", err.Error(), now)
		setReady(nc, now)
		return reconcile.Result{RequeueAfter: 10 * time.Second}, l.patchStatus(ctx, before, nc)
	}
	launched, err := l.opts.Provider.Create(ctx, nc, class)
	var ice *cloud.InsufficientCapacityError
	switch {
	case errors.As(err, &ice):
		logger.Error(err, "failed launching nodeclaim")
		l.opts.Recorder.Eventf(nc, corev1.EventTypeWarning, "InsufficientCapacityError", "NodeClaim %s event: %s", nc.Name, err.Error())
		// Nothing was launched: drop the NodeClaim so the provisioner plans again without the
		// offerings that just failed.
		if err := l.client.Delete(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		l.opts.CapacityGone()
		return reconcile.Result{}, nil
	case err != nil:
		nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", err.Error(), now)
		setReady(nc, now)
		if perr := l.patchStatus(ctx, before, nc); perr != nil {
			return reconcile.Result{}, perr
		}
		// A steady retry rather than the controller's exponential backoff (which reaches
		// minutes): the cause is often fixed outside (a class, a quota, a role).
		logger.Error(err, "failed launching nodeclaim")
		return reconcile.Result{RequeueAfter: launchRetry}, nil
	}
	// Labels first (the instance type, zone and capacity type are facts now) with the hash of
	// the class launched from (drift compares it with the class's later), then status.
	labelled := nc.DeepCopy()
	if labelled.Labels == nil {
		labelled.Labels = map[string]string{}
	}
	for k, v := range launched.Labels {
		labelled.Labels[k] = v
	}
	if labelled.Annotations == nil {
		labelled.Annotations = map[string]string{}
	}
	labelled.Annotations[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
	labelled.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	if err := l.client.Patch(ctx, labelled, client.MergeFrom(nc)); err != nil {
		return reconcile.Result{}, err
	}
	before = labelled.DeepCopy()
	labelled.Status.ProviderID = launched.Status.ProviderID
	labelled.Status.ImageID = launched.Status.ImageID
	labelled.Status.Capacity = launched.Status.Capacity
	labelled.Status.Allocatable = launched.Status.Allocatable
	labelled.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", now)
	labelled.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, "AwaitingNode", "waiting for the instance's node to register", now)
	setReady(labelled, now)
	if err := l.patchStatus(ctx, before, labelled); err != nil {
		return reconcile.Result{}, err
	}
	l.launched.Store(nc.UID, true)
	l.handOffAtLaunch(ctx, nc, launched.Status.NodeName)
	logger.Info("launched nodeclaim", "provider-id", launched.Status.ProviderID,
		"instance-type", launched.Labels[corev1.LabelInstanceTypeStable],
		"zone", launched.Labels[corev1.LabelTopologyZone],
		"capacity-type", launched.Labels[karpv1.LabelCapacityType],
		"allocatable", launched.Status.Allocatable)
	l.opts.Recorder.Eventf(labelled, corev1.EventTypeNormal, "Launched", "Status condition transitioned, Type: Launched, Status: True, Reason: Launched")
	if l.opts.Metrics != nil {
		l.opts.Metrics.NodeClaimsLaunched.WithLabelValues(labelled.Labels[karpv1.LabelNodePool]).Inc()
	}
	return reconcile.Result{RequeueAfter: waitingForNode}, nil
}

// register adopts the Node whose providerID matches: it gets the NodeClaim's labels and taints,
// the termination finalizer and an owner reference, loses the unregistered taint, and is
// labelled karpenter.sh/registered. A NodeClaim whose Node does not show up within the
// registration TTL is deleted (which terminates its instance).
func (l *Lifecycle) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	node, err := l.nodeOf(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := l.opts.Now()
	if node == nil {
		age := now.Sub(nc.CreationTimestamp.Time)
		if age < l.opts.RegistrationTTL {
			return reconcile.Result{RequeueAfter: min(waitingForNode, l.opts.RegistrationTTL-age)}, nil
		}
		logger.Info("deleting nodeclaim, node did not register", "ttl", l.opts.RegistrationTTL.String(), "provider-id", nc.Status.ProviderID)
		l.opts.Recorder.Eventf(nc, corev1.EventTypeWarning, "RegistrationTimeout", "Node for %s did not register within %s; terminating the instance", nc.Status.ProviderID, l.opts.RegistrationTTL)
		if err := l.client.Delete(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		l.opts.CapacityGone()
		return reconcile.Result{}, nil
	}
	// The node stays closed (unregistered taint) while its cohort catches up: a NodeClaim
	// counts as handed off once its first pass is done, so the cohort opens after every pod
	// of the decision has its nomination. Nominations the kube-scheduler drops meanwhile go
	// back to the node the NodeClaim now expects (provisioning.PodWatcher.handBack).
	if !l.opts.Nominations.HandedOff(nc.Name) {
		l.awaitEarlyHandOff(ctx, nc)
		l.handOff(ctx, nc.Name, node.Name, l.opts.Nominations.Expected(nc.Name), false)
		l.opts.Nominations.Expect(nc.Name, node.Name)
		now = l.opts.Now()
	}
	if handed, _ := l.opts.Nominations.HandOff(nc.Name, now); l.cohortWaiting(ctx, nc, handed, now) {
		return reconcile.Result{RequeueAfter: cohortPoll}, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	adoptNode(node, nc)
	if err := l.client.Patch(ctx, node, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("registering node %s: %w", node.Name, err)
	}
	before := nc.DeepCopy()
	nc.Status.NodeName = node.Name
	mt := metav1.NewTime(now)
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", mt)
	nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "AwaitingInitialization", "waiting for the node to become ready", mt)
	setReady(nc, mt)
	if err := l.patchTransition(ctx, before, nc); err != nil {
		return requeueOnConflict(err)
	}
	l.opts.Nominations.Registered(nc.Name)
	logger.Info("registered nodeclaim", "Node", klog.KRef("", node.Name))
	if l.opts.Metrics != nil {
		l.opts.Metrics.NodeClaimsRegistered.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Inc()
		l.opts.Metrics.NodesCreated.WithLabelValues(nc.Labels[karpv1.LabelNodePool], nc.Labels[corev1.LabelTopologyZone]).Inc()
	}
	return l.initialize(ctx, nc)
}

// A cohort's nodes open together, at most openTogether after the first was ready to. Each
// node that opens makes the kube-scheduler try every pending pod again; while only some are
// open, the pods planned for the others fail there (the open nodes' room is kept for the pods
// nominated to them), each failure a full filter and preemption pass over every node with its
// nominated pods, and those pods lose their nominations. Opened one by one over a few seconds,
// 18 nodes took 5 s to take 300 pods; opened together, fewer pods strayed from the plan (fewer
// extra nodes), though every pod ran no sooner (BENCHMARKS.md, session 16).
const (
	openTogether = 3 * time.Second
	cohortPoll   = 100 * time.Millisecond
)

// cohortWaiting says whether the NodeClaim's node should stay closed for its cohort: another
// NodeClaim of the same decision is still on its way (not gone, not failed to launch, neither
// handed off nor registered) and the wait has not reached openTogether.
func (l *Lifecycle) cohortWaiting(ctx context.Context, nc *karpv1.NodeClaim, handed, now time.Time) bool {
	if now.Sub(handed) >= openTogether {
		return false
	}
	for _, name := range l.opts.Nominations.Cohort(nc.Name) {
		if name == nc.Name || l.opts.Nominations.HandedOff(name) {
			continue
		}
		var other karpv1.NodeClaim
		if err := l.client.Get(ctx, client.ObjectKey{Name: name}, &other); err != nil || other.DeletionTimestamp != nil {
			continue
		}
		if state.IsTrue(&other, karpv1.ConditionTypeRegistered) || state.IsFalse(&other, karpv1.ConditionTypeLaunched) {
			continue
		}
		return true
	}
	return false
}

// adoptNode applies what registration puts on the Node (pure, so it can be tested alone).
// Startup taints are only added here, once: whatever removes them later must not see them come
// back.
func adoptNode(node *corev1.Node, nc *karpv1.NodeClaim) {
	// A node labelled do-not-sync-taints (by its provider, before registration) manages its
	// own taints: only the unregistered taint is removed, as in Karpenter.
	syncTaints := node.Labels[karpv1.LabelDoNotSyncTaints] != "true"
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	node.Labels[karpv1.LabelNodeRegistered] = "true"
	if len(nc.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range nc.Annotations {
		node.Annotations[k] = v
	}
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != karpv1.TaintKeyUnregistered {
			taints = append(taints, t)
		}
	}
	for _, group := range [][]karpv1.Taint{nc.Spec.Taints, nc.Spec.StartupTaints} {
		for _, t := range group {
			if syncTaints && !hasTaint(taints, t.Key, t.Effect) {
				taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			}
		}
	}
	node.Spec.Taints = taints
	controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	for _, o := range node.OwnerReferences {
		if o.UID == nc.UID {
			return
		}
	}
	node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{
		APIVersion: karpv1.GroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID,
		BlockOwnerDeletion: ptrTrue(),
	})
}

func ptrTrue() *bool { t := true; return &t }

func hasTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	for _, t := range taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// initialize marks the NodeClaim initialized once its Node is Ready, carries none of the
// startup or cloud-provider taints that keep pods away, and reports every extended resource the
// NodeClaim asked for.
func (l *Lifecycle) initialize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	node, err := l.nodeOf(ctx, nc)
	if err != nil || node == nil {
		return reconcile.Result{RequeueAfter: waitingForNode}, err
	}
	if why := notInitialized(node, nc); why != "" {
		if c := state.Condition(nc, karpv1.ConditionTypeInitialized); c == nil || c.Message != why {
			before := nc.DeepCopy()
			now := metav1.NewTime(l.opts.Now())
			nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "AwaitingInitialization", why, now)
			setReady(nc, now)
			if err := l.patchStatus(ctx, before, nc); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: waitingForNode}, nil
	}
	if node.Labels[karpv1.LabelNodeInitialized] != "true" {
		l.handOff(ctx, nc.Name, node.Name, "", false)
		patch := client.MergeFrom(node.DeepCopy())
		node.Labels[karpv1.LabelNodeInitialized] = "true"
		if err := l.client.Patch(ctx, node, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	before := nc.DeepCopy()
	now := metav1.NewTime(l.opts.Now())
	nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", now)
	setReady(nc, now)
	if err := l.patchTransition(ctx, before, nc); err != nil {
		return requeueOnConflict(err)
	}
	log.FromContext(ctx).Info("initialized nodeclaim", "Node", klog.KRef("", node.Name), "allocatable", node.Status.Allocatable)
	if l.opts.Metrics != nil {
		l.opts.Metrics.NodeClaimsInitialized.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Inc()
	}
	return reconcile.Result{}, nil
}

// notInitialized says what the node still lacks, or "" when it is initialized.
func notInitialized(node *corev1.Node, nc *karpv1.NodeClaim) string {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, t := range nc.Spec.StartupTaints {
		if hasTaint(node.Spec.Taints, t.Key, t.Effect) {
			return fmt.Sprintf("startup taint %q is still on the node", t.Key)
		}
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, "node.cloudprovider.kubernetes.io/uninitialized", karpv1.TaintKeyUnregistered} {
		for _, t := range node.Spec.Taints {
			if t.Key == key {
				return fmt.Sprintf("taint %q is still on the node", key)
			}
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourcePods || name == corev1.ResourceEphemeralStorage || q.IsZero() {
			continue
		}
		if have, ok := node.Status.Allocatable[name]; !ok || have.IsZero() {
			return fmt.Sprintf("extended resource %q is not registered on the node yet", name)
		}
	}
	return ""
}

// nodeOf finds the Node whose spec.providerID is the NodeClaim's.
func (l *Lifecycle) nodeOf(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	return nodeByProviderID(ctx, l.client, nc.Status.ProviderID)
}

func (l *Lifecycle) nodeClass(ctx context.Context, nc *karpv1.NodeClaim) (*awsv1.EC2NodeClass, error) {
	ref := nc.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("spec.nodeClassRef is empty")
	}
	class := &awsv1.EC2NodeClass{}
	if err := l.client.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: %w", ref.Name, err)
	}
	if why := state.ClassNotReady(class); why != "" {
		return nil, errors.New(why)
	}
	return class, nil
}

// patchStatus writes the status change from before to after as a merge patch.
func (l *Lifecycle) patchStatus(ctx context.Context, before, after *karpv1.NodeClaim) error {
	return l.client.Status().Patch(ctx, after, client.MergeFrom(before))
}

// patchTransition writes a one-time status transition (registered, initialized) only if
// before is still the stored version: a reconcile that started from a stale cache copy gets a
// conflict instead of repeating the transition, its log line and its metric.
func (l *Lifecycle) patchTransition(ctx context.Context, before, after *karpv1.NodeClaim) error {
	return l.client.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}
