// Package simulate runs the scheduling engine on NodePools from files and a workload (Kubernetes
// YAML, a CSV of shapes, or a generated profile) against the embedded EC2 catalog, and reports
// the NodeClaims it would launch, their cost, the cost lower bound and what cannot be scheduled.
// It is what `karpool simulate` prints; the JSON form is a stable contract for CI.
package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/costbound"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
	"github.com/karpool/karpool/internal/fleet"
)

// Profiles are the workloads --generate knows.
var Profiles = []string{"karpenter-bench", "lognormal", "smalldeploys"}

// Options say what to simulate.
type Options struct {
	// PoolsPath is a file or directory with karpenter.sh/v1 NodePools (and the
	// karpenter.k8s.aws/v1 EC2NodeClasses they reference).
	PoolsPath string
	// WorkloadPath is a Kubernetes YAML file or a CSV of shapes (see CSVColumns).
	WorkloadPath string
	// Generate is PROFILE:N, e.g. lognormal:10000.
	Generate string
	// Region selects the catalog; default us-east-1.
	Region string
	// MaxPods caps the workload's pods (0: DefaultMaxPods).
	MaxPods int
}

// Report is the simulation's outcome. Its JSON encoding (the exported fields) is the contract.
type Report struct {
	NodeClaims        []NodeClaim     `json:"nodeClaims"`
	Placements        []Placement     `json:"placements"`
	Unschedulable     []Unschedulable `json:"unschedulable"`
	TotalPerHour      float64         `json:"totalPerHour"`
	LowerBoundPerHour float64         `json:"lowerBoundPerHour"`
	// WholePodBoundPerHour is a second lower bound that keeps every pod whole on one node
	// (costbound.WholePods): often tighter where pods' memory:cpu ratios differ from the
	// types'. Both are bounds over exactly the types each pool may launch.
	WholePodBoundPerHour float64 `json:"wholePodBoundPerHour"`
	SolveSeconds         float64 `json:"solveSeconds"`

	region   string
	pods     int
	pools    []PoolSummary
	warnings []string
	overlays []string
}

// NodeClaim is one new node.
type NodeClaim struct {
	Pool          string   `json:"pool"`
	InstanceType  string   `json:"instanceType"`
	InstanceTypes []string `json:"instanceTypes"`
	CapacityType  string   `json:"capacityType"`
	Zone          string   `json:"zone"`
	PricePerHour  float64  `json:"pricePerHour"`
	Pods          []string `json:"pods"`
}

// Placement is a pod placed on an existing node.
type Placement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// Unschedulable is a pod that fits nowhere.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// PoolSummary is one NodePool's part of a report: the new nodes the engine planned in it and
// what they hold (fleet.Pool), and the pods' cost lower bounds.
type PoolSummary struct {
	fleet.Pool
	// Bound and WholePods are the pods' cost lower bounds, 0 when BoundErr says why there is
	// none.
	Bound     float64 `json:"bound"`
	WholePods float64 `json:"wholePodBound"`
	BoundErr  string  `json:"boundError,omitempty"`
	// DaemonCPU and DaemonMem are the daemonsets' requests on the new nodes.
	DaemonCPU, DaemonMem int64 `json:"-"`
}

// Pools is the report per NodePool, in name order.
func (r *Report) Pools() []PoolSummary { return r.pools }

// Warnings are the documents and objects that were skipped or adjusted.
func (r *Report) Warnings() []string { return r.warnings }

// Overlays says what became of the pool files' NodeOverlays that did not simply apply (not
// applied, and why; resources not scheduled on); these are among the warnings too.
func (r *Report) Overlays() []string { return r.overlays }

// Run loads the inputs, solves and builds the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.WorkloadPath == "" && opts.Generate == "" {
		return nil, fmt.Errorf("no workload: give --workload FILE and/or --generate PROFILE:N")
	}
	ps, err := loadPools(ctx, opts.PoolsPath)
	if err != nil {
		return nil, err
	}
	w := NewWorkload(opts.MaxPods)
	var warnings []string
	if opts.WorkloadPath != "" {
		lw, ws, err := LoadWorkload(ctx, opts.WorkloadPath, opts.MaxPods)
		if err != nil {
			return nil, err
		}
		warnings = ws
		w = lw
	}
	if opts.Generate != "" {
		pods, err := Generate(opts.Generate, w.maxPods-len(w.pods))
		if err != nil {
			return nil, err
		}
		w.pods = append(w.pods, pods...)
	}
	rep, err := Solve(ps, w, opts.Region)
	if err != nil {
		return nil, err
	}
	rep.warnings = append(warnings, rep.warnings...)
	return rep, nil
}

// MaxNodeClassSettings bounds the distinct node class settings of one plan: each holds its
// own priced copy of the catalog (about 1 MB).
const MaxNodeClassSettings = 100

// Solve runs the scheduling engine on a workload and pools against the catalog of region
// (default us-east-1) and reports the outcome.
func Solve(ps *Pools, w *Workload, region string) (*Report, error) {
	if region == "" {
		region = "us-east-1"
	}
	cat, err := catalog.Load(region)
	if err != nil {
		return nil, fmt.Errorf("region %q: %w (embedded catalogs: %s)", region, err, strings.Join(catalog.Regions(), ", "))
	}
	var warnings []string
	in := &scheduling.Input{Region: region}
	// Pools of one class launch the same types: they are computed once per class, and once
	// for classes whose options are the same (a thousand classes differing only in tags or
	// selectors would otherwise each hold the whole catalog).
	byClass := map[string][]catalog.InstanceType{}
	byOptions := map[string][]catalog.InstanceType{}
	for _, np := range ps.pools {
		class := ""
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			class = ref.Name
		}
		its, done := byClass[class]
		if !done {
			nco, _ := catalog.NodeClassOptionsFor(nil)
			if nc, ok := ps.classes[class]; ok {
				if nco, err = catalog.NodeClassOptionsFor(&nc.Spec); err != nil {
					return nil, fmt.Errorf("%s: EC2NodeClass %q: %w", ps.where[np.Name], class, err)
				}
			}
			key, err := json.Marshal(nco)
			if err != nil {
				return nil, err
			}
			if its, done = byOptions[string(key)]; !done {
				if len(byOptions) == MaxNodeClassSettings {
					return nil, fmt.Errorf("%s: EC2NodeClass %q: more than %d EC2NodeClasses with different kubelet, AMI family and volume settings; karpool prices the catalog once per setting and plans at most %d", ps.where[np.Name], class, MaxNodeClassSettings, MaxNodeClassSettings)
				}
				its = cat.InstanceTypes(nco)
				byOptions[string(key)] = its
			}
			its = ps.reservedOfferings(class, its)
			byClass[class] = its
		}
		if _, ok := ps.classes[class]; !ok && class != "" {
			warnings = append(warnings, fmt.Sprintf("%s: NodePool %q references EC2NodeClass %q, which is not among the pool files; default AL2023 settings assumed", ps.where[np.Name], np.Name, class))
		}
		in.Pools = append(in.Pools, scheduling.Pool{NodePool: np, InstanceTypes: its})
	}
	overlays := ps.applyOverlays(in)
	warnings = append(warnings, overlays...)
	w.addTo(in)
	if len(in.Pods) == 0 {
		warnings = append(warnings, "the workload has no pods")
	}
	start := time.Now()
	res := scheduling.Solve(in)
	solve := time.Since(start)
	rep := newReport(in, res, region)
	rep.SolveSeconds = solve.Seconds()
	rep.warnings, rep.overlays = warnings, overlays
	return rep, nil
}

// Generate makes the pods of a profile: "karpenter-bench:N" (Karpenter's scheduling benchmark
// mix), "lognormal:N" (Deployments with Zipf replica counts, lognormal cpu with median 250m,
// memory about 3 GiB per vCPU) or "smalldeploys:N" (Deployments of 1 to 8 replicas, lognormal
// cpu, each with its own memory:cpu ratio between 1 and 8 GiB per vCPU).
// At most max pods are made.
func Generate(spec string, max int) ([]*corev1.Pod, error) {
	name, count, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("--generate %q: want PROFILE:N with N a pod count (profiles: %s)", spec, strings.Join(Profiles, ", "))
	}
	if n > max {
		return nil, fmt.Errorf("--generate %q: %d pods is more than the %d karpool plans at most: lower N, or raise the cap (--max-pods)", spec, n, max)
	}
	switch name {
	case "karpenter-bench":
		return workload.KarpenterMix(n), nil
	case "lognormal":
		return workload.Lognormal(n), nil
	case "smalldeploys":
		return workload.SmallDeployments(n), nil
	}
	return nil, fmt.Errorf("--generate %q: unknown profile %q (profiles: %s)", spec, name, strings.Join(Profiles, ", "))
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// newReport turns a result into a report (everything but the solve time).
func newReport(in *scheduling.Input, res *scheduling.Result, region string) *Report {
	rep := &Report{NodeClaims: []NodeClaim{}, Placements: []Placement{}, Unschedulable: []Unschedulable{}, region: region, pods: len(in.Pods)}
	byPool := map[string]*PoolSummary{}
	for i := range in.Pools {
		np := in.Pools[i].NodePool
		byPool[np.Name] = &PoolSummary{Pool: fleet.NewPool(np)}
	}
	poolPods := map[string][]*corev1.Pod{}
	for i := range res.NodeClaims {
		nc := &res.NodeClaims[i]
		it, o := nc.Cheapest()
		out := NodeClaim{Pool: nc.Pool, InstanceType: it.Name, CapacityType: o.CapacityType, Zone: nc.Labels[corev1.LabelTopologyZone],
			PricePerHour: nc.PricePerHour(), Pods: make([]string, 0, len(nc.Pods)), InstanceTypes: make([]string, 0, len(nc.InstanceTypes))}
		for _, opt := range nc.InstanceTypes {
			out.InstanceTypes = append(out.InstanceTypes, opt.Type.Name)
		}
		for _, p := range nc.Pods {
			out.Pods = append(out.Pods, podName(p))
		}
		rep.NodeClaims = append(rep.NodeClaims, out)
		rep.TotalPerHour += out.PricePerHour
		pr := byPool[nc.Pool]
		pr.Add(fleet.Node{InstanceType: out.InstanceType, CapacityType: out.CapacityType, Zone: out.Zone, PerHour: out.PricePerHour,
			AllocCPU: it.Allocatable[catalog.CPU], AllocMem: it.Allocatable[catalog.Memory], CapCPU: it.Capacity[catalog.CPU], CapMem: it.Capacity[catalog.Memory]})
		pr.Pods += len(nc.Pods)
		pr.ReqCPU += nc.PodRequests[catalog.CPU]
		pr.ReqMem += nc.PodRequests[catalog.Memory]
		pr.DaemonCPU += nc.DaemonSetRequests[catalog.CPU]
		pr.DaemonMem += nc.DaemonSetRequests[catalog.Memory]
		poolPods[nc.Pool] = append(poolPods[nc.Pool], nc.Pods...)
	}
	for _, b := range res.Placements() {
		rep.Placements = append(rep.Placements, Placement{Pod: podName(b.Pod), Node: b.Node})
	}
	for _, u := range res.Unschedulable {
		rep.Unschedulable = append(rep.Unschedulable, Unschedulable{Pod: podName(u.Pod), Reason: u.Reason})
	}
	var types *scheduling.PoolTypes
	for i := range in.Pools {
		pr := byPool[in.Pools[i].NodePool.Name]
		if len(poolPods[pr.Name]) > 0 {
			if types == nil {
				types = scheduling.NewPoolTypes(in)
			}
			b, w, err := poolBounds(in, types.Of(i), i, poolPods[pr.Name])
			if err != nil {
				pr.BoundErr = err.Error()
			} else {
				pr.Bound, pr.WholePods = b, w
				rep.LowerBoundPerHour += b
				rep.WholePodBoundPerHour += w
			}
		}
		pr.Sort()
		rep.pools = append(rep.pools, *pr)
	}
	return rep
}

// poolBounds are the cost lower bounds of the pods a pool's new NodeClaims hold (DESIGN.md
// section 7): max(resource LP, hardest pod) and the whole-pod bound. Both are computed over
// exactly the types the engine may launch in the pool, burstable, HPC and metal ones included
// when the pool allows them, so that neither can exceed the cost of what it launches.
func poolBounds(in *scheduling.Input, types []scheduling.PoolType, i int, pods []*corev1.Pod) (bound, wholePods float64, err error) {
	p := costbound.Problem{Limits: poolLimits(in.Pools[i].NodePool)}
	for _, pt := range types {
		t := costbound.Type{Name: pt.Type.Name, Price: pt.PricePerHour, Capacity: pt.Type.Capacity}
		for r := range t.Allocatable {
			t.Allocatable[r] = pt.Type.Allocatable[r] - pt.DaemonSetOverhead[r]
		}
		p.Types = append(p.Types, t)
	}
	groups := map[catalog.Resources]int{}
	var order []catalog.Resources
	for _, pod := range pods {
		r, _ := scheduling.PodRequests(pod)
		if groups[r] == 0 {
			order = append(order, r)
		}
		groups[r]++
	}
	for _, r := range order {
		p.Pods = append(p.Pods, costbound.PodGroup{Requests: r, Count: groups[r]})
	}
	res, err := costbound.Bound(p)
	if err != nil {
		return 0, 0, err
	}
	wholePods, err = costbound.WholePods(p)
	if err != nil {
		return 0, 0, err
	}
	return res.LowerBound, wholePods, nil
}

func poolLimits(np *karpv1.NodePool) *costbound.Limits {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	l := &costbound.Limits{Resources: map[catalog.Resource]int64{}}
	for name, q := range np.Spec.Limits {
		if name == "nodes" {
			v := q.Value()
			l.Nodes = &v
			continue
		}
		for r := catalog.Resource(0); r < catalog.NumResources; r++ {
			if string(name) == catalog.ResourceNames[r] {
				if r == catalog.CPU {
					l.Resources[r] = q.MilliValue()
				} else {
					l.Resources[r] = q.Value()
				}
			}
		}
	}
	return l
}

// WriteJSON writes the JSON contract.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the human-readable report.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Simulated %d pods on %d NodePool(s) in %s; solved in %s.\n", r.pods, len(r.pools), r.region, formatSeconds(r.SolveSeconds))
	for _, p := range r.pools {
		fmt.Fprintf(&b, "\nNodePool %s: ", p.Name)
		if p.Nodes == 0 {
			fmt.Fprintf(&b, "no new nodes\n")
			continue
		}
		fmt.Fprintf(&b, "%d new node(s) for %d pod(s), %s/h (%s/month)\n", p.Nodes, p.Pods, fleet.Hourly(p.PerHour), fleet.Monthly(p.PerHour))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, g := range p.Groups {
			fmt.Fprintf(tw, "  %d ×\t%s\t%s\t%s\t%s/h\n", g.Count, g.InstanceType, g.CapacityType, g.Zone, fleet.Hourly(g.PerHour))
		}
		tw.Flush()
		fmt.Fprintf(&b, "  cpu:    %s requested + %s daemonsets of %s allocatable (%s)\n",
			fleet.Cores(p.ReqCPU), fleet.Cores(p.DaemonCPU), fleet.Cores(p.AllocCPU), fleet.Percent(p.ReqCPU+p.DaemonCPU, p.AllocCPU))
		fmt.Fprintf(&b, "  memory: %s requested + %s daemonsets of %s allocatable (%s)\n",
			fleet.GiB(p.ReqMem), fleet.GiB(p.DaemonMem), fleet.GiB(p.AllocMem), fleet.Percent(p.ReqMem+p.DaemonMem, p.AllocMem))
		if p.BoundErr != "" {
			fmt.Fprintf(&b, "  lower bound: not available (%s)\n", p.BoundErr)
		} else if p.Bound > 0 {
			fmt.Fprintf(&b, "  lower bound %s/h, cost/bound %.3f%s\n", fleet.Hourly(p.Bound), p.PerHour/p.Bound, wholePodText(p.PerHour, p.WholePods))
		}
	}
	if len(r.Placements) > 0 {
		fmt.Fprintf(&b, "\nPods placed on existing nodes: %d\n", len(r.Placements))
	}
	fmt.Fprintf(&b, "\nUnschedulable pods: %d\n", len(r.Unschedulable))
	reasons := map[string][]string{}
	var order []string
	for _, u := range r.Unschedulable {
		if _, ok := reasons[u.Reason]; !ok {
			order = append(order, u.Reason)
		}
		reasons[u.Reason] = append(reasons[u.Reason], u.Pod)
	}
	for _, reason := range order {
		pods := reasons[reason]
		shown := pods
		if len(shown) > 5 {
			shown = shown[:5]
		}
		more := ""
		if len(pods) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(pods)-len(shown))
		}
		fmt.Fprintf(&b, "  %s%s: %s\n", strings.Join(shown, ", "), more, reason)
	}
	fmt.Fprintf(&b, "\nTotal: %s/h (%s/month) for %d new node(s)", fleet.Hourly(r.TotalPerHour), fleet.Monthly(r.TotalPerHour), len(r.NodeClaims))
	if r.LowerBoundPerHour > 0 {
		fmt.Fprintf(&b, "; lower bound %s/h, cost/bound %.3f%s", fleet.Hourly(r.LowerBoundPerHour), r.TotalPerHour/r.LowerBoundPerHour, wholePodText(r.TotalPerHour, r.WholePodBoundPerHour))
	}
	b.WriteString(".\nPrices: embedded catalog (on-demand list prices; spot prices are a stale snapshot), each node with its EBS volumes; requests-based.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// wholePodText is the whole-pod bound's part of a bound line, empty when it is 0 (no pod
// requests cpu).
func wholePodText(perHour, wholePods float64) string {
	if wholePods <= 0 {
		return ""
	}
	return fmt.Sprintf("; whole-pod bound %s/h, cost/whole-pod bound %.3f", fleet.Hourly(wholePods), perHour/wholePods)
}

func formatSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
