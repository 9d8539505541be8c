// Command benchvs runs karpool and Karpenter (its kwok provider) one after the other, each on a
// fresh local control plane, on the same seeded workload and the same instance types, zones,
// allocatable and prices, and prints what each did: `make bench-vs-karpenter`.
//
// A run: start a control plane with one tainted system node (as every real cluster has one for
// the autoscaler itself), apply the Deployments, wait until every pod is Running (time, nodes,
// $/h), scale every Deployment to a fraction of its replicas, watch the fleet for a while (nodes,
// $/h, when it last changed), and read the autoscaler's peak RSS and CPU seconds. Costs of both fleets are counted
// the same way, with karpool's catalog: on-demand list price plus the default root volume.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
)

type config struct {
	karpoolBin, karpenterBin, karpenterCRDs, binDir string
	runs, deployments, pods, qps                    int
	seed                                            uint64
	scaleTo                                         float64
	settle, settleOut, timeout, boot                time.Duration
	systems                                         []string
	scenarios                                       []scenario
}

func main() {
	var cfg config
	var systems, scenarioNames string
	flag.StringVar(&cfg.karpoolBin, "karpool", "bin/karpool", "the karpool binary")
	flag.StringVar(&cfg.karpenterBin, "karpenter", "bin/karpenter-kwok", "Karpenter's kwok provider binary")
	flag.StringVar(&cfg.karpenterCRDs, "karpenter-crds", "bin/karpenter-crds", "directory of Karpenter's CRDs")
	flag.StringVar(&cfg.binDir, "bin-dir", "bin", "directory of the control plane's binaries")
	flag.IntVar(&cfg.runs, "runs", 3, "runs per system")
	flag.IntVar(&cfg.deployments, "deployments", 40, "Deployments in the workload")
	flag.IntVar(&cfg.pods, "pods", 1000, "pods at scale-out")
	flag.Uint64Var(&cfg.seed, "seed", 1, "workload seed")
	flag.Float64Var(&cfg.scaleTo, "scale-to", 0.3, "fraction of each Deployment's replicas kept at scale-down")
	flag.DurationVar(&cfg.settle, "settle", 3*time.Minute, "how long the fleet is watched after scale-down")
	flag.DurationVar(&cfg.settleOut, "settle-out", 0, "how long the fleet is watched after scale-out, before the scale-down (0: not at all)")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "limit for every pod to be Running")
	flag.IntVar(&cfg.qps, "qps", 200, "client QPS of kube-controller-manager and kube-scheduler")
	flag.StringVar(&systems, "systems", "karpenter,karpool", "systems, in the order each run starts them")
	flag.StringVar(&scenarioNames, "scenarios", "system-node,empty,boot", "clusters each system starts from: system-node (one tainted system node), empty (no node), boot (system node, nodes register -boot after launch)")
	flag.DurationVar(&cfg.boot, "boot", 45*time.Second, "registration delay of the boot scenario (EC2 instances take 30-60 s to join)")
	flag.Parse()
	cfg.systems = strings.Split(systems, ",")
	var err error
	if cfg.scenarios, err = scenarios(strings.Split(scenarioNames, ","), cfg.boot); err != nil {
		fmt.Fprintln(os.Stderr, "benchvs:", err)
		os.Exit(2)
	}
	// The control plane's processes run in their own directories: every path must be absolute.
	for _, p := range []*string{&cfg.karpoolBin, &cfg.karpenterBin, &cfg.karpenterCRDs, &cfg.binDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchvs:", err)
			os.Exit(2)
		}
		*p = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "benchvs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	cat, err := catalog.Load(region)
	if err != nil {
		return err
	}
	opts, err := catalog.NodeClassOptionsFor(nil)
	if err != nil {
		return err
	}
	types := poolTypes(cat, opts)
	full := workload(cfg.seed, cfg.deployments, cfg.pods)
	down := scaled(full, cfg.scaleTo)
	dir, err := os.MkdirTemp("", "karpool-benchvs-")
	if err != nil {
		return err
	}
	fmt.Printf("inputs and logs: %s\n", dir)
	if err := writeFiles(dir, cat, types, full, down); err != nil {
		return err
	}
	plans := [2]*simulate.Report{}
	for i, w := range []string{"workload.yaml", "workload-scaled.yaml"} {
		if plans[i], err = simulate.Run(context.Background(), simulate.Options{PoolsPath: filepath.Join(dir, "pools"), WorkloadPath: filepath.Join(dir, w)}); err != nil {
			return fmt.Errorf("karpool simulate %s: %w", w, err)
		}
	}
	fmt.Printf("workload: %d Deployments, %d pods, then %d; %d instance types (c/m/r, generations 5-8, on-demand, 3 zones)\n",
		len(full), podCount(full), podCount(down), len(types))
	fmt.Printf("karpool simulate: %d pods on %d nodes at $%.3f/h (lower bound $%.3f/h); %d pods on %d nodes at $%.3f/h (bound $%.3f/h)\n",
		podCount(full), len(plans[0].NodeClaims), plans[0].TotalPerHour, plans[0].LowerBoundPerHour,
		podCount(down), len(plans[1].NodeClaims), plans[1].TotalPerHour, plans[1].LowerBoundPerHour)
	prices := priceTable(types)
	var results []result
	for _, sc := range cfg.scenarios {
		for r := 1; r <= cfg.runs; r++ {
			for _, name := range cfg.systems {
				sys, err := newSystem(name, cfg, dir)
				if err != nil {
					return err
				}
				runDir := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", sc.name, name, r))
				if err := os.MkdirAll(runDir, 0o755); err != nil {
					return err
				}
				res, err := measure(ctx, cfg, sc, sys, runDir, prices, podCount(full), podCount(down))
				if err != nil {
					return fmt.Errorf("%s: %s run %d: %w (logs in %s)", sc.name, name, r, err, runDir)
				}
				res.run, res.plan = r, plans
				fmt.Println(res.line())
				results = append(results, res)
			}
		}
	}
	for _, sc := range cfg.scenarios {
		fmt.Printf("\nscenario %s:\n", sc.name)
		fmt.Print(table(results, sc.name, cfg.systems))
	}
	return nil
}

func newSystem(name string, cfg config, dir string) (system, error) {
	switch name {
	case "karpool":
		return &karpool{bin: cfg.karpoolBin, dir: dir}, nil
	case "karpenter":
		return &karpenter{bin: cfg.karpenterBin, crds: cfg.karpenterCRDs, dir: dir}, nil
	}
	return nil, fmt.Errorf("unknown system %q (karpool, karpenter)", name)
}
