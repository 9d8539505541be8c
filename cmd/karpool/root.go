package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/manifests/build/confined"
)

// usageError marks a mistake in how karpool was called, which exits 2 (as opposed to 1 for
// "the input was checked and found wrong").
type usageError struct{ error }

// blockedError marks a plan that a blocking guardrail of the review policy fails, which exits 3.
type blockedError struct{ error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	var b blockedError
	if errors.As(err, &b) {
		return 3
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "karpool",
		Short: "Karpenter-compatible node pools from Git: validate, migrate, reconcile and autoscale on AWS",
		Long: `karpool keeps Karpenter-compatible NodePools and EC2NodeClasses in Git, validates them
with a CUE schema, reconciles them (and the AWS resources they need) into a cluster,
and runs a bundled autoscaling core that launches the cheapest EC2 capacity that fits.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without its own RunE, cobra reports a mistyped subcommand as an ordinary failure (exit 1);
		// it is a usage mistake (exit 2).
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q; run 'karpool help' for the list", args[0])}
			}
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	buildTimeout := root.PersistentFlags().Duration("build-timeout", confined.Defaults.Timeout,
		"deadline of each kustomize build of a repository path (vet, simulate, plan, reconcile, controller)")
	// Every build made under the command's context gets the deadline (package build reads it).
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if *buildTimeout <= 0 {
			return usageError{fmt.Errorf("--build-timeout %s: want a positive duration", *buildTimeout)}
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		cmd.SetContext(build.WithLimits(ctx, confined.Limits{Timeout: *buildTimeout}))
		return nil
	}
	root.AddCommand(newVersionCommand())
	root.AddCommand(newMigrateCommand())
	root.AddCommand(newVetCommand())
	root.AddCommand(newAWSSimCommand())
	root.AddCommand(newReconcileCommand())
	root.AddCommand(newSimulateCommand())
	root.AddCommand(newPlanCommand())
	root.AddCommand(newRenderCommand())
	root.AddCommand(newApplyCommand())
	root.AddCommand(newControllerCommand())
	root.AddCommand(newUpCommand())
	root.AddCommand(newNodesCommand())
	return root
}
