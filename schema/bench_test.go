package schema_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
)

// nodePools returns n distinct NodePool documents as one YAML stream, in the shape of the
// workshop pool with a budget schedule and taints, each pool for its own workloads (requirement
// example.com/pool), so that they do not overlap.
func nodePools(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: pool-%d
  labels:
    team: team-%d
spec:
  template:
    metadata:
      labels:
        type: karpenter
        team: team-%d
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["c5.large", "m5.large", "r5.large", "m5.xlarge"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand", "spot"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["%d"]
        - key: example.com/pool
          operator: In
          values: ["pool-%d"]
      taints:
        - key: example.com/team
          value: team-%d
          effect: NoSchedule
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  limits:
    cpu: "%d"
    memory: %dGi
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "10%%"
      - nodes: "0"
        schedule: "0 9 * * mon-fri"
        duration: 8h
`, i, i%50, i%50, i%4+1, i, i%50, 100+i%900, 400+i%3000)
	}
	return b.Bytes()
}

// BenchmarkVet10k validates 10,000 NodePool documents of one stream, as `karpool vet` does: one
// compiled schema per CPU, documents spread over them. It reports documents per second (wall
// clock) and per CPU-second, and the live heap after the run.
func BenchmarkVet10k(b *testing.B) {
	n := 10_000
	if testing.Short() {
		n = 1000
	}
	data := nodePools(n)
	lim := manifests.DefaultLimits
	lim.MaxBytes = 64 << 20 // the 10k-document stream is 11 MB
	pool, err := schema.NewPool(0)
	if err != nil {
		b.Fatal(err)
	}
	// As `karpool vet` runs (cmd/karpool/vet.go): the live heap is a few MB of mostly short-lived
	// CUE values, and collecting a quarter as often saves a fifth of the time.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := pool.ValidateFile("pools.yaml", data, lim)
		if err != nil {
			b.Fatal(err)
		}
		if res.Checked != n || len(res.Findings) != 0 {
			b.Fatalf("checked %d, findings %v", res.Checked, res.Findings)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(n*b.N)/(cpuTime()-cpu0).Seconds(), "docs/cpu-s")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
}

// BenchmarkVetOneSchema is BenchmarkVet10k with a single schema (one CPU), without the
// memoized validation of requirements, taints and budgets, for comparison.
func BenchmarkVetOneSchema(b *testing.B) {
	for _, memo := range []bool{true, false} {
		b.Run(fmt.Sprintf("memoize=%v", memo), func(b *testing.B) {
			n := 2000
			data := nodePools(n)
			s, err := schema.Compile()
			if err != nil {
				b.Fatal(err)
			}
			s.Memoize = memo
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := s.ValidateFile("pools.yaml", data, manifests.DefaultLimits)
				if err != nil || res.Checked != n || len(res.Findings) != 0 {
					b.Fatalf("checked %d, findings %v, %v", res.Checked, res.Findings, err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWriteBenchInput writes the 10,000-NodePool stream of BenchmarkVet10k to the file named by
// $KARPOOL_BENCH_OUT, for timing other validators on the same input (BENCHMARKS.md):
//
//	KARPOOL_BENCH_OUT=/tmp/pools-10k.yaml go test -run TestWriteBenchInput ./schema
func TestWriteBenchInput(t *testing.T) {
	out := os.Getenv("KARPOOL_BENCH_OUT")
	if out == "" {
		t.Skip("set KARPOOL_BENCH_OUT to write the benchmark input")
	}
	if err := os.WriteFile(out, nodePools(10_000), 0o644); err != nil {
		t.Fatal(err)
	}
}
