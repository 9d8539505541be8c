package disruption

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/metrics"
)

// The skipped-nodes gauge counts each pass's verdicts by pool and reason, and forgets the
// reasons of earlier passes.
func TestSkippedNodesCounted(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctl := &Controller{metrics: m}
	snap := newCluster(nil, "a", "b", "c", "d").snapshot()
	ctl.countSkipped(snap, map[string]Verdict{"a": {"PodDisruptionBudget", "..."}, "b": {"PodDisruptionBudget", "..."}},
		map[string]Verdict{"c": {"Balanced", "..."}})
	for reason, want := range map[string]float64{"PodDisruptionBudget": 2, "Balanced": 1} {
		if got := testutil.ToFloat64(m.NotConsolidated.WithLabelValues("default", reason)); got != want {
			t.Errorf("%s: %v nodes, want %v", reason, got, want)
		}
	}
	ctl.countSkipped(snap, map[string]Verdict{"d": {"ConsolidateAfter", "..."}}, nil)
	if n := testutil.CollectAndCount(m.NotConsolidated); n != 1 {
		t.Errorf("%d series after a pass with one verdict, want 1", n)
	}
}

// An unreadable do-not-disrupt value is warned about once per pod and value.
func TestBadDoNotDisruptWarnedOnce(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	ctl := &Controller{recorder: rec}
	c := newCluster(nil, "a")
	p := c.run("a", "cache")
	p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "yes"}
	c.run("a", "plain")
	for range 2 {
		ctl.warnBadDoNotDisrupt(c.snapshot(), time.Now())
	}
	p.Annotations[karpv1.AnnotationDoNotDisrupt] = "1x"
	ctl.warnBadDoNotDisrupt(c.snapshot(), time.Now())
	if n := len(rec.Events); n != 2 {
		t.Fatalf("%d events for two bad values over three passes, want 2", n)
	}
	if e := <-rec.Events; !strings.Contains(e, `InvalidDoNotDisruptAnnotation karpenter.sh/do-not-disrupt="yes" is neither "true" nor a positive duration`) {
		t.Errorf("event %q", e)
	}
}
