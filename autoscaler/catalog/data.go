package catalog

import (
	"bytes"
	"embed"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

//go:generate go run gen_extra.go -in ../../../shared/data/ec2/instance-types-merged.json -out data/instance-types-extra.csv

//go:embed data/*.csv
var dataFS embed.FS

// regionFiles lists, per region, the embedded CSV with confirmed types and, optionally, the CSV
// with estimated newer types (loaded only with LoadOptions.IncludeEstimated).
var regionFiles = map[string]struct{ confirmed, estimated string }{
	"us-east-1":      {confirmed: "data/us-east-1.csv"},
	"ap-northeast-2": {confirmed: "data/ap-northeast-2.csv", estimated: "data/ap-northeast-2-newgen-estimated.csv"},
}

const extraFile = "data/instance-types-extra.csv"

// Spec is one row of the embedded data: the raw facts about an instance type in a region, before
// any NodeClass settings are applied.
type Spec struct {
	Name         string
	Family       string
	Category     string
	Generation   int
	Size         string
	Arch         string // amd64 or arm64
	VCPU         int64
	MemoryMiB    int64
	Hypervisor   string // nitro, xen, or "" for bare metal
	BareMetal    bool
	GPUs         int64
	GPUName      string
	GPUMemoryMiB int64
	// GPUManufacturer is nvidia, amd, habana, ... ("" when unknown).
	GPUManufacturer         string
	Accelerators            int64
	AcceleratorName         string
	AcceleratorManufacturer string

	// MaxENIs is the number of network interfaces on the default network card and IPv4PerENI the
	// addresses each holds; together they give the VPC CNI pod limit.
	MaxENIs    int64
	IPv4PerENI int64

	// Extra facts from instance-types-extra.csv; zero or "" when unknown.
	CPUManufacturer              string
	CPUSustainedClockSpeedMhz    int64
	EBSBandwidthMbps             int64
	NetworkBandwidthMbps         int64
	LocalNVMeGB                  int64
	CapabilityFlex               string // "true", "false" or ""
	EncryptionInTransitSupported string // "true", "false" or ""
	NeuronCores                  int64
	PodENI                       int64
	EFA                          int64

	// Supported is true when Karpenter's instance-type reference lists the type (the CSV row has
	// Karpenter's allocatable columns). Unsupported types are never offered.
	Supported bool
	// KarpenterAllocCPUMilli and KarpenterAllocMemoryMiB are the CSV's alloc_cpu_m and
	// alloc_memory_mib: Karpenter's own AL2023 numbers, kept only to check our arithmetic.
	KarpenterAllocCPUMilli  int64
	KarpenterAllocMemoryMiB int64
	KarpenterPods           int64

	// OnDemandPrice is the Linux shared-tenancy on-demand price in USD per hour (0 = none).
	OnDemandPrice float64
	// SpotPrice is the average spot price of the 2025-04 snapshot (0 = none): a stale estimate.
	SpotPrice float64
	// PriceEstimated is true when the on-demand price is an estimate (Seoul "newgen" rows).
	PriceEstimated bool
	// Source names the embedded file the row came from.
	Source string
}

// Burstable reports whether the type is a burstable-performance type (t2, t3, t3a, t4g, ...).
func (s *Spec) Burstable() bool { return s.Category == "t" }

type extraRow struct {
	cpuManufacturer, gpuManufacturer, accManufacturer string
	clock, ebs, network, nvme                         int64
	flex, encryption                                  string
	neuronCores, podENI, efa                          int64
}

// csvTable reads a CSV with a header into rows addressed by column name.
type csvTable struct {
	file   string
	header map[string]int
	rows   [][]string
}

func readTable(file string) (*csvTable, error) {
	raw, err := dataFS.ReadFile(file)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(bytes.NewReader(raw))
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading header: %w", file, err)
	}
	t := &csvTable{file: file, header: make(map[string]int, len(head))}
	for i, h := range head {
		t.header[h] = i
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		t.rows = append(t.rows, rec)
	}
	return t, nil
}

// cell reads a column of row i; parse errors name the file, line and column.
type rowReader struct {
	t   *csvTable
	i   int
	err error
}

func (r *rowReader) str(col string) string {
	j, ok := r.t.header[col]
	if !ok {
		if r.err == nil {
			r.err = fmt.Errorf("%s: no column %q", r.t.file, col)
		}
		return ""
	}
	return strings.TrimSpace(r.t.rows[r.i][j])
}

func (r *rowReader) int(col string) int64 {
	s := r.str(col)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("%s:%d: column %s: %q is not an integer", r.t.file, r.i+2, col, s)
	}
	return v
}

func (r *rowReader) float(col string) float64 {
	s := r.str(col)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("%s:%d: column %s: %q is not a number", r.t.file, r.i+2, col, s)
	}
	return v
}

func readExtra() (map[string]extraRow, error) {
	t, err := readTable(extraFile)
	if err != nil {
		return nil, err
	}
	out := make(map[string]extraRow, len(t.rows))
	for i := range t.rows {
		r := &rowReader{t: t, i: i}
		e := extraRow{
			cpuManufacturer: r.str("cpu_manufacturer"),
			clock:           r.int("cpu_sustained_clock_speed_mhz"),
			ebs:             r.int("ebs_bandwidth_mbps"),
			network:         r.int("network_bandwidth_mbps"),
			nvme:            r.int("local_nvme_gb"),
			gpuManufacturer: r.str("gpu_manufacturer"),
			accManufacturer: r.str("accelerator_manufacturer"),
			flex:            r.str("capability_flex"),
			encryption:      r.str("encryption_in_transit_supported"),
			neuronCores:     r.int("neuroncores"),
			podENI:          r.int("pod_eni"),
			efa:             r.int("efa"),
		}
		if r.err != nil {
			return nil, r.err
		}
		out[r.str("instance_type")] = e
	}
	return out, nil
}

func readSpecs(file string, extra map[string]extraRow) ([]Spec, error) {
	t, err := readTable(file)
	if err != nil {
		return nil, err
	}
	specs := make([]Spec, 0, len(t.rows))
	for i := range t.rows {
		r := &rowReader{t: t, i: i}
		s := Spec{
			Name:                    r.str("instance_type"),
			Family:                  r.str("family"),
			Category:                r.str("category"),
			Generation:              int(r.int("generation")),
			Size:                    r.str("size"),
			Arch:                    r.str("arch"),
			VCPU:                    r.int("vcpu"),
			MemoryMiB:               r.int("memory_mib"),
			Hypervisor:              r.str("hypervisor"),
			BareMetal:               strings.EqualFold(r.str("bare_metal"), "true"),
			GPUs:                    r.int("gpus"),
			GPUName:                 r.str("gpu_name"),
			GPUMemoryMiB:            r.int("gpu_memory_mib"),
			Accelerators:            r.int("accelerators"),
			AcceleratorName:         r.str("accelerator_name"),
			MaxENIs:                 r.int("max_enis"),
			IPv4PerENI:              r.int("ipv4_per_eni"),
			KarpenterPods:           r.int("karpenter_pods"),
			KarpenterAllocCPUMilli:  r.int("alloc_cpu_m"),
			KarpenterAllocMemoryMiB: r.int("alloc_memory_mib"),
			OnDemandPrice:           r.float("od_usd_hr"),
			SpotPrice:               r.float("spot_avg_usd_hr"),
			PriceEstimated:          strings.HasPrefix(r.str("od_source"), "ESTIMATE"),
			Source:                  file,
		}
		s.Supported = r.str("alloc_cpu_m") != "" && strings.HasPrefix(r.str("spec_source"), "karpenter-doc")
		if r.err != nil {
			return nil, r.err
		}
		if e, ok := extra[s.Name]; ok {
			s.CPUManufacturer = e.cpuManufacturer
			s.CPUSustainedClockSpeedMhz = e.clock
			s.EBSBandwidthMbps = e.ebs
			s.NetworkBandwidthMbps = e.network
			s.LocalNVMeGB = e.nvme
			s.GPUManufacturer = e.gpuManufacturer
			s.AcceleratorManufacturer = e.accManufacturer
			s.CapabilityFlex = e.flex
			s.EncryptionInTransitSupported = e.encryption
			s.NeuronCores = e.neuronCores
			s.PodENI = e.podENI
			s.EFA = e.efa
		}
		if s.GPUManufacturer == "" && s.GPUName != "" {
			s.GPUManufacturer = guessGPUManufacturer(s.GPUName)
		}
		if s.Name == "" {
			return nil, fmt.Errorf("%s:%d: empty instance_type", file, i+2)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// guessGPUManufacturer names the maker of GPUs the extra data does not cover (old types that
// Karpenter does not list, so they are never offered; the guess only fills Spec).
func guessGPUManufacturer(name string) string {
	switch n := strings.ToLower(name); {
	case strings.Contains(n, "nvidia"):
		return "nvidia"
	case strings.Contains(n, "radeon"), strings.Contains(n, "amd"):
		return "amd"
	}
	return ""
}
