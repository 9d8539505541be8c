package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/karpool/karpool/testbed/awssim"
)

func newAWSSimCommand() *cobra.Command {
	var (
		opts       awssim.Options
		kubeconfig string
		faultsFile string
	)
	cmd := &cobra.Command{
		Use:   "awssim",
		Short: "Run the wire-level AWS simulator (EC2, IAM, STS, SQS, EventBridge, SSM, Pricing, EKS) on 127.0.0.1",
		Long: `awssim serves one simulated AWS account and region over the real AWS wire protocols, for
tests and the local environment. Point any AWS SDK or CLI at it with the endpoint it prints
(AWS_ENDPOINT_URL) and the access key it prints; requests must be SigV4-signed.

The account holds a VPC with three subnets in three zones and a security group, all tagged
karpenter.sh/discovery=<cluster>, the EKS-optimized AMIs and their SSM parameters, the embedded
EC2 catalog (instance types, offerings, on-demand and spot prices), and an EKS cluster.

With --kubeconfig, every running instance registers the Node its kubelet would (labels and
taints from its user data, allocatable from the catalog, annotated for kwok), and the Node is
deleted when the instance terminates.

Faults (throttling, insufficient capacity, error rates, latencies) and events (spot
interruptions, rebalance recommendations, scheduled changes, state changes, terminations by
AWS) are driven through the admin API under <endpoint>/_awssim/ (GET it for the list); --faults
loads an initial Faults JSON document.`,
		Example: `  karpool awssim --addr 127.0.0.1:4566 --cluster demo
  curl -X PUT localhost:4566/_awssim/faults -d '{"throttleRate":0.3}'
  curl -X POST localhost:4566/_awssim/spot-interruption -d '{"instanceId":"i-00000000000000001","terminateAfter":"2m"}'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("awssim takes no arguments (got %q)", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAWSSim(ctx, cmd, opts, kubeconfig, faultsFile)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:4566", "listen address (port 0 picks a free port)")
	f.StringVar(&opts.Region, "region", awssim.DefaultRegion, "region of the simulated account")
	f.StringVar(&opts.AccountID, "account", awssim.DefaultAccountID, "account ID")
	f.StringVar(&opts.ClusterName, "cluster", awssim.DefaultClusterName, "EKS cluster name (and karpenter.sh/discovery tag value)")
	f.StringVar(&opts.KubernetesVersion, "kubernetes-version", awssim.DefaultKubernetesVersion, "Kubernetes version of the EKS cluster")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the simulator's random choices")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to register Nodes in (node bootstrap); off when empty")
	f.StringVar(&faultsFile, "faults", "", "JSON file with the initial faults (see the admin API)")
	return cmd
}

func runAWSSim(ctx context.Context, cmd *cobra.Command, opts awssim.Options, kubeconfig, faultsFile string) error {
	if !strings.HasPrefix(opts.Addr, "127.0.0.1:") && !strings.HasPrefix(opts.Addr, "localhost:") && !strings.HasPrefix(opts.Addr, "[::1]:") {
		return usageError{fmt.Errorf("--addr %s: the simulator listens on loopback only (127.0.0.1:PORT)", opts.Addr)}
	}
	var faults *awssim.Faults
	if faultsFile != "" {
		data, err := os.ReadFile(faultsFile)
		if err != nil {
			return usageError{fmt.Errorf("--faults: %w", err)}
		}
		var f awssim.Faults
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return fmt.Errorf("--faults %s: %w", faultsFile, err)
		}
		faults = &f
	}
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return usageError{fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)}
		}
		opts.Kube = cfg
	}
	errOut := cmd.ErrOrStderr()
	opts.Logf = func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) }
	srv, err := awssim.Start(opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	if faults != nil {
		srv.SetFaults(*faults)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "awssim: account %s, region %s, cluster %s\n", srv.AccountID(), srv.Region(), srv.ClusterName())
	fmt.Fprintf(out, "awssim: endpoint %s (admin API %s)\n", srv.URL(), srv.AdminURL())
	for _, e := range srv.Env() {
		fmt.Fprintf(out, "export %s\n", e)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "awssim: stopping")
	return nil
}
