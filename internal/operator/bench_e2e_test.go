package operator_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/autoscaler/scheduling/workload"
)

// BenchmarkScaleOut1000 measures the whole loop on the local control plane: 1,000 pending pods
// of the lognormal profile, from their creation until every one is bound by the kube-scheduler
// to a node karpool launched (s/op is that time). It also reports the process's peak heap in
// use (controller + test client, sampled every 100 ms) as peak-heap-MB.
//
//	KARPOOL_E2E=require go test -run '^$' -bench BenchmarkScaleOut1000 -benchtime 1x ./internal/operator/
func BenchmarkScaleOut1000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchScaleOut(b, 1000)
	}
}

func benchScaleOut(b *testing.B, n int) {
	b.StopTimer()
	h := newHarness(b)
	h.startController()
	ns := h.namespace("bench")
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

	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
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
	h.eventually(fmt.Sprintf("%d pods bound", n), 8*time.Minute, func() error {
		var list corev1.PodList
		if err := h.c.List(h.ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound < n {
			return fmt.Errorf("%d of %d bound", bound, n)
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(elapsed.Seconds(), "s-to-all-bound")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(len(h.karpenterNodes())), "nodes")
}
