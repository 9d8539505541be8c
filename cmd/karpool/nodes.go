package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/internal/nodeview"
)

type nodesFlags struct {
	kubeconfig, region, output string
	once                       bool
	interval                   time.Duration
}

func newNodesCommand() *cobra.Command {
	var f nodesFlags
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Show the cluster's nodes with their pool, type, price and use, updated live",
		Long: `nodes shows every node of the cluster, as eks-node-viewer does: its NodePool, instance type,
capacity type and zone, its price per hour, cpu and memory requested by its pods against what it
can allocate (as bars), pods against its pod capacity, its age and what disruption is doing to it
(deleting, disrupting, drifted, or why consolidation leaves it alone). The last line totals the
fleet per hour and per month (730 h), EBS root volumes included.

Prices are the list prices of the embedded EC2 catalog for the node's region; a price marked ~
is an estimate (the catalog's spot prices). The view is redrawn every --interval until Ctrl-C;
--once prints it once, and -o json prints it for scripts.`,
		Example: `  karpool nodes
  karpool nodes --once
  karpool nodes -o json | jq '.perMonth'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.output != "text" && f.output != "json" {
				return usageError{fmt.Errorf("-o %q: use text or json", f.output)}
			}
			if f.interval <= 0 {
				return usageError{fmt.Errorf("--interval must be positive")}
			}
			cfg, err := restConfig(f.kubeconfig)
			if err != nil {
				return usageError{err}
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runNodes(ctx, c, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG or ~/.kube/config")
	fl.StringVar(&f.region, "region", "us-east-1", "the catalog's region for nodes without a topology.kubernetes.io/region label")
	fl.StringVarP(&f.output, "output", "o", "text", "text or json")
	fl.BoolVar(&f.once, "once", false, "print the view once and exit")
	fl.DurationVar(&f.interval, "interval", 2*time.Second, "how often the live view is redrawn")
	return cmd
}

// runNodes prints the view once (--once, -o json) or redraws it until ctx ends.
func runNodes(ctx context.Context, c client.Reader, f nodesFlags, out io.Writer) error {
	live := !f.once && f.output == "text"
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	for {
		v, err := nodeview.Load(ctx, c, f.region, time.Now())
		if err != nil {
			if ctx.Err() != nil && live {
				return nil
			}
			return err
		}
		if live {
			// Home and clear the screen: the view replaces the previous one.
			fmt.Fprint(out, "\x1b[H\x1b[2J")
		}
		if f.output == "json" {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				return err
			}
		} else if err := nodeview.Render(out, v); err != nil {
			return err
		}
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
