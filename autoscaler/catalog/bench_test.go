package catalog

import (
	"testing"
)

// BenchmarkLoadParse measures parsing the embedded us-east-1 data (what the first Load of a
// process pays; later Loads return the cached catalog).
func BenchmarkLoadParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		extra, err := readExtra()
		if err != nil {
			b.Fatal(err)
		}
		specs, err := readSpecs(regionFiles["us-east-1"].confirmed, extra)
		if err != nil {
			b.Fatal(err)
		}
		_ = newCatalog("us-east-1", specs)
	}
}

// BenchmarkInstanceTypes measures computing allocatable, labels and offerings for every offered
// us-east-1 type under one NodeClass.
func BenchmarkInstanceTypes(b *testing.B) {
	c, err := Load("us-east-1")
	if err != nil {
		b.Fatal(err)
	}
	opts := NodeClassOptions{Kubelet: Kubelet{MaxPods: ptr[int32](110)}, RootVolumeSize: 100 * Gi}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = len(c.InstanceTypes(opts))
	}
	b.ReportMetric(float64(n), "types")
}
