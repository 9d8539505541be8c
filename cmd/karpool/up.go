package main

import (
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpool/karpool/testbed/up"
)

func newUpCommand() *cobra.Command {
	var opts up.Options
	cmd := &cobra.Command{
		Use:   "up [--example NAME | --demo]",
		Short: "Run karpool end to end on this machine: control plane, AWS simulator, git server, controller",
		Long: `up starts, on 127.0.0.1 only:
  - a local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
    kube-scheduler, kwok, metrics-server), building missing binaries first with hack/tools.sh;
  - the AWS simulator, whose instances register as kwok nodes;
  - a git server with one repository holding the example's pools (NodePools,
    EC2NodeClasses; legacy manifests migrated), and a PoolSync pointing at it, which commits
    its status to the branch karpool-status;
  - the example's workload (e.g. the inflate Deployment), applied to the cluster outside Git
    as kubectl apply would, so that kubectl scale is not undone by PoolSync;
  - a load simulator: a Deployment annotated karpool.dev/cpu-load=<cpu> spreads that much CPU
    usage over its running pods (as kwok reports it), for HorizontalPodAutoscalers to scale on;
  - the karpool controller.

It prints each step as it goes, then the kubeconfig, the git remote to clone and push to, and
the metrics URL. Ctrl-C or SIGTERM stops everything and removes nothing but what it created.

--demo then walks through the example's scenario on it, checking every step, and stops everything.
The workshop: inflate scaled to 5 and its m5.large shown with labels and cost, a pool
change pushed and applied, inflate scaled to 0 and the empty node consolidated away, the status
commit read back. hpa: the backend's HPA at low load on one t3.small; the load raised,
the HPA at its maximum and t3.small nodes up to the pool's cpu limit, the rest pending; the load
lowered, back to one pod on one node.

Examples: ` + strings.Join(up.Examples(), ", "),
		Example: `  karpool up
  karpool up --demo
  karpool up --example seeds/002-hpa-terraform --demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Out = cmd.OutOrStdout()
			return up.Run(ctx, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Example, "example", "workshop", "example the git repository is seeded from")
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "parent directory of the environment (default the system temp dir)")
	cmd.Flags().DurationVar(&opts.Interval, "interval", 15*time.Second, "PoolSync interval")
	cmd.Flags().BoolVar(&opts.Demo, "demo", false, "walk through the example's seed (workshop or hpa), checking each step, then stop everything; exits non-zero naming the step that failed")
	return cmd
}
