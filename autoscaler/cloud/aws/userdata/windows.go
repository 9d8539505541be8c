package userdata

import (
	"fmt"
	"strings"
)

// windowsUserData renders Windows user data: one PowerShell block that runs the class's own
// user data first, then EKS's Start-EKSBootstrap.ps1 with the cluster, its CA, the kubelet
// flags (labels, taints, pod limit, the class's kubelet settings) and the cluster DNS address,
// as Karpenter writes it.
func windowsUserData(b Bootstrap) ([]byte, error) {
	var sb strings.Builder
	sb.WriteString("<powershell>\n")
	if b.Custom != "" {
		sb.WriteString(strings.TrimSuffix(b.Custom, "\n") + "\n")
	}
	sb.WriteString("[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n")
	fmt.Fprintf(&sb, "& $EKSBootstrapScriptFile -EKSClusterName %s -APIServerEndpoint %s", psQuote(b.ClusterName), psQuote(b.Endpoint))
	if b.CA != "" {
		fmt.Fprintf(&sb, " -Base64ClusterCA %s", psQuote(b.CA))
	}
	if args := al2KubeletArgs(b); len(args) > 0 {
		fmt.Fprintf(&sb, " -KubeletExtraArgs %s", psQuote(strings.Join(args, " ")))
	}
	if b.DNSIP != "" {
		fmt.Fprintf(&sb, " -DNSClusterIP %s", psQuote(b.DNSIP))
	}
	sb.WriteString("\n</powershell>")
	return []byte(sb.String()), nil
}

// psQuote quotes s as a PowerShell verbatim string: single quotes, an embedded one doubled.
func psQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
