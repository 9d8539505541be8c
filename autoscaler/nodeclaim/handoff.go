package nodeclaim

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// handOffParallelism bounds the pod status patches of one hand-off: at least 10, and one per
// 4 pods above that, so that the hand-offs of a decision's NodeClaims, which run side by side
// and all keep their cohort closed, end together rather than the largest one last.
func handOffParallelism(pods int) int { return max(10, pods/4) }

// earlyHandOffLimit bounds a hand-off started at launch, which outlives the reconcile.
const earlyHandOffLimit = time.Minute

// handOff tells the kube-scheduler where the provisioner planned the NodeClaim's pods: each
// pending pod's status.nominatedNodeName becomes the node (KEP-5278: a component that plans pods
// onto new nodes may say so there, if no one else has). The scheduler tries a pod's nominated
// node first and counts the pods nominated to a node against its room, so the first nodes to
// come up do not take the pods planned for NodeClaims still on their way (whose own pods would
// then start another round of provisioning).
//
// It runs at launch when the cloud knows the node's name (handOffAtLaunch), at registration,
// before the unregistered taint goes, for what the launch's hand-off missed or named wrongly
// (replaceable: the name it guessed), and again at initialization for pods whose nomination the
// scheduler dropped meanwhile. At launch (atLaunch) it leaves out the pods the scheduler has not
// tried yet: their first try would drop the nomination while the instance boots, and the pod
// watcher nominates them once it has (provisioning.PodWatcher.handBack). Pods nominated
// elsewhere by anyone else are left alone. The provisioner takes back nominations that went
// stale (provisioning.staleNominations). Failures only lose the hint. It returns how many pods
// it nominated.
func (l *Lifecycle) handOff(ctx context.Context, claim, node, replaceable string, atLaunch bool) int {
	pods := l.opts.Nominations.Pods(claim)
	var handed atomic.Int32
	workqueue.ParallelizeUntil(ctx, handOffParallelism(len(pods)), len(pods), func(i int) {
		var pod corev1.Pod
		if err := l.client.Get(ctx, pods[i], &pod); err != nil || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || atLaunch && state.Untried(&pod) {
			return
		}
		if nominated := pod.Status.NominatedNodeName; nominated == node || nominated != "" && nominated != replaceable {
			return
		}
		if err := l.client.Status().Patch(ctx, &pod, state.NominationPatch(&pod, node)); err != nil {
			log.FromContext(ctx).V(1).Info("could not nominate pod to its node", "Pod", klog.KObj(&pod), "Node", node, "error", err.Error())
			return
		}
		handed.Add(1)
	})
	n := int(handed.Load())
	if n > 0 {
		log.FromContext(ctx).Info("nominated planned pods to their node", "Node", klog.KRef("", node), "pods", n)
	}
	return n
}

// handOffAtLaunch hands the new NodeClaim's planned pods to the node name the cloud expects its
// instance to register under, in the background: the pod status writes then overlap the
// instance's boot (30-60 s on EC2) instead of keeping its node, and its cohort, closed after
// registration while they are written. Until the node exists the provisioner keeps the
// nominations (state.Nominations.ExpectedNodes). Registration waits for it to end.
func (l *Lifecycle) handOffAtLaunch(ctx context.Context, nc *karpv1.NodeClaim, node string) {
	if node == "" || l.opts.Nominations.HandedOff(nc.Name) {
		return
	}
	l.opts.Nominations.Expect(nc.Name, node)
	done := make(chan struct{})
	l.early.Store(nc.UID, done)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), earlyHandOffLimit)
	go func() {
		defer cancel()
		defer close(done)
		l.handOff(ctx, nc.Name, node, "", true)
	}()
}

// awaitEarlyHandOff waits until the hand-off started at the NodeClaim's launch, if any, ends.
func (l *Lifecycle) awaitEarlyHandOff(ctx context.Context, nc *karpv1.NodeClaim) {
	v, ok := l.early.LoadAndDelete(nc.UID)
	if !ok {
		return
	}
	select {
	case <-v.(chan struct{}):
	case <-ctx.Done():
	}
}
