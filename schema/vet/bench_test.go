package vet_test

import (
	"context"
	"os"
	"runtime/debug"
	"testing"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema/vet"
)

// BenchmarkRun10k is `karpool vet --allow-external-refs` on the 10,000-NodePool stream of
// schema.BenchmarkVet10k (written by TestWriteBenchInput): parsing, validation, cross-document
// checks. Skipped unless $KARPOOL_BENCH_OUT names the file.
func BenchmarkRun10k(b *testing.B) {
	file := os.Getenv("KARPOOL_BENCH_OUT")
	if file == "" {
		b.Skip("set KARPOOL_BENCH_OUT to the file TestWriteBenchInput writes")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	o := opts()
	o.AllowExternalRefs = true
	o.Limits = manifests.Limits{MaxBytes: 64 << 20}
	for i := 0; i < b.N; i++ {
		r, err := vet.Run(context.Background(), []string{file}, o)
		if err != nil || r.Checked != 10_000 || len(r.Findings) != 0 {
			b.Fatalf("%v %d %v", err, r.Checked, r.Findings)
		}
	}
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "docs/s")
}
