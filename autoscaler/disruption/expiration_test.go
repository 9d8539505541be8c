package disruption

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// A NodeClaim expires expireAfter after its creation, whatever its budgets and annotations say;
// Never, and NodeClaims already being deleted, do not.
func TestExpiredIgnoresBudgetsAndOptOuts(t *testing.T) {
	t0 := time.Unix(100000, 0)
	c := newCluster([]karpv1.Budget{{Nodes: "0"}}, "old", "young", "never", "leaving")
	life := func(d *time.Duration) *karpv1.NillableDuration { return &karpv1.NillableDuration{Duration: d} }
	for _, nc := range c.claims {
		nc.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Hour))
		nc.Spec.ExpireAfter = life(ptr.To(time.Hour))
	}
	c.claims[0].Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	c.claims[1].Spec.ExpireAfter = life(ptr.To(3 * time.Hour))
	c.claims[2].Spec.ExpireAfter = life(nil)
	c.claims[3].DeletionTimestamp = &metav1.Time{Time: t0}
	if got := nodeClaimNames(expired(c.snapshot(), t0)); !slices.Equal(got, []string{"old"}) {
		t.Errorf("expired %v, want [old]", got)
	}
}

func nodeClaimNames(ncs []*karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range ncs {
		out = append(out, nc.Name)
	}
	return out
}
