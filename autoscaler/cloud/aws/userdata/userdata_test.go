package userdata

import (
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

func TestAL2023UserDataMergesCustomParts(t *testing.T) {
	base := Bootstrap{ClusterName: "c1", Endpoint: "https://api", CA: "Q0E=", CIDR: "10.0.0.0/16",
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

func TestAL2UserData(t *testing.T) {
	maxPods, gcHigh := int32(50), int32(85)
	b := Bootstrap{ClusterName: "c1", Endpoint: "https://api.example", CA: "Q0E=", DNSIP: "10.100.0.10", MaxPods: 29,
		Labels: map[string]string{"team": "blue", "karpenter.sh/nodepool": "default"},
		Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Custom: "#!/bin/bash\necho custom\n"}
	out, err := al2UserData(b)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	want := "/etc/eks/bootstrap.sh 'c1' --apiserver-endpoint 'https://api.example' --b64-cluster-ca 'Q0E=' \\\n" +
		"--dns-cluster-ip '10.100.0.10' \\\n--use-max-pods false \\\n" +
		"--kubelet-extra-args '--node-labels=karpenter.sh/nodepool=default,team=blue --register-with-taints=karpenter.sh/unregistered:NoExecute,dedicated=gpu:NoSchedule --max-pods=29'\n"
	own := strings.Index(s, want)
	custom := strings.Index(s, "echo custom")
	if own < 0 || custom < 0 || custom > own || !strings.HasPrefix(s, "MIME-Version: 1.0\n") || !strings.Contains(s, "Content-Type: text/x-shellscript") {
		t.Errorf("AL2 user data lacks the bootstrap line after the custom part:\n%s", s)
	}
	// The class's kubelet settings win over the instance type's pod count and add flags.
	b.Custom = ""
	b.Kubelet = &awsv1.KubeletConfiguration{MaxPods: &maxPods, ImageGCHighThresholdPercent: &gcHigh,
		KubeReserved: map[string]awsv1.ReservedQuantity{"memory": "1Gi", "cpu": "100m"}, EvictionHard: map[string]awsv1.EvictionThreshold{"memory.available": "5%"}}
	out, err = al2UserData(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"--max-pods=50 --kube-reserved=cpu=100m,memory=1Gi --eviction-hard=memory.available<5% --image-gc-high-threshold=85'"} {
		if !strings.Contains(string(out), w) || strings.Contains(string(out), "--max-pods=29") {
			t.Errorf("AL2 user data lacks %q:\n%s", w, out)
		}
	}
}

// TestWindowsUserData: as Karpenter's Windows bootstrap, one PowerShell block: the custom user
// data, then Start-EKSBootstrap.ps1 with the cluster, CA, kubelet flags and DNS address; quotes
// in values are doubled, so a label cannot end the string.
func TestWindowsUserData(t *testing.T) {
	b := Bootstrap{ClusterName: "c1", Endpoint: "https://api.example", CA: "Q0E=", DNSIP: "10.100.0.10", MaxPods: 110,
		Labels: map[string]string{"team": "it's"}, Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
		Custom: "Write-Host custom\n"}
	out, err := Render("Windows2022", b)
	if err != nil {
		t.Fatal(err)
	}
	want := "<powershell>\nWrite-Host custom\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
		"& $EKSBootstrapScriptFile -EKSClusterName 'c1' -APIServerEndpoint 'https://api.example' -Base64ClusterCA 'Q0E='" +
		" -KubeletExtraArgs '--node-labels=team=it''s --register-with-taints=karpenter.sh/unregistered:NoExecute --max-pods=110' -DNSClusterIP '10.100.0.10'\n</powershell>"
	if string(out) != want {
		t.Errorf("Windows user data:\n%s\nwant:\n%s", out, want)
	}
}

func TestBottlerocketUserDataMergesCustomTOML(t *testing.T) {
	b := Bootstrap{ClusterName: "c1", Endpoint: "https://api.example", CA: "Q0E=", DNSIP: "10.100.0.10", MaxPods: 29,
		Labels:  map[string]string{"team": "blue"},
		Taints:  []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Kubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]awsv1.ReservedQuantity{"cpu": "100m"}},
		Custom: "[settings.kubernetes]\ncluster-name = 'other'\nallowed-unsafe-sysctls = ['net.core.somaxconn']\n\n" +
			"[settings.kubernetes.node-labels]\nowner = 'ops'\n\n[settings.host-containers.admin]\nenabled = true\n"}
	out, err := bottlerocketUserData(b)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName  string              `toml:"cluster-name"`
				APIServer    string              `toml:"api-server"`
				CA           string              `toml:"cluster-certificate"`
				DNS          string              `toml:"cluster-dns-ip"`
				MaxPods      int                 `toml:"max-pods"`
				Labels       map[string]string   `toml:"node-labels"`
				Taints       map[string][]string `toml:"node-taints"`
				KubeReserved map[string]string   `toml:"kube-reserved"`
				Sysctls      []string            `toml:"allowed-unsafe-sysctls"`
			} `toml:"kubernetes"`
			HostContainers map[string]map[string]bool `toml:"host-containers"`
		} `toml:"settings"`
	}
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName != "c1" || k.APIServer != "https://api.example" || k.CA != "Q0E=" || k.DNS != "10.100.0.10" || k.MaxPods != 29 ||
		k.Labels["team"] != "blue" || k.Labels["owner"] != "ops" || len(k.Sysctls) != 1 || k.KubeReserved["cpu"] != "100m" ||
		!slices.Equal(k.Taints["karpenter.sh/unregistered"], []string{":NoExecute"}) || !slices.Equal(k.Taints["dedicated"], []string{"gpu:NoSchedule"}) ||
		!doc.Settings.HostContainers["admin"]["enabled"] {
		t.Errorf("merged settings %+v from:\n%s", doc.Settings, out)
	}
	again, _ := bottlerocketUserData(b)
	if string(again) != string(out) {
		t.Errorf("Bottlerocket user data is not deterministic")
	}
	b.Custom = "[settings\n"
	if _, err := bottlerocketUserData(b); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Errorf("invalid TOML: want a spec.userData error, got %v", err)
	}
	b.Custom = "settings = 3\n"
	if _, err := bottlerocketUserData(b); err == nil || !strings.Contains(err.Error(), "settings must be a TOML table") {
		t.Errorf("settings not a table: got %v", err)
	}
}

func TestClusterDNS(t *testing.T) {
	for cidr, want := range map[string]string{"10.100.0.0/16": "10.100.0.10", "172.20.0.0/16": "172.20.0.10", "10.96.0.0/24": "10.96.0.10", "fd00:10:96::/108": "fd00:10:96::a"} {
		if got, err := ClusterDNS(nil, cidr); err != nil || got != want {
			t.Errorf("ClusterDNS(%s) = %q, %v; want %s", cidr, got, err, want)
		}
	}
	if got, _ := ClusterDNS(&awsv1.KubeletConfiguration{ClusterDNS: []string{"169.254.20.10"}}, "10.100.0.0/16"); got != "169.254.20.10" {
		t.Errorf("the class's clusterDNS should win, got %s", got)
	}
	if _, err := ClusterDNS(nil, "nope"); err == nil || !strings.Contains(err.Error(), "spec.kubelet.clusterDNS") {
		t.Errorf("bad CIDR: got %v", err)
	}
}
