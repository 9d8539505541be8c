package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema/vet"
)

// invalidInput is the outcome "the input was checked and found wrong" (exit 1). The findings are
// already printed; the error carries the summary.
type invalidInput struct{ summary string }

func (e invalidInput) Error() string { return e.summary }

func newVetCommand() *cobra.Command {
	var (
		output      string
		strict      bool
		allowExtRef bool
		maxSize     string
		workers     int
	)
	cmd := &cobra.Command{
		Use:   "vet [PATH...|-]",
		Short: "Validate NodePools and EC2NodeClasses against the schema, and against each other",
		Long: `vet checks Karpenter v1 NodePools, EC2NodeClasses and NodeClaims, and karpool PoolSyncs,
against karpool's CUE schema (every rule of the Karpenter CRDs), then against each other:
nodeClassRefs must name an EC2NodeClass among the inputs, names must be unique, pools of equal
weight should not compete for the same pods, limits must not be negative. Lints (warnings;
--strict makes them errors) catch userData that calls /etc/eks/bootstrap.sh on AL2023 AMIs,
spot-only pools with a single instance type, and disruption budgets on pools that never
consolidate. Retired APIs (karpenter.sh/v1beta1, v1alpha5, karpenter.k8s.aws/v1beta1, v1alpha1)
are errors that name the command converting them.

PATH is a file, a directory (its *.yaml and *.yml files, recursively; a directory with a
kustomization.yaml is built with kustomize first, without remote bases or plugins, and findings
point at the source files), or - for stdin. Documents of other kinds are skipped and counted.

Every problem of every document is reported, each with file:line:col, the field, the value and
a hint. Exit status: 0 valid, 1 invalid, 2 usage or I/O error.`,
		Example: `  karpool vet pools/
  karpool vet --output github examples/workshop
  kustomize build overlays/prod | karpool vet -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(vet.Formats, output) {
				return usageError{fmt.Errorf("--output %q: want one of %s", output, strings.Join(vet.Formats, ", "))}
			}
			lim := manifests.DefaultLimits
			if maxSize != "" {
				q, err := resource.ParseQuantity(maxSize)
				if err != nil || q.Sign() <= 0 {
					return usageError{fmt.Errorf("--max-file-size %q: want a size such as 10Mi or 20000000", maxSize)}
				}
				lim.MaxBytes = q.Value()
			}
			if os.Getenv("GOGC") == "" {
				// The heap stays small (a few MB) and is mostly short-lived CUE values: collecting
				// less often saves a fifth of the time on large inputs, and the soft limit keeps
				// the process under a few hundred MB however many documents it reads.
				debug.SetGCPercent(400)
				if os.Getenv("GOMEMLIMIT") == "" {
					debug.SetMemoryLimit(256 << 20)
				}
			}
			report, err := vet.Run(cmd.Context(), args, vet.Options{
				AllowExternalRefs: allowExtRef,
				Strict:            strict,
				Limits:            lim,
				Workers:           workers,
				Stdin:             cmd.InOrStdin(),
			})
			var ie *vet.InputError
			if errors.As(err, &ie) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if err := vet.WriteReport(cmd.OutOrStdout(), report, output); err != nil {
				return err
			}
			if report.Errors() > 0 {
				return invalidInput{report.Summary()}
			}
			if output == "text" {
				fmt.Fprintln(cmd.ErrOrStderr(), "karpool vet:", report.Summary())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "text", "output format: text, json or github (GitHub Actions annotations)")
	f.BoolVar(&strict, "strict", false, "treat warnings (lints) as errors")
	f.BoolVar(&allowExtRef, "allow-external-refs", false, "accept nodeClassRefs to EC2NodeClasses that are not among the inputs")
	f.StringVar(&maxSize, "max-file-size", "10Mi", "largest file (or stdin) read, as bytes or a quantity such as 10Mi")
	f.IntVar(&workers, "workers", 0, "documents validated in parallel (0: one per CPU)")
	return cmd
}
