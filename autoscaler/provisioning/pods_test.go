package provisioning

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/state"
)

// The pod watcher asks for a round for a pod the kube-scheduler failed or has not tried; a
// failed pod that was planned onto a NodeClaim whose node is on its way gets its nomination
// instead (the scheduler dropped it, or the pod had none yet), and no round.
func TestPodWatcherHandsBackNominations(t *testing.T) {
	unschedulable := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	pod := func(name string, conds []corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: types.UID(name)}, Status: corev1.PodStatus{Conditions: conds}}
	}
	planned, unplanned, untried := pod("planned", unschedulable), pod("unplanned", unschedulable), pod("untried", nil)
	c := fake.NewClientBuilder().WithObjects(planned, unplanned, untried).WithStatusSubresource(&corev1.Pod{}).Build()
	noms := state.NewNominations()
	noms.Nominate("c1", planned, untried)
	noms.Expect("c1", "ip-10-0-0-1.ec2.internal")
	p := New(c, Options{Nominations: noms})
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w := NewPodWatcher(c, p, m)
	for _, tc := range []struct {
		pod               string
		nominated         string
		wantsProvisioning bool
	}{
		{"planned", "ip-10-0-0-1.ec2.internal", false},
		{"unplanned", "", true},
		{"untried", "", true}, // the scheduler's first try would drop a nomination
	} {
		key := types.NamespacedName{Namespace: "web", Name: tc.pod}
		if _, err := w.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		var got corev1.Pod
		if err := c.Get(context.Background(), key, &got); err != nil {
			t.Fatal(err)
		}
		if round := armed(p); got.Status.NominatedNodeName != tc.nominated || round != tc.wantsProvisioning {
			t.Errorf("%s: nominated to %q, round asked for: %v; want %q, %v", tc.pod, got.Status.NominatedNodeName, round, tc.nominated, tc.wantsProvisioning)
		}
	}
}
