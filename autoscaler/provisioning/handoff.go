package provisioning

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// handOffTTL is how long a pod may stay pending while nominated to a node before the
// provisioner takes the nomination back and plans the pod again (Karpenter keeps its own
// nominations for twice the batch maximum, 20 s). A nomination the pod no longer fits under
// goes at once.
const handOffTTL = 20 * time.Second

// nominatedSince is when the provisioner first saw a pending pod nominated to a node.
type nominatedSince struct {
	node  string
	since time.Time
}

// staleNominations returns the pending pods whose status.nominatedNodeName should be cleared:
// the lifecycle's hand-off (or a nomination from before a restart) that did not work out. The
// kube-scheduler keeps a nomination it cannot honour when preemption would not help, and a
// nominated pod is not provisionable (it looks like a preemption in progress), so without this
// such a pod stays Pending for good. A nomination is stale when the pod does not fit in the
// node's free room, or when the pod has been pending under it for handOffTTL. Nominations to a
// node karpool does not manage, or to one where pods are terminating (a preemption may be under
// way), are the scheduler's and are left alone. A nomination to a node a launched NodeClaim
// still waits for (expected: the hand-off made while its instance boots) is not stale: its
// time starts when the node exists. seen remembers when each nomination was first seen; it is
// updated in place.
func staleNominations(c *state.Cluster, expected map[string]bool, seen map[types.UID]nominatedSince, now time.Time) []*corev1.Pod {
	managed := map[string]bool{}
	for _, nc := range c.NodeClaims {
		if n := c.NodeFor(nc); n != nil {
			managed[n.Name] = true
		}
	}
	nodes := make(map[string]*corev1.Node, len(c.Nodes))
	for _, n := range c.Nodes {
		nodes[n.Name] = n
	}
	var stale []*corev1.Pod
	live := map[types.UID]bool{}
	for _, pod := range c.Pods {
		name := pod.Status.NominatedNodeName
		if name == "" || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		node, exists := nodes[name]
		if !exists && expected[name] || exists && (!managed[name] || preempting(c.PodsOn(name), name)) {
			continue
		}
		s, ok := seen[pod.UID]
		if !ok || s.node != name {
			s = nominatedSince{node: name, since: now}
			seen[pod.UID] = s
		}
		live[pod.UID] = true
		if now.Sub(s.since) >= handOffTTL || (exists && !fitsFreeRoom(pod, node, c.PodsOn(name))) {
			stale = append(stale, pod)
		}
	}
	for uid := range seen {
		if !live[uid] {
			delete(seen, uid)
		}
	}
	return stale
}

// preempting reports whether pods bound to the node are terminating: the scheduler nominates a
// preemptor to a node while its victims go.
func preempting(pods []*corev1.Pod, node string) bool {
	for _, p := range pods {
		if p.Spec.NodeName == node && p.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// fitsFreeRoom reports whether the pod's requests fit in the node's allocatable less what the
// pods bound to it request (finished pods take nothing). A node that has not reported its
// allocatable yet gives no evidence either way.
func fitsFreeRoom(pod *corev1.Pod, node *corev1.Node, pods []*corev1.Pod) bool {
	if len(node.Status.Allocatable) == 0 {
		return true // not reported yet: no evidence the pod does not fit
	}
	free, _ := scheduling.ToResources(node.Status.Allocatable)
	for _, p := range pods {
		if p.Spec.NodeName != node.Name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		used, _ := scheduling.PodRequests(p)
		for r := range catalog.NumResources {
			free[r] -= used[r]
		}
	}
	want, _ := scheduling.PodRequests(pod)
	for r := range catalog.NumResources {
		if want[r] > free[r] {
			return false
		}
	}
	return true
}

// clearNominations takes stale nominations back, each only if it is still the one seen (an
// optimistic lock, so a nomination the scheduler made meanwhile stays). The pods' updates
// trigger the next round, which plans them again.
func (p *Provisioner) clearNominations(ctx context.Context, pods []*corev1.Pod) {
	cleared := 0
	for _, pod := range pods {
		if err := p.client.Status().Patch(ctx, pod.DeepCopy(), state.NominationPatch(pod, "")); err != nil {
			log.FromContext(ctx).V(1).Info("could not clear a stale nomination", "Pod", klog.KObj(pod), "error", err.Error())
			continue
		}
		cleared++
		if p.opts.Recorder != nil {
			p.opts.Recorder.Eventf(pod, corev1.EventTypeNormal, "NominationCleared",
				"Pod was nominated to node %s and has not been scheduled there; planning it again", pod.Status.NominatedNodeName)
		}
	}
	if cleared > 0 {
		log.FromContext(ctx).Info("cleared stale nominations; the pods are planned again", "pods", cleared)
	}
}
