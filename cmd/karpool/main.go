// Command karpool validates, migrates and reconciles Karpenter-compatible node pools kept in Git,
// and runs a bundled autoscaling core that launches and consolidates EC2 capacity for them.
package main

import (
	"fmt"
	"os"

	"github.com/karpool/karpool/internal/redact"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "karpool:", redact.Text(err.Error()))
		os.Exit(exitCode(err))
	}
}
