package awssim

import (
	"encoding/base64"
	"net/url"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpool/karpool/autoscaler/catalog"
)

func enc(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

const testAL2023 = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n--//\r\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\r\n\r\n#!/bin/bash\necho custom\r\n--//\r\nContent-Type: application/node.eks.aws\r\n\r\n" +
	`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: karpool
  kubelet:
    config:
      maxPods: 58
      registerWithTaints:
      - key: nvidia.com/gpu
        effect: NoSchedule
      kubeReserved:
        cpu: 100m
      evictionHard:
        memory.available: 5%
    flags:
    - --node-labels="karpenter.sh/nodepool=gpu,team=ml"
` + "\r\n--//--\r\n"

const testAL2 = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'karpool' --apiserver-endpoint 'https://example.com' --b64-cluster-ca 'Y2E=' \
--use-max-pods false \
--kubelet-extra-args '--node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default" --register-with-taints="dedicated=infra:NoExecute" --max-pods=110'
--BOUNDARY--
`

const testBottlerocket = `[settings.kubernetes]
api-server = 'https://example.com'
cluster-name = 'karpool'
max-pods = 29

[settings.kubernetes.node-labels]
'karpenter.sh/nodepool' = 'br'
'karpenter.sh/capacity-type' = 'on-demand'

[settings.kubernetes.node-taints]
'example.com/special' = ['true:NoSchedule']

[settings.kubernetes.kube-reserved]
memory = '500Mi'
`

func TestParseUserData(t *testing.T) {
	b, err := parseUserData(enc(testAL2023))
	if err != nil {
		t.Fatal(err)
	}
	if b.family != catalog.AMIFamilyAL2023 || b.clusterName != "karpool" ||
		!reflect.DeepEqual(b.labels, map[string]string{"karpenter.sh/nodepool": "gpu", "team": "ml"}) ||
		!reflect.DeepEqual(b.taints, []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}) ||
		*b.kubelet.MaxPods != 58 || *b.kubelet.KubeReserved.CPU != 100 || b.kubelet.EvictionHard.MemoryAvailable.Percent != 5 {
		t.Errorf("AL2023: %+v", b)
	}
	b, err = parseUserData(enc(testAL2))
	if err != nil {
		t.Fatal(err)
	}
	if b.family != catalog.AMIFamilyAL2 || b.clusterName != "karpool" || b.labels["karpenter.sh/capacity-type"] != "spot" ||
		len(b.taints) != 1 || b.taints[0] != (corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}) || *b.kubelet.MaxPods != 110 {
		t.Errorf("AL2: %+v", b)
	}
	b, err = parseUserData(enc(testBottlerocket))
	if err != nil {
		t.Fatal(err)
	}
	if b.family != catalog.AMIFamilyBottlerocket || b.labels["karpenter.sh/nodepool"] != "br" || len(b.taints) != 1 ||
		b.taints[0] != (corev1.Taint{Key: "example.com/special", Value: "true", Effect: corev1.TaintEffectNoSchedule}) ||
		*b.kubelet.MaxPods != 29 || *b.kubelet.KubeReserved.Memory != 500<<20 {
		t.Errorf("Bottlerocket: %+v", b)
	}
	// A bare NodeConfig (no MIME) and plain scripts.
	b, err = parseUserData(enc("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--node-labels=a=b\"]\n"))
	if err != nil || b.labels["a"] != "b" {
		t.Errorf("bare NodeConfig: %+v %v", b, err)
	}
	if b, err := parseUserData(enc("#!/bin/bash\necho hi\n")); err != nil || b.family != "" {
		t.Errorf("plain script: %+v %v", b, err)
	}
	if _, err := parseUserData("%%%"); err == nil {
		t.Error("bad base64 accepted")
	}
	if _, err := parseUserData(enc("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--register-with-taints=a=b:Sometimes\"]\n")); err == nil {
		t.Error("bad taint effect accepted")
	}
}

func TestKubeletNode(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ami *image
	for _, im := range s.st.images {
		if im.family == familyAL2023 && im.variant == "standard" && im.arch == "amd64" && im.k8sVersion == "1.36" {
			ami = im
		}
	}
	cs, _ := s.spec("m5.large")
	sn := s.st.subnets[0]
	in, aerr := s.launch(&launchSpec{instanceType: "m5.large", subnet: sn, imageID: *ami.ImageId, userData: strPtr(enc(testAL2023)),
		capacityType: catalog.CapacityTypeOnDemand}, ami, cs, s.st.clusterCreated)
	if aerr != nil {
		t.Fatal(aerr)
	}
	n, err := s.kubeletNode(in)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "ip-10-0-0-10.ec2.internal" || n.Spec.ProviderID != "aws:///us-east-1a/"+in.id || n.Annotations[KwokNodeAnnotation] != "fake" {
		t.Errorf("node %s %s %v", n.Name, n.Spec.ProviderID, n.Annotations)
	}
	for k, v := range map[string]string{"karpenter.sh/nodepool": "gpu", "team": "ml", "node.kubernetes.io/instance-type": "m5.large",
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "us-east-1a",
		"topology.kubernetes.io/region": "us-east-1", "kubernetes.io/hostname": n.Name} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	// maxPods 58 from the NodeConfig; kube-reserved cpu 100m; eviction 5% of memory.
	if p := n.Status.Allocatable[corev1.ResourcePods]; p.Value() != 58 {
		t.Errorf("pods %s", p.String())
	}
	if c := n.Status.Allocatable[corev1.ResourceCPU]; c.MilliValue() != 1900 {
		t.Errorf("cpu %s", c.String())
	}
	// Without kubelet overrides, m5.large is 1930m / 6903Mi / 29 pods.
	in.userData = enc(strings.Replace(al2023Plain, "LABELS", "a=b", 1))
	n, err = s.kubeletNode(in)
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem, pods := n.Status.Allocatable[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceMemory], n.Status.Allocatable[corev1.ResourcePods]
	if cpu.String() != "1930m" || mem.String() != "6903Mi" || pods.String() != "29" {
		t.Errorf("m5.large allocatable %s %s %s", cpu.String(), mem.String(), pods.String())
	}
	// The kubelet refuses to register with restricted kubernetes.io labels.
	in.userData = enc(strings.Replace(al2023Plain, "LABELS", "node-role.kubernetes.io/worker=", 1))
	if _, err := s.kubeletNode(in); err == nil {
		t.Error("restricted label accepted")
	}
	in.userData = enc(strings.Replace(al2023Plain, "LABELS", "node.kubernetes.io/lifecycle=spot", 1))
	if _, err := s.kubeletNode(in); err != nil {
		t.Errorf("node.kubernetes.io label refused: %v", err)
	}
	_ = url.Values{}
}

const al2023Plain = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=LABELS\n"

func strPtr(s string) *string { return &s }

func TestEventPatterns(t *testing.T) {
	ev := map[string]any{"source": "aws.ec2", "detail-type": "EC2 Instance State-change Notification", "resources": []any{"arn:x"},
		"detail": map[string]any{"instance-id": "i-1", "state": "terminated", "n": 5.0}}
	for pattern, want := range map[string]bool{
		`{"source":["aws.ec2"]}`:    true,
		`{"source":["aws.health"]}`: false,
		`{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`: false,
		`{"detail":{"state":["stopping","terminated"]}}`:                                  true,
		`{"detail":{"state":[{"anything-but":["terminated"]}]}}`:                          false,
		`{"detail":{"state":[{"prefix":"term"}]}}`:                                        true,
		`{"detail":{"state":[{"suffix":"nated"}]}}`:                                       true,
		`{"detail":{"missing":[{"exists":false}]}}`:                                       true,
		`{"detail":{"instance-id":[{"exists":true}]}}`:                                    true,
		`{"detail":{"n":[{"numeric":[">",1,"<=",5]}]}}`:                                   true,
		`{"detail":{"n":[{"numeric":[">",5]}]}}`:                                          false,
		`{"source":[{"equals-ignore-case":"AWS.EC2"}]}`:                                   true,
		`{"source":[{"wildcard":"aws.*"}]}`:                                               true,
		`{"resources":["arn:x"]}`:                                                         true,
	} {
		p, err := parsePattern(pattern)
		if err != nil {
			t.Errorf("%s: %v", pattern, err)
			continue
		}
		if got := matchPattern(p, ev); got != want {
			t.Errorf("%s: match = %v, want %v", pattern, got, want)
		}
	}
	for _, bad := range []string{`[]`, `{"source":"aws.ec2"}`, `{"source":[]}`, `{"source":[{"bogus":1}]}`, `{}`} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("pattern %s accepted", bad)
		}
	}
}
