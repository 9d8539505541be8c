package userdata

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// al2UserData renders Amazon Linux 2 user data: a MIME multipart document whose parts are the
// custom user data's parts followed by a shell script that joins the node with EKS's
// /etc/eks/bootstrap.sh. cloud-init runs the parts in order, so custom scripts run before the
// kubelet starts. --use-max-pods false stops bootstrap.sh from computing its own pod limit, so
// the kubelet gets the instance type's pod capacity that karpool scheduled against.
func al2UserData(b Bootstrap) ([]byte, error) {
	parts, err := customParts(b.Custom)
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	sb.WriteString("#!/bin/bash -xe\n")
	sb.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh wants "--flag value", not "--flag=value".
	fmt.Fprintf(&sb, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s --b64-cluster-ca %s", shellQuote(b.ClusterName), shellQuote(b.Endpoint), shellQuote(b.CA))
	if b.DNSIP != "" {
		fmt.Fprintf(&sb, " \\\n--dns-cluster-ip %s", shellQuote(b.DNSIP))
	}
	sb.WriteString(" \\\n--use-max-pods false")
	if args := al2KubeletArgs(b); len(args) > 0 {
		fmt.Fprintf(&sb, " \\\n--kubelet-extra-args %s", shellQuote(strings.Join(args, " ")))
	}
	sb.WriteByte('\n')
	parts = append(parts, mimePart{contentType: `text/x-shellscript; charset="us-ascii"`, body: []byte(sb.String())})
	return writeMIME(parts), nil
}

// al2KubeletArgs are the kubelet flags for bootstrap.sh's --kubelet-extra-args: labels, taints,
// the pod limit and the class's kubelet settings, in a fixed order.
func al2KubeletArgs(b Bootstrap) []string {
	var args []string
	if len(b.Labels) > 0 {
		args = append(args, "--node-labels="+labelList(b.Labels))
	}
	if len(b.Taints) > 0 {
		args = append(args, "--register-with-taints="+taintList(b.Taints))
	}
	k := b.Kubelet
	if k == nil {
		k = &awsv1.KubeletConfiguration{}
	}
	if k.MaxPods != nil {
		args = append(args, fmt.Sprintf("--max-pods=%d", *k.MaxPods))
	} else if b.MaxPods > 0 {
		args = append(args, fmt.Sprintf("--max-pods=%d", b.MaxPods))
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	args = appendMapFlag(args, "--system-reserved", k.SystemReserved, "=")
	args = appendMapFlag(args, "--kube-reserved", k.KubeReserved, "=")
	args = appendMapFlag(args, "--eviction-hard", k.EvictionHard, "<")
	args = appendMapFlag(args, "--eviction-soft", k.EvictionSoft, "<")
	if len(k.EvictionSoftGracePeriod) > 0 {
		grace := map[string]string{}
		for sig, d := range k.EvictionSoftGracePeriod {
			grace[sig] = d.Duration.String()
		}
		args = appendMapFlag(args, "--eviction-soft-grace-period", grace, "=")
	}
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	return args
}

// appendMapFlag appends --flag=k1<sep>v1,k2<sep>v2 with the keys sorted, when m is not empty.
func appendMapFlag[V ~string](args []string, flag string, m map[string]V, sep string) []string {
	if len(m) == 0 {
		return args
	}
	kv := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+sep+string(m[k]))
	}
	return append(args, flag+"="+strings.Join(kv, ","))
}

// shellQuote quotes s for sh: single quotes, with embedded single quotes closed, escaped and
// reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
