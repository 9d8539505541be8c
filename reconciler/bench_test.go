package reconciler

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/reconciler/source"
	"github.com/karpool/karpool/testbed/gittest"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

const (
	benchPools   = 200
	benchClasses = 50
)

// benchRepo is the tree of a repository with benchPools NodePools and benchClasses
// EC2NodeClasses, one file each, with cpuLimit in every pool.
func benchRepo(cpuLimit int) map[string][]byte {
	files := map[string][]byte{}
	for i := 0; i < benchClasses; i++ {
		files[fmt.Sprintf("pools/classes/class-%02d.yaml", i)] = fmt.Appendf(nil, `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: bench-class-%02d
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-bench
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: bench-%02d
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: bench
`, i, i)
	}
	for i := 0; i < benchPools; i++ {
		files[fmt.Sprintf("pools/nodepools/pool-%03d.yaml", i)] = fmt.Appendf(nil, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: bench-pool-%03d
spec:
  template:
    metadata:
      labels:
        team: team-%03d
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand", "spot"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: bench-class-%02d
  limits:
    cpu: "%d"
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
`, i, i, i%benchClasses, cpuLimit)
	}
	return files
}

// BenchmarkGitOpsReconcile measures a reconciliation from a fetched revision to its objects
// applied, for 200 NodePools and 50 EC2NodeClasses: creating them all, changing every NodePool,
// and the steady state of an unchanged revision (the drift check that runs every interval). The
// revision is fetched before the timer starts, so the timed fetch is the ls-remote that finds the
// remote unchanged; the rest is the reconciliation as the controller runs it, without the status
// patch.
func BenchmarkGitOpsReconcile(b *testing.B) {
	env := localenvtest.Env(b)
	// The controller's client has no client-side rate limit (ctrl.GetConfig disables it and leaves
	// fairness to the API server); the test environment's default client allows 200 requests/s,
	// which would be what this measures.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	r := New(c, Options{})
	repo := gittest.NewRepo(b, b.TempDir(), "bench.git")
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: v1alpha1.PoolSyncSpec{URL: repo.FileURL(), Path: "pools",
			Interval: metav1.Duration{Duration: time.Minute}},
	}
	// commit pushes a revision with the given limit and fetches it outside the timed region.
	commit := func(cpuLimit int) {
		b.StopTimer()
		defer b.StartTimer()
		for name, data := range benchRepo(cpuLimit) {
			repo.Write(name, string(data))
		}
		repo.Commit(fmt.Sprintf("limit %d", cpuLimit))
		if _, err := r.opts.Fetcher.Fetch(ctx, source.Request{URL: ps.Spec.URL}); err != nil {
			b.Fatal(err)
		}
	}
	deleteAll := func() {
		b.StopTimer()
		defer b.StartTimer()
		sel := client.MatchingLabels{OwnerLabel: "bench"}
		if err := c.DeleteAllOf(ctx, &karpenterv1.NodePool{}, sel); err != nil {
			b.Fatal(err)
		}
		if err := c.DeleteAllOf(ctx, &karpenterawsv1.EC2NodeClass{}, sel); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			list := &karpenterv1.NodePoolList{}
			if err := c.List(ctx, list, sel); err != nil {
				b.Fatal(err)
			}
			if len(list.Items) == 0 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d bench NodePools still there a minute after deleting them", len(list.Items))
			}
			<-tick.C
		}
	}
	reconcileOnce := func() {
		if err := r.ReconcileDetached(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(deleteAll)

	limit := 100 // every run must change the limit again
	b.Run("create", func(b *testing.B) {
		commit(limit)
		for i := 0; i < b.N; i++ {
			deleteAll()
			reconcileOnce()
		}
	})
	b.Run("change-every-pool", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			limit++
			commit(limit)
			reconcileOnce()
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		reconcileOnce()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			reconcileOnce()
		}
	})
}
