package amifamily

import (
	"slices"
	"strings"
	"testing"
)

func TestAliasParameters(t *testing.T) {
	for alias, want := range map[string][]string{
		"al2023@latest": {"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id"},
		"al2@latest": {"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id",
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id"},
		"al2@v20261001": {"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/amazon-eks-node-1.32-v20261001/image_id",
			"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/amazon-eks-arm64-node-1.32-v20261001/image_id"},
		"bottlerocket@latest":  {"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id", "/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id"},
		"bottlerocket@v1.49.0": {"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/1.49.0/image_id", "/aws/service/bottlerocket/aws-k8s-1.32/arm64/1.49.0/image_id"},
	} {
		got, err := AliasParameters(alias, "1.32")
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", alias, got, err, want)
		}
	}
	if _, err := AliasParameters("windows2022@latest", "1.32"); err == nil || !strings.Contains(err.Error(), "Windows is not supported") {
		t.Errorf("windows alias: got %v", err)
	}
}
