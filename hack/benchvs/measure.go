package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/testbed/localenv"
)

// fleet is the nodes running at one moment and what they cost per hour.
type fleet struct {
	nodes   int
	perHour float64
	types   map[string]int
	// open counts the nodes that take pods: no NoSchedule or NoExecute taint (the unregistered
	// taint is one).
	open int
}

// result is one run of one system.
type result struct {
	system     string
	scenario   string
	run        int
	outSeconds float64 // applying the Deployments until every pod is Running
	// halfSeconds and ninetySeconds: until 50 % and 90 % of the pods run; createdSeconds: until
	// the ReplicaSets had created every pod; firstNodeSeconds and lastNodeSeconds: until the
	// first and the last node of the scale-out appeared. They show where the time goes.
	halfSeconds, ninetySeconds, createdSeconds float64
	firstNodeSeconds, lastNodeSeconds          float64
	out, down                                  fleet
	downSeconds                                float64 // scale-down until the node set last changed
	// settled and settledSeconds: the scale-out fleet after -settle-out, and when it last changed.
	settled              fleet
	settledSeconds       float64
	peakMiB, cpuSeconds  float64
	plan                 [2]*simulate.Report
	peakNodes, nodesSeen int
	// schedulerAttempts counts the kube-scheduler's tries to place a pod until every pod ran, by
	// result (scheduled, unschedulable, error): every try beyond one per pod is a pod sent back
	// to the queue by a cluster event and tried again.
	schedulerAttempts map[string]float64
	// apiRequests counts the API server's requests from the apply until every pod ran, by
	// "verb resource subresource": what the system made the cluster do.
	apiRequests map[string]float64
}

// priceTable prices a node by instance type and zone: on-demand list price plus the root volume.
func priceTable(types []catalog.InstanceType) map[[2]string]float64 {
	out := map[[2]string]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.CapacityType == catalog.CapacityTypeOnDemand {
				out[[2]string{it.Name, o.Zone}] = o.PricePerHour
			}
		}
	}
	return out
}

func measure(ctx context.Context, cfg config, sc scenario, sys system, runDir string, prices map[[2]string]float64, full, down int) (result, error) {
	res := result{system: sys.name(), scenario: sc.name}
	env, err := localenv.Start(ctx, localenv.Options{BinDir: cfg.binDir, Dir: runDir, SkipCRDs: sys.name() == "karpenter", ComponentQPS: cfg.qps})
	if err != nil {
		return res, err
	}
	defer env.Stop()
	c, err := env.Client()
	if err != nil {
		return res, err
	}
	if sc.systemNode {
		if err := c.Create(ctx, systemNode()); err != nil {
			return res, fmt.Errorf("creating the system node: %w", err)
		}
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watched, err := watchCluster(watchCtx, env)
	if err != nil {
		return res, err
	}
	p, err := sys.start(ctx, env, c, sc, runDir)
	defer sys.stop()
	if err != nil {
		return res, err
	}
	defer p.stop()
	if err := poll(ctx, 2*time.Minute, func() (bool, error) { return poolReady(ctx, c, p) }); err != nil {
		return res, fmt.Errorf("NodePool default not Ready: %w", err)
	}
	seen := map[string]bool{}
	requestsBefore, err := metricSum(ctx, env, env.Config.Host, "apiserver_request_total", "verb", "resource", "subresource")
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := applyFile(ctx, c, filepath.Join(filepath.Dir(runDir), "workload.yaml")); err != nil {
		return res, err
	}
	progress := []string{"seconds\tnodes\topen nodes\tpods bound\tpods running\tscheduler queues: active\tbackoff\tunschedulable"}
	if err := poll(ctx, cfg.timeout, func() (bool, error) {
		nodesBefore := len(seen)
		f, err := watchNodes(ctx, watched, prices, seen, &res.peakNodes)
		if err != nil {
			return false, err
		}
		since := time.Since(start).Seconds()
		if len(seen) > nodesBefore {
			res.lastNodeSeconds = since
			if res.firstNodeSeconds == 0 {
				res.firstNodeSeconds = since
			}
		}
		running, bound, pods, done, err := allRunning(ctx, watched, full, p)
		if err != nil {
			return false, err
		}
		queues, qerr := schedulerMetric(ctx, env, "scheduler_pending_pods", "queue")
		if qerr != nil { // a diagnostic column: NaN for this row rather than a failed run
			nan := math.NaN()
			queues = map[string]float64{"active": nan, "backoff": nan, "unschedulable": nan}
		}
		progress = append(progress, fmt.Sprintf("%.1f\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f", since, f.nodes, f.open, bound, running,
			queues["active"], queues["backoff"], queues["unschedulable"]))
		if res.createdSeconds == 0 && pods >= full {
			res.createdSeconds = since
		}
		if res.halfSeconds == 0 && 2*running >= full {
			res.halfSeconds = since
		}
		if res.ninetySeconds == 0 && 10*running >= 9*full {
			res.ninetySeconds = since
		}
		return done, err
	}); err != nil {
		return res, fmt.Errorf("%d pods Running: %w", full, err)
	}
	res.outSeconds = time.Since(start).Seconds()
	if hp, ok := sys.(interface {
		heapProfile(context.Context, string) error
	}); ok {
		if err := hp.heapProfile(ctx, filepath.Join(runDir, "heap-scale-out.pprof")); err != nil {
			return res, err
		}
	}
	if err := os.WriteFile(filepath.Join(runDir, "scale-out.tsv"), []byte(strings.Join(progress, "\n")+"\n"), 0o644); err != nil {
		return res, err
	}
	if res.out, err = watchNodes(ctx, watched, prices, seen, &res.peakNodes); err != nil {
		return res, err
	}
	if res.schedulerAttempts, err = schedulerMetric(ctx, env, "scheduler_schedule_attempts_total", "result"); err != nil {
		return res, err
	}
	if res.apiRequests, err = metricSum(ctx, env, env.Config.Host, "apiserver_request_total", "verb", "resource", "subresource"); err != nil {
		return res, err
	}
	for k, v := range requestsBefore {
		res.apiRequests[k] -= v
	}
	var rows []string
	for k, v := range res.apiRequests {
		rows = append(rows, fmt.Sprintf("%.0f\t%s", v, strings.ReplaceAll(strings.TrimSpace(k), " ", "\t")))
	}
	slices.Sort(rows)
	if err := os.WriteFile(filepath.Join(runDir, "api-requests.tsv"), []byte("requests\tverb\tresource\tsubresource\n"+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		return res, err
	}
	if cfg.settleOut > 0 {
		if res.settled, res.settledSeconds, err = watchFleet(ctx, watched, prices, seen, &res.peakNodes, cfg.settleOut, full, p); err != nil {
			return res, fmt.Errorf("after scale-out: %w", err)
		}
	}

	if err := applyFile(ctx, c, filepath.Join(filepath.Dir(runDir), "workload-scaled.yaml")); err != nil {
		return res, err
	}
	if res.down, res.downSeconds, err = watchFleet(ctx, watched, prices, seen, &res.peakNodes, cfg.settle, down, p); err != nil {
		return res, fmt.Errorf("after scale-down: %w", err)
	}
	res.nodesSeen = len(seen)
	res.peakMiB, res.cpuSeconds, err = p.usage()
	return res, err
}

// watchCluster returns a reader of the cluster's pods (in the workload's namespace) and nodes
// from a watch, so the measurement reads memory every poll instead of listing 1,000 pods from
// the API server twice a second (65 ms of its CPU each time on this machine, taken from the
// system under test). It stops with ctx, which must end before the run's control plane does.
func watchCluster(ctx context.Context, env *localenv.Env) (client.Reader, error) {
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.Scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}}}) // nodes are cluster-scoped
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the cluster's pods and nodes did not sync")
	}
	return c, nil
}

// poolReady: the NodePool named default reports Ready, and the autoscaler still runs.
func poolReady(ctx context.Context, c client.Client, p *process) (bool, error) {
	if !p.running() {
		return false, fmt.Errorf("the autoscaler exited (log: %s)", p.log)
	}
	var np karpv1.NodePool
	if err := c.Get(ctx, types.NamespacedName{Name: "default"}, &np); err != nil {
		return false, nil
	}
	for _, cond := range np.Status.Conditions {
		if cond.Type == "Ready" && cond.Status == "True" {
			return true, nil
		}
	}
	return false, nil
}

// watchFleet watches the nodes for d (and until want pods run and no other is left), and
// returns the fleet at the end and how long after the start it last changed.
func watchFleet(ctx context.Context, c client.Reader, prices map[[2]string]float64, seen map[string]bool, peak *int, d time.Duration, want int, p *process) (fleet, float64, error) {
	start := time.Now()
	last, lastChange := fleet{}, start
	first := true
	err := poll(ctx, d+time.Minute, func() (bool, error) {
		f, err := watchNodes(ctx, c, prices, seen, peak)
		if err != nil {
			return false, err
		}
		if !first && (f.nodes != last.nodes || f.perHour != last.perHour) {
			lastChange = time.Now()
		}
		last, first = f, false
		_, _, _, ok, err := allRunning(ctx, c, want, p)
		return ok && time.Since(start) >= d, err
	})
	if err != nil {
		return last, 0, fmt.Errorf("%d pods Running: %w", want, err)
	}
	return last, lastChange.Sub(start).Seconds(), nil
}

// allRunning counts the pods Running and bound to a node; done when want of them run and no
// other pod is left.
func allRunning(ctx context.Context, c client.Reader, want int, p *process) (running, bound, total int, done bool, err error) {
	if !p.running() {
		return 0, 0, 0, false, fmt.Errorf("the autoscaler exited (log: %s)", p.log)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return 0, 0, 0, false, nil // retried at the next poll
	}
	settled := true
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" {
			bound++
		}
		switch {
		case pod.DeletionTimestamp != nil:
			settled = false
		case pod.Status.Phase == corev1.PodRunning:
			running++
		default:
			settled = false
		}
	}
	return running, bound, len(pods.Items), settled && running == want, nil
}

// watchNodes prices the nodes that exist now and records every node name seen.
func watchNodes(ctx context.Context, c client.Reader, prices map[[2]string]float64, seen map[string]bool, peak *int) (fleet, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return fleet{}, nil // a failed list is retried at the next poll
	}
	f := fleet{types: map[string]int{}}
	for _, n := range nodes.Items {
		if n.Labels[systemNodeLabel] != "" {
			continue
		}
		it, zone := n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone]
		price, ok := prices[[2]string{it, zone}]
		if !ok {
			return f, fmt.Errorf("node %s: no on-demand price for %s in %q", n.Name, it, zone)
		}
		f.nodes++
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect != corev1.TaintEffectPreferNoSchedule }) {
			f.open++
		}
		f.perHour += price
		f.types[it]++
		seen[n.Name] = true
	}
	*peak = max(*peak, f.nodes)
	return f, nil
}

func (f fleet) String() string {
	var parts []string
	for t, n := range f.types {
		parts = append(parts, fmt.Sprintf("%d×%s", n, t))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (r result) line() string {
	settled := ""
	if r.settledSeconds > 0 || r.settled.nodes > 0 {
		settled = fmt.Sprintf("; settled after scale-out %d nodes $%.3f/h (%.2f× plan), last change at %.0fs [%s]",
			r.settled.nodes, r.settled.perHour, r.settled.perHour/r.plan[0].TotalPerHour, r.settledSeconds, r.settled)
	}
	return fmt.Sprintf("%s: %-9s run %d: all pods created at %.1fs, first node at %.1fs; 50 %%/90 %%/all Running in %.1f/%.1f/%.1fs, last node at %.1fs, on %d nodes $%.3f/h (%.2f× bound, %.2f× plan) [%s]%s; peak %d nodes, %d launched; "+
		"after scale-down %d nodes $%.3f/h (%.2f× bound), last change at %.0fs [%s]; peak RSS %.0f MiB, CPU %.1fs; scheduler attempts to all Running %v; API writes to all Running %s",
		r.scenario, r.system, r.run, r.createdSeconds, r.firstNodeSeconds, r.halfSeconds, r.ninetySeconds, r.outSeconds, r.lastNodeSeconds, r.out.nodes, r.out.perHour, r.out.perHour/r.plan[0].LowerBoundPerHour, r.out.perHour/r.plan[0].TotalPerHour,
		r.out, settled, r.peakNodes, r.nodesSeen, r.down.nodes, r.down.perHour, r.down.perHour/r.plan[1].LowerBoundPerHour, r.downSeconds, r.down,
		r.peakMiB, r.cpuSeconds, r.schedulerAttempts, topWrites(r.apiRequests, 8))
}

// topWrites renders the write requests among the counts: their total and the n largest, largest
// first.
func topWrites(requests map[string]float64, n int) string {
	writes := map[string]float64{}
	for k, v := range requests {
		switch verb, _, _ := strings.Cut(k, " "); verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			writes[k] = v
		}
	}
	keys := slices.Collect(maps.Keys(writes))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(writes[b], writes[a]) })
	total := 0.0
	for _, v := range writes {
		total += v
	}
	parts := []string{fmt.Sprintf("%.0f in all", total)}
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.0f", strings.TrimSpace(k), writes[k]))
	}
	return strings.Join(parts, ", ")
}

// schedulerMetric reads one counter or gauge family from the kube-scheduler, summed by the
// value of one label.
func schedulerMetric(ctx context.Context, env *localenv.Env, family, label string) (map[string]float64, error) {
	return metricSum(ctx, env, env.SchedulerURL, family, label)
}

// metricSum reads a component's /metrics and sums the family's samples by the values of the
// labels (joined by spaces).
func metricSum(ctx context.Context, env *localenv.Env, baseURL, family string, labels ...string) (map[string]float64, error) {
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", baseURL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families[family].GetMetric() {
		values := make([]string, len(labels))
		for _, l := range m.GetLabel() {
			if i := slices.Index(labels, l.GetName()); i >= 0 {
				values[i] = l.GetValue()
			}
		}
		out[strings.Join(values, " ")] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return out, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// table is the Markdown summary of one scenario: medians over runs, per system.
func table(rs []result, scenario string, systems []string) string {
	var b strings.Builder
	b.WriteString("| system | runs | all Running (s) | nodes | $/h | ÷ bound | ÷ plan | nodes ÷ plan | after 30 %: nodes | $/h | ÷ bound | last change (s) | peak RSS (MiB) | CPU (s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range systems {
		var cols [12][]float64
		for _, r := range rs {
			if r.system != s || r.scenario != scenario {
				continue
			}
			v := []float64{r.outSeconds, float64(r.out.nodes), r.out.perHour, r.out.perHour / r.plan[0].LowerBoundPerHour,
				r.out.perHour / r.plan[0].TotalPerHour, float64(r.out.nodes) / float64(len(r.plan[0].NodeClaims)),
				float64(r.down.nodes), r.down.perHour, r.down.perHour / r.plan[1].LowerBoundPerHour, r.downSeconds, r.peakMiB, r.cpuSeconds}
			for i, x := range v {
				cols[i] = append(cols[i], x)
			}
		}
		if len(cols[0]) == 0 {
			continue
		}
		m := func(i int) float64 { return median(cols[i]) }
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.0f | %.3f | %.2f | %.2f | %.1f | %.0f | %.3f | %.2f | %.0f | %.0f | %.1f |\n",
			s, len(cols[0]), m(0), m(1), m(2), m(3), m(4), m(5), m(6), m(7), m(8), m(9), m(10), m(11))
	}
	return b.String()
}
