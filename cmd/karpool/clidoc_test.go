package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var updateCLIDoc = flag.Bool("update-cli-doc", false, "rewrite docs/cli.md from the commands")

// TestCLIReferenceIsCurrent: docs/cli.md is generated from the commands' own help (usage,
// description, examples, flags), so it cannot drift from the binary. After changing a command:
// go test ./cmd/karpool -run TestCLIReferenceIsCurrent -update-cli-doc
func TestCLIReferenceIsCurrent(t *testing.T) {
	// Flag defaults read the environment (env.go); the reference shows the defaults of a clean one.
	for _, key := range []string{"CLUSTER_NAME", "CLUSTER_ENDPOINT", "CLUSTER_CA_BUNDLE", "BATCH_MAX_DURATION", "BATCH_IDLE_DURATION",
		"INTERRUPTION_QUEUE", "LOG_LEVEL", "METRICS_PORT", "HEALTH_PROBE_PORT", "FEATURE_GATES", "KUBE_CLIENT_QPS",
		"KUBE_CLIENT_BURST", "VM_MEMORY_OVERHEAD_PERCENT", "RESERVED_ENIS", "SYSTEM_NAMESPACE", "DISABLE_LEADER_ELECTION",
		"PREFERENCE_POLICY", "MIN_VALUES_POLICY", "IGNORE_DRA_REQUESTS", "KUBERNETES_SERVICE_HOST"} {
		t.Setenv(key, "")
	}
	got := cliReference(newRootCommand())
	const path = "../../docs/cli.md"
	if *updateCLIDoc {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with -update-cli-doc)", err)
	}
	if string(want) != got {
		t.Errorf("docs/cli.md is stale: go test ./cmd/karpool -run TestCLIReferenceIsCurrent -update-cli-doc")
	}
}

// cliReference renders every visible command, depth first, as Markdown.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# CLI reference\n\nGenerated from the commands' help by `go test ./cmd/karpool -run TestCLIReferenceIsCurrent -update-cli-doc`; `karpool <command> --help` prints the same.\n")
	if flags := root.PersistentFlags().FlagUsages(); flags != "" {
		fmt.Fprintf(&b, "\n## Flags of every command\n\n```text\n%s```\n", flags)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c != root {
			fmt.Fprintf(&b, "\n## %s\n\n%s\n", c.CommandPath(), c.Short)
			if c.Long != "" {
				fmt.Fprintf(&b, "\n```text\n%s\n```\n", strings.TrimSpace(c.Long))
			}
			fmt.Fprintf(&b, "\nUsage: `%s`\n", c.UseLine())
			if c.Example != "" {
				fmt.Fprintf(&b, "\nExamples:\n\n```sh\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
			}
			if flags := c.NonInheritedFlags().FlagUsages(); flags != "" {
				fmt.Fprintf(&b, "\nFlags:\n\n```text\n%s```\n", flags)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return b.String()
}
