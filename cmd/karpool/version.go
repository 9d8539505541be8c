package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
)

// version is set at link time (make build: -X main.version=...); a plain `go build` reports the
// module version, which is "(devel)" in a checkout.
var version = ""

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print karpool's version and the APIs it speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "karpool %s (%s, %s/%s)\n", resolvedVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(out, "APIs: %s, %s, %s\n", karpenterv1.GroupVersion, karpenterawsv1.GroupVersion, karpoolv1alpha1.GroupVersion)
			return nil
		},
	}
}

func resolvedVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
