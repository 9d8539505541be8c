package amifamily

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The parameters Karpenter reads for each alias: per architecture and accelerator variant.
func TestAliasParameters(t *testing.T) {
	for alias, want := range map[string][]string{
		"al2023@latest": {
			"amd64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
			"amd64 [nvidia] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
			"amd64 [neuron] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/neuron/recommended/image_id",
			"arm64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id",
			"arm64 [nvidia] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/nvidia/recommended/image_id"},
		"al2023@v20261001": {
			"amd64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.32-v20261001/image_id",
			"amd64 [nvidia] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.32-v20261001/image_id",
			"amd64 [neuron] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.32-v20261001/image_id",
			"arm64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.32-v20261001/image_id",
			"arm64 [nvidia] /aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.32-v20261001/image_id"},
		"al2@latest": {"amd64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id",
			"arm64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id",
			"amd64 [nvidia neuron] /aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id"},
		"al2@v20261001": {"amd64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2/amazon-eks-node-1.32-v20261001/image_id",
			"arm64 [standard] /aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/amazon-eks-arm64-node-1.32-v20261001/image_id",
			"amd64 [nvidia neuron] /aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/amazon-eks-gpu-node-1.32-v20261001/image_id"},
		"bottlerocket@latest": {"amd64 [standard neuron] /aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id",
			"arm64 [standard] /aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id",
			"amd64 [nvidia] /aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/latest/image_id",
			"arm64 [nvidia] /aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/latest/image_id"},
		"bottlerocket@v1.49.0": {"amd64 [standard neuron] /aws/service/bottlerocket/aws-k8s-1.32/x86_64/1.49.0/image_id",
			"arm64 [standard] /aws/service/bottlerocket/aws-k8s-1.32/arm64/1.49.0/image_id",
			"amd64 [nvidia] /aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/1.49.0/image_id",
			"arm64 [nvidia] /aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/1.49.0/image_id"},
		"windows2019@latest": {"amd64 [windows-10.0.17763] /aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.32/image_id"},
		"windows2022@latest": {"amd64 [windows-10.0.20348] /aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id"},
		"windows2025@latest": {"amd64 [windows-10.0.26100] /aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.32/image_id"},
	} {
		ps, err := AliasParameters(alias, "1.32")
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%s %v %s", p.Arch, p.Variants, p.Name))
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", alias, got, err, want)
		}
	}
	if _, err := AliasParameters("windows2022@v1", "1.32"); err == nil || !strings.Contains(err.Error(), "@latest only") {
		t.Errorf("windows alias with a version: got %v", err)
	}
}

// Which image a type launches with, as Karpenter's variant requirements decide: NVIDIA for
// GPU types, Neuron for accelerator types, standard otherwise; an image not from an alias
// suits every type of its architecture.
func TestImageSuits(t *testing.T) {
	gpu := map[string]string{corev1.LabelArchStable: "amd64", "karpenter.k8s.aws/instance-gpu-count": "1"}
	inf := map[string]string{corev1.LabelArchStable: "amd64", "karpenter.k8s.aws/instance-accelerator-count": "1"}
	cpu := map[string]string{corev1.LabelArchStable: "amd64"}
	arm := map[string]string{corev1.LabelArchStable: "arm64"}
	for _, tc := range []struct {
		im                 Image
		gpu, inf, cpu, arm bool
	}{
		{Image{Arch: "amd64", Variants: []string{VariantStandard}}, false, false, true, false},
		{Image{Arch: "amd64", Variants: []string{VariantNvidia}}, true, false, false, false},
		{Image{Arch: "amd64", Variants: []string{VariantNeuron, VariantNvidia}}, true, true, false, false},
		{Image{Arch: "amd64", Variants: []string{VariantNeuron, VariantStandard}}, false, true, true, false},
		{Image{Arch: "amd64"}, true, true, true, false},
		{Image{Arch: "arm64", Variants: []string{VariantStandard}}, false, false, false, true},
	} {
		got := [4]bool{tc.im.Suits(gpu), tc.im.Suits(inf), tc.im.Suits(cpu), tc.im.Suits(arm)}
		if want := [4]bool{tc.gpu, tc.inf, tc.cpu, tc.arm}; got != want {
			t.Errorf("%s %v suits gpu/neuron/cpu/arm %v, want %v", tc.im.Arch, tc.im.Variants, got, want)
		}
		if n := len(tc.im.Requirements()); n != max(len(tc.im.Variants), 1) {
			t.Errorf("%v: %d requirement sets", tc.im.Variants, n)
		}
	}
	// A Windows image suits the Windows nodes of its build only, and says so in status.amis.
	win := Image{Arch: "amd64", Variants: []string{VariantWindows + "10.0.20348"}}
	w2022 := map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.20348"}
	w2019 := map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.17763"}
	if !win.Suits(w2022) || win.Suits(w2019) || win.Suits(cpu) {
		t.Errorf("the 2022 image suits 2022/2019/linux: %t %t %t", win.Suits(w2022), win.Suits(w2019), win.Suits(cpu))
	}
	if rs := win.Requirements(); len(rs) != 1 || len(rs[0]) != 2 || rs[0][0].Values[0] != "windows" || rs[0][1].Values[0] != "10.0.20348" {
		t.Errorf("Windows image requirements %+v, want os windows and build 10.0.20348", rs)
	}
}
