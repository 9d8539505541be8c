package provisioning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// handOffCluster has a 4-cpu node karpool launched ("managed", 3 cpu bound to it), a node it did
// not launch ("other"), and a managed node where a pod is terminating ("preempting").
func handOffCluster(pending ...*corev1.Pod) *state.Cluster {
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + name},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}}}
	}
	claim := func(name string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + name}, Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + name}}
	}
	bound := func(name, node, cpu string) *corev1.Pod {
		p := pendingPod(name, cpu)
		p.Spec.NodeName = node
		return p
	}
	victim := bound("victim", "preempting", "1")
	victim.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
	pods := append([]*corev1.Pod{bound("big", "managed", "3"), victim}, pending...)
	return state.New(pods, []*corev1.Node{node("managed"), node("other"), node("preempting")},
		[]*karpv1.NodeClaim{claim("managed"), claim("preempting")})
}

func nominatedPod(name, cpu, node string) *corev1.Pod {
	p := pendingPod(name, cpu)
	p.Status.NominatedNodeName = node
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// A hand-off that cannot work out is taken back: at once when the pod no longer fits in its
// node's free room, after handOffTTL otherwise; the scheduler's nominations (a node karpool does
// not manage, a node where a preemption is under way) are never touched, nor the hand-off made
// at launch to a node still booting, however long it boots.
func TestStaleNominations(t *testing.T) {
	pods := []*corev1.Pod{
		nominatedPod("fits", "1", "managed"),
		nominatedPod("too-big", "2", "managed"),
		nominatedPod("elsewhere", "8", "other"),
		nominatedPod("preemptor", "8", "preempting"),
		nominatedPod("node-gone", "1", "deleted-node"),
		nominatedPod("booting", "1", "ip-10-0-0-9.ec2.internal"),
	}
	expected := map[string]bool{"ip-10-0-0-9.ec2.internal": true}
	seen := map[k8stypes.UID]nominatedSince{}
	t0 := time.Unix(1000, 0)
	if got := names(staleNominations(handOffCluster(pods...), expected, seen, t0)); !slices.Equal(got, []string{"too-big"}) {
		t.Errorf("stale at once: %v, want [too-big]", got)
	}
	if got := names(staleNominations(handOffCluster(pods...), expected, seen, t0.Add(handOffTTL-time.Second))); !slices.Equal(got, []string{"too-big"}) {
		t.Errorf("stale just before the TTL: %v, want [too-big]", got)
	}
	want := []string{"fits", "node-gone", "too-big"}
	if got := names(staleNominations(handOffCluster(pods...), expected, seen, t0.Add(handOffTTL))); !slices.Equal(got, want) {
		t.Errorf("stale after the TTL: %v, want %v", got, want)
	}
	// Once no NodeClaim expects the booting node (it registered under another name, or its
	// NodeClaim is gone), its nomination is timed like any other.
	staleNominations(handOffCluster(pods...), nil, seen, t0.Add(handOffTTL))
	if got := names(staleNominations(handOffCluster(pods...), nil, seen, t0.Add(2*handOffTTL))); !slices.Contains(got, "booting") {
		t.Errorf("stale once nothing expects the node: %v, want booting among them", got)
	}

	// A new nomination starts a new clock; pods no longer nominated are forgotten.
	renominated := nominatedPod("fits", "1", "another-node")
	staleNominations(handOffCluster(renominated), nil, seen, t0.Add(handOffTTL))
	if len(seen) != 1 || seen[renominated.UID].since != t0.Add(handOffTTL) {
		t.Errorf("seen after a re-nomination: %v, want only %s since the re-nomination", seen, renominated.UID)
	}
}

// A node that has not reported its allocatable gives no reason to take a nomination back.
func TestStaleNominationsWaitForAllocatable(t *testing.T) {
	c := handOffCluster(nominatedPod("p", "1", "managed"))
	c.Nodes[0].Status.Allocatable = nil
	if got := staleNominations(c, nil, map[k8stypes.UID]nominatedSince{}, time.Unix(0, 0)); len(got) != 0 {
		t.Errorf("stale: %v, want none before the node reports its allocatable", names(got))
	}
}
