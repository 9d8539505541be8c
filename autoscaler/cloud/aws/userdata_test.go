package aws

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAL2023UserDataMergesCustomParts(t *testing.T) {
	base := bootstrap{ClusterName: "c1", Endpoint: "https://api", CA: "Q0E=", CIDR: "10.0.0.0/16",
		Labels: map[string]string{"b": "2", "a": "1"}, Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}}
	mimeDoc := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"XX\"\n\n--XX\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho custom\n--XX--\n"
	for name, tc := range map[string]struct{ custom, want string }{
		"none":   {"", ""},
		"script": {"#!/bin/bash\necho hi\n", "Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n"},
		"mime":   {mimeDoc, "Content-Type: text/x-shellscript\n\n#!/bin/bash\necho custom\n"},
	} {
		b := base
		b.Custom = tc.custom
		out, err := al2023UserData(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := string(out)
		own := strings.Index(s, "Content-Type: application/node.eks.aws")
		if own < 0 || !strings.Contains(s, "--node-labels=a=1,b=2") || !strings.Contains(s, "--register-with-taints=k=v:NoSchedule") ||
			!strings.HasSuffix(s, "--//--\n") {
			t.Errorf("%s: user data:\n%s", name, s)
		}
		if tc.want != "" {
			if i := strings.Index(s, tc.want); i < 0 || i > own {
				t.Errorf("%s: custom part missing or after karpool's NodeConfig:\n%s", name, s)
			}
		}
		again, _ := al2023UserData(b)
		if string(again) != s {
			t.Errorf("%s: user data is not deterministic", name)
		}
	}
	b := base
	b.Custom = "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n"
	if _, err := al2023UserData(b); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Errorf("non-multipart MIME: want a spec.userData error, got %v", err)
	}
}

func TestKubeletLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"team": true, "karpenter.sh/nodepool": true, "node.kubernetes.io/role": true, "example.kubelet.kubernetes.io/x": true,
		"kubernetes.io/hostname": false, "topology.kubernetes.io/zone": false, "k8s.io/x": false, "node-role.kubernetes.io/worker": false,
	} {
		if got := kubeletLabel(key); got != want {
			t.Errorf("kubeletLabel(%q) = %v, want %v", key, got, want)
		}
	}
}
