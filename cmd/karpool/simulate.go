package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/simulate"
)

func newSimulateCommand() *cobra.Command {
	var opts simulate.Options
	var output string
	cmd := &cobra.Command{
		Use:   "simulate --pools PATH (--workload FILE | --generate PROFILE:N) [--region R] [--output text|json]",
		Short: "Show which EC2 capacity the NodePools would launch for a workload, and what it costs",
		Long: `simulate runs karpool's scheduling engine — the one the controller uses — on the
karpenter.sh/v1 NodePools (and karpenter.k8s.aws/v1 EC2NodeClasses) under --pools, a file or a
directory read as PoolSync reads spec.path (kustomize build when it holds a kustomization, its
YAML files otherwise, recursively), and on a workload, against the embedded EC2 catalog of --region. It prints the new
NodeClaims (instance type × count, capacity type, zone), their cost per hour and per month
(730 h), requested versus allocatable cpu and memory, two cost lower bounds per pool and
cost/bound for each, the pods that cannot be scheduled and why, and the solve time. The lower
bound is the larger of a resource LP (cpu, memory, pods, devices; pool limits) and the cheapest
node the hardest pod fits on; the whole-pod bound (cpu and memory only) keeps every pod whole
on one node, which often makes it higher where the pods' memory:cpu ratios differ from the
types'. Both range over exactly the instance types the pool may launch, burstable ones
included when the pool allows them, so neither is ever above the cost.

The workload is Kubernetes YAML, a file or a directory read the same way (Pods, Deployments, ReplicaSets, StatefulSets and DaemonSets;
replicas become pending pods, DaemonSets reserve room on every node they would run on; and the
PersistentVolumeClaims, PersistentVolumes and StorageClasses that confine pods to zones: a
StatefulSet replica's claim must be in the file, or the replica is reported unschedulable) or a
CSV of shapes (.csv), or is generated with --generate PROFILE:N:
  karpenter-bench  Karpenter's scheduling benchmark mix (spread, affinity, anti-affinity)
  lognormal        Deployments with Zipf replica counts, lognormal cpu (median 250m),
                   memory about 3 GiB per vCPU
  smalldeploys     many Deployments of 1 to 8 replicas, lognormal cpu (median 250m), each
                   with its own memory:cpu ratio between 1 and 8 GiB per vCPU
--workload and --generate may be combined.

` + simulate.CSVColumns + `

--output json prints a stable contract for CI: {"nodeClaims": [{"pool", "instanceType" (the
cheapest option), "instanceTypes" (all options), "capacityType", "zone", "pricePerHour",
"pods"}], "placements": [{"pod", "node"}], "unschedulable": [{"pod", "reason"}],
"totalPerHour", "lowerBoundPerHour", "wholePodBoundPerHour", "solveSeconds"}. Unschedulable
pods do not change the exit code; bad input exits 1, a bad invocation 2.`,
		Example: `  karpool simulate --pools examples/workshop --workload examples/workshop/workload/inflate.yaml
  karpool simulate --pools pools/ --generate lognormal:10000 --output json
  karpool simulate --pools pools/ --workload shapes.csv --region ap-northeast-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.PoolsPath == "" {
				return usageError{errors.New("--pools is required")}
			}
			if opts.WorkloadPath == "" && opts.Generate == "" {
				return usageError{errors.New("give --workload FILE and/or --generate PROFILE:N")}
			}
			if output != "text" && output != "json" {
				return usageError{fmt.Errorf("--output %q: want text or json", output)}
			}
			if opts.Region != "" && !slices.Contains(catalog.Regions(), opts.Region) {
				return usageError{fmt.Errorf("--region %q: embedded catalogs: %s", opts.Region, strings.Join(catalog.Regions(), ", "))}
			}
			rep, err := simulate.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			for _, w := range rep.Warnings() {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if output == "json" {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.PoolsPath, "pools", "", "file or directory (kustomization or YAML files) with NodePools and EC2NodeClasses")
	f.StringVar(&opts.WorkloadPath, "workload", "", "Kubernetes YAML file or directory, or a CSV of shapes")
	f.StringVar(&opts.Generate, "generate", "", "generate a workload: PROFILE:N ("+strings.Join(simulate.Profiles, ", ")+")")
	f.StringVar(&opts.Region, "region", "us-east-1", "catalog region")
	f.IntVar(&opts.MaxPods, "max-pods", simulate.DefaultMaxPods, "most pods the workload may expand to (replicas included)")
	f.StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
