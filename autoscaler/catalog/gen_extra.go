//go:build ignore

// gen_extra writes data/instance-types-extra.csv: the per-type facts the region CSVs lack (cpu and
// accelerator manufacturers, clock speed, EBS and network bandwidth, local NVMe size, the
// capability-flex and encryption-in-transit flags, and the neuron-core, pod-ENI and EFA counts),
// trimmed from shared/data/ec2/instance-types-merged.json (2 MB) to what the catalog uses.
//
// Run it with `go generate ./autoscaler/catalog/` from the repository root, next to a checkout of
// the shared data (the -in flag points elsewhere). Output is sorted by instance type and stable.
package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
)

const prefix = "karpenter.k8s.aws/instance-"

type entry struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Allocatable map[string]string `json:"allocatable_al2023"`
}

// columns: header name, and where the value comes from ("L:" label key suffix, "A:" allocatable).
var columns = [][2]string{
	{"instance_type", ""},
	{"cpu_manufacturer", "L:cpu-manufacturer"},
	{"cpu_sustained_clock_speed_mhz", "L:cpu-sustained-clock-speed-mhz"},
	{"ebs_bandwidth_mbps", "L:ebs-bandwidth"},
	{"network_bandwidth_mbps", "L:network-bandwidth"},
	{"local_nvme_gb", "L:local-nvme"},
	{"gpu_manufacturer", "L:gpu-manufacturer"},
	{"accelerator_manufacturer", "L:accelerator-manufacturer"},
	{"capability_flex", "L:capability-flex"},
	{"encryption_in_transit_supported", "L:encryption-in-transit-supported"},
	{"neuroncores", "A:aws.amazon.com/neuroncore"},
	{"pod_eni", "A:vpc.amazonaws.com/pod-eni"},
	{"efa", "A:vpc.amazonaws.com/efa"},
}

func main() {
	in := flag.String("in", "../../../shared/data/ec2/instance-types-merged.json", "merged instance-type JSON")
	out := flag.String("out", "data/instance-types-extra.csv", "output CSV")
	flag.Parse()
	raw, err := os.ReadFile(*in)
	if err != nil {
		fail(err)
	}
	var entries []entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		fail(fmt.Errorf("%s: %w", *in, err))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	f, err := os.Create(*out)
	if err != nil {
		fail(err)
	}
	w := csv.NewWriter(f)
	header := make([]string, len(columns))
	for i, c := range columns {
		header[i] = c[0]
	}
	_ = w.Write(header)
	for _, e := range entries {
		if len(e.Labels) == 0 {
			continue // Karpenter's reference does not list the type: nothing to add
		}
		row := make([]string, len(columns))
		row[0] = e.Name
		for i, c := range columns[1:] {
			src := c[1]
			switch src[:2] {
			case "L:":
				row[i+1] = e.Labels[prefix+src[2:]]
			case "A:":
				row[i+1] = e.Allocatable[src[2:]]
			}
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		fail(err)
	}
	if err := f.Close(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen_extra:", err)
	os.Exit(1)
}
