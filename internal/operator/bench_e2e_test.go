package operator_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/autoscaler/scheduling/workload"
)

// BenchmarkScaleOut1000 measures the whole loop on the local control plane: 1,000 pending pods
// of the lognormal profile, from the first pod's creation until every one is Running on a node
// karpool launched (s/op is that time). The controller runs as its own `karpool controller`
// process so that its peak resident memory (VmHWM) is its own: peak-rss-MB.
//
//	KARPOOL_E2E=require go test -run '^$' -bench BenchmarkScaleOut1000 -benchtime 1x ./internal/operator/
func BenchmarkScaleOut1000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchScaleOut(b, 1000)
	}
}

// benchRuns numbers the runs of one test binary: each gets its own namespace, since the
// previous one may still be terminating.
var benchRuns int

func benchScaleOut(b *testing.B, n int) {
	b.StopTimer()
	h := newHarness(b)
	proc := h.startProcess("--leader-elect=false")
	h.eventually("controller ready", time.Minute, func() error { return proc.probe("/readyz") })
	benchRuns++
	ns := h.namespace(fmt.Sprintf("bench-%d", benchRuns))
	pool := writeManifest(b, "pool.yaml", `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`)
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"), pool)
	pods := workload.Lognormal(n)

	b.StartTimer()
	start := time.Now()
	for i, p := range pods {
		p = p.DeepCopy()
		p.Namespace = ns
		p.Name = fmt.Sprintf("pod-%04d", i)
		p.Spec.NodeName = ""
		p.ResourceVersion, p.UID = "", ""
		if err := h.c.Create(h.ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	h.eventually(fmt.Sprintf("%d pods running", n), 8*time.Minute, func() error {
		var list corev1.PodList
		if err := h.c.List(h.ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		running := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < n {
			return fmt.Errorf("%d of %d running", running, n)
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	rss, err := proc.peakRSS()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(elapsed.Seconds(), "s-to-all-running")
	b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
	nodes := h.karpenterNodes()
	b.ReportMetric(float64(len(nodes)), "nodes")
	// How full the fleet is: the pods' cpu requests over the nodes' allocatable cpu.
	var allocatable, requested int64
	for _, n := range nodes {
		allocatable += n.Status.Allocatable.Cpu().MilliValue()
	}
	var list corev1.PodList
	if err := h.c.List(h.ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	for _, p := range list.Items {
		for _, c := range p.Spec.Containers {
			requested += c.Resources.Requests.Cpu().MilliValue()
		}
	}
	b.ReportMetric(100*float64(requested)/float64(max(allocatable, 1)), "cpu-requested-%")
	families, err := proc.scrape()
	if err != nil {
		b.Fatal(err)
	}
	cost, _ := metricValue(families, "karpenter_nodepools_cost_total", map[string]string{"nodepool": "general"})
	b.ReportMetric(cost, "$/h")
	// How many provisioning rounds created NodeClaims: one per batch of pending pods.
	rounds := strings.Count(proc.log(), `"computed new nodeclaim(s) to fit pod(s)"`)
	b.ReportMetric(float64(rounds), "rounds")
	if path := os.Getenv("KARPOOL_BENCH_LOG"); path != "" {
		if err := os.WriteFile(path, []byte(proc.log()), 0o600); err != nil {
			b.Error(err)
		}
	}
}
