package v1beta1

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// seedDir is where examples/seeds lives relative to this package.
var seedDir = filepath.Join("..", "..", "..", "examples", "seeds")

// readDocs returns the YAML documents of a (possibly multi-document) file.
func readDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading seed: %v", err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting %s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

func TestDecodeSeed004Weasel(t *testing.T) {
	docs := readDocs(t, filepath.Join(seedDir, "004-weasel", "nodepool-ec2nodeclass.yaml"))
	if len(docs) != 2 {
		t.Fatalf("want 2 documents, got %d", len(docs))
	}

	var np NodePool
	if err := yaml.UnmarshalStrict(docs[0], &np); err != nil {
		t.Fatalf("strict decode of NodePool: %v", err)
	}
	if np.APIVersion != KarpenterGroupVersion.String() || np.Kind != NodePoolKind || np.Name != "default" {
		t.Errorf("unexpected identity %s %s %q", np.APIVersion, np.Kind, np.Name)
	}
	spec := np.Spec.Template.Spec
	if got := len(spec.Requirements); got != 4 {
		t.Fatalf("want 4 requirements (commented-out ones excluded), got %d", got)
	}
	it := spec.Requirements[3]
	if it.Key != corev1.LabelInstanceTypeStable || it.Operator != corev1.NodeSelectorOpIn ||
		len(it.Values) != 1 || it.Values[0] != "t3.medium" || it.MinValues != nil {
		t.Errorf("unexpected instance-type requirement %+v", it)
	}
	if ct := spec.Requirements[2]; ct.Key != "karpenter.sh/capacity-type" || ct.Values[0] != "spot" {
		t.Errorf("unexpected capacity-type requirement %+v", ct)
	}
	ref := spec.NodeClassRef
	if ref == nil || ref.Name != "default" || ref.Kind == nil || *ref.Kind != EC2NodeClassKind ||
		ref.APIVersion == nil || *ref.APIVersion != AWSGroupVersion.String() {
		t.Errorf("unexpected nodeClassRef %+v", ref)
	}
	if np.Spec.Template.Metadata != nil {
		t.Errorf("template metadata should be unset, got %+v", np.Spec.Template.Metadata)
	}
	if cpu := np.Spec.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("1000")) != 0 {
		t.Errorf("cpu limit = %s, want 1000", cpu.String())
	}
	d := np.Spec.Disruption
	if d == nil || d.ConsolidationPolicy == nil || *d.ConsolidationPolicy != ConsolidationPolicyWhenUnderutilized {
		t.Fatalf("unexpected disruption %+v", d)
	}
	if d.ExpireAfter == nil || d.ExpireAfter.Never || d.ExpireAfter.Duration != 720*time.Hour {
		t.Errorf("expireAfter = %+v, want 720h", d.ExpireAfter)
	}
	if d.ConsolidateAfter != nil || d.Budgets != nil || np.Spec.Weight != nil {
		t.Errorf("consolidateAfter, budgets and weight should be unset")
	}

	var nc EC2NodeClass
	if err := yaml.UnmarshalStrict(docs[1], &nc); err != nil {
		t.Fatalf("strict decode of EC2NodeClass: %v", err)
	}
	if nc.APIVersion != AWSGroupVersion.String() || nc.Kind != EC2NodeClassKind {
		t.Errorf("unexpected identity %s %s", nc.APIVersion, nc.Kind)
	}
	if nc.Spec.AMIFamily == nil || *nc.Spec.AMIFamily != AMIFamilyAL2 {
		t.Errorf("amiFamily = %v, want AL2", nc.Spec.AMIFamily)
	}
	if nc.Spec.Role == nil || *nc.Spec.Role != "KarpenterNodeRole-weasel-eks" || nc.Spec.InstanceProfile != nil {
		t.Errorf("unexpected role/instanceProfile %v %v", nc.Spec.Role, nc.Spec.InstanceProfile)
	}
	if len(nc.Spec.SubnetSelectorTerms) != 1 || nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "weasel-eks" {
		t.Errorf("unexpected subnet terms %+v", nc.Spec.SubnetSelectorTerms)
	}
	if len(nc.Spec.SecurityGroupSelectorTerms) != 1 || nc.Spec.SecurityGroupSelectorTerms[0].Tags["karpenter.sh/discovery"] != "weasel-eks" {
		t.Errorf("unexpected security group terms %+v", nc.Spec.SecurityGroupSelectorTerms)
	}
	if len(nc.Spec.AMISelectorTerms) != 1 || nc.Spec.AMISelectorTerms[0].ID == nil || *nc.Spec.AMISelectorTerms[0].ID != "ami-09c00c2e93ce7bd23" {
		t.Errorf("unexpected AMI terms %+v", nc.Spec.AMISelectorTerms)
	}
	if nc.Spec.MetadataOptions != nil || nc.Spec.UserData != nil {
		t.Errorf("metadataOptions and userData should be unset")
	}
}

// The v1 manifests of seed 002 must not pass for v1beta1: strictness is what lets the migrator
// tell the versions apart instead of silently dropping v1-only fields.
func TestV1SeedRejected(t *testing.T) {
	dir := filepath.Join(seedDir, "002-hpa-terraform")
	cases := []struct {
		file  string
		into  any
		field string
	}{
		{"ec2nodeclass.yaml", &EC2NodeClass{}, "alias"},
		{"nodepool.yaml", &NodePool{}, "group"},
	}
	for _, c := range cases {
		docs := readDocs(t, filepath.Join(dir, c.file))
		err := yaml.UnmarshalStrict(docs[0], c.into)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: want unknown field %q error, got %v", c.file, c.field, err)
		}
	}
}

// A synthetic manifest touching every spec field of the v1beta1 schemas.
const fullNodePool = `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: full
spec:
  weight: 10
  limits:
    cpu: 100
    memory: 400Gi
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    expireAfter: Never
    budgets:
      - nodes: "10%"
      - nodes: "0"
        schedule: "0 9 * * mon-fri"
        duration: 8h
  template:
    metadata:
      labels: {team: a}
      annotations: {note: x}
    spec:
      nodeClassRef: {name: default}
      requirements:
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: [m5, c5, r5]
          minValues: 2
      taints:
        - {key: dedicated, value: a, effect: NoSchedule}
      startupTaints:
        - {key: cni-not-ready, effect: NoExecute, timeAdded: "2024-01-02T03:04:05Z"}
      kubelet:
        clusterDNS: ["10.0.0.10"]
        maxPods: 110
        podsPerCore: 0
        systemReserved: {cpu: 100m, memory: 100Mi}
        kubeReserved: {cpu: 200m, ephemeral-storage: 1Gi}
        evictionHard: {memory.available: 5%}
        evictionSoft: {memory.available: 500Mi}
        evictionSoftGracePeriod: {memory.available: 1m30s}
        evictionMaxPodGracePeriod: 60
        imageGCHighThresholdPercent: 85
        imageGCLowThresholdPercent: 80
        cpuCFSQuota: false
`

const fullEC2NodeClass = `
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: full
spec:
  amiFamily: Custom
  amiSelectorTerms:
    - {name: my-ami-*, owner: self}
    - tags: {team: a}
  subnetSelectorTerms:
    - id: subnet-0123
  securityGroupSelectorTerms:
    - name: my-sg
  associatePublicIPAddress: false
  instanceProfile: my-profile
  userData: "#!/bin/bash\necho hi\n"
  tags: {team: a}
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 1
    httpTokens: optional
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        volumeSize: 100Gi
        volumeType: gp3
        iops: 3000
        throughput: 125
        encrypted: true
        kmsKeyID: arn:aws:kms:eu-west-1:111122223333:key/abc
        deleteOnTermination: true
        snapshotID: snap-0123
  instanceStorePolicy: RAID0
  detailedMonitoring: true
  context: ctx
`

func TestDecodeFullManifests(t *testing.T) {
	var np NodePool
	if err := yaml.UnmarshalStrict([]byte(fullNodePool), &np); err != nil {
		t.Fatalf("NodePool: %v", err)
	}
	s := np.Spec.Template.Spec
	if s.Requirements[0].MinValues == nil || *s.Requirements[0].MinValues != 2 {
		t.Errorf("minValues not decoded: %+v", s.Requirements[0])
	}
	if s.StartupTaints[0].TimeAdded == nil || s.StartupTaints[0].TimeAdded.Year() != 2024 {
		t.Errorf("timeAdded not decoded: %+v", s.StartupTaints[0])
	}
	if s.Kubelet.PodsPerCore == nil || *s.Kubelet.PodsPerCore != 0 {
		t.Errorf("explicit zero podsPerCore lost: %v", s.Kubelet.PodsPerCore)
	}
	if s.Kubelet.CPUCFSQuota == nil || *s.Kubelet.CPUCFSQuota {
		t.Errorf("explicit false cpuCFSQuota lost: %v", s.Kubelet.CPUCFSQuota)
	}
	if g := s.Kubelet.EvictionSoftGracePeriod["memory.available"]; g.Duration != 90*time.Second {
		t.Errorf("evictionSoftGracePeriod = %v", g.Duration)
	}
	d := np.Spec.Disruption
	if !d.ExpireAfter.Never || d.ConsolidateAfter.Duration != 30*time.Second {
		t.Errorf("durations: expireAfter %+v consolidateAfter %+v", d.ExpireAfter, d.ConsolidateAfter)
	}
	if b := d.Budgets[1]; b.Nodes != "0" || *b.Schedule != "0 9 * * mon-fri" || b.Duration.Duration != 8*time.Hour {
		t.Errorf("budget = %+v", b)
	}

	var nc EC2NodeClass
	if err := yaml.UnmarshalStrict([]byte(fullEC2NodeClass), &nc); err != nil {
		t.Fatalf("EC2NodeClass: %v", err)
	}
	bdm := nc.Spec.BlockDeviceMappings[0]
	if bdm.EBS.VolumeSize.Cmp(resource.MustParse("100Gi")) != 0 || !*bdm.RootVolume {
		t.Errorf("block device = %+v", bdm)
	}
	if nc.Spec.AssociatePublicIPAddress == nil || *nc.Spec.AssociatePublicIPAddress {
		t.Errorf("explicit false associatePublicIPAddress lost")
	}
	if *nc.Spec.AMISelectorTerms[0].Owner != "self" || *nc.Spec.SecurityGroupSelectorTerms[0].Name != "my-sg" {
		t.Errorf("selector terms not decoded")
	}

	var claim NodeClaim
	if err := yaml.UnmarshalStrict([]byte(nodeClaim), &claim); err != nil {
		t.Fatalf("NodeClaim: %v", err)
	}
	if q := claim.Spec.Resources.Requests[corev1.ResourceCPU]; q.MilliValue() != 1500 {
		t.Errorf("nodeclaim cpu request = %s", q.String())
	}
	if claim.Spec.NodeClassRef == nil || claim.Spec.NodeClassRef.Name != "default" {
		t.Errorf("nodeclaim nodeClassRef = %+v", claim.Spec.NodeClassRef)
	}
}

const nodeClaim = `
apiVersion: karpenter.sh/v1beta1
kind: NodeClaim
metadata:
  name: full-abcde
spec:
  nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: default}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
  resources:
    requests: {cpu: 1500m, pods: 3}
  kubelet:
    maxPods: 20
`

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	bad := strings.Replace(fullNodePool, "    consolidateAfter: 30s", "    consolidateAfter: 30s\n    consolidateBefore: 1m", 1)
	var np NodePool
	err := yaml.UnmarshalStrict([]byte(bad), &np)
	if err == nil || !strings.Contains(err.Error(), "consolidateBefore") {
		t.Fatalf("want unknown field error, got %v", err)
	}
}

func TestStatusIsTolerated(t *testing.T) {
	in := fullNodePool + "status:\n  resources: {cpu: \"4\"}\n  conditions: []\n"
	var np NodePool
	if err := yaml.UnmarshalStrict([]byte(in), &np); err != nil {
		t.Fatalf("decode with status: %v", err)
	}
	if np.Status == nil || len(np.Status.Raw) == 0 {
		t.Errorf("status should be kept opaque")
	}
}

func TestNillableDuration(t *testing.T) {
	good := []struct {
		in    string
		never bool
		d     time.Duration
		out   string
	}{
		{`"720h"`, false, 720 * time.Hour, "720h"},
		{`"Never"`, true, 0, "Never"},
		{`"1h30m"`, false, 90 * time.Minute, "1h30m"},
		{`"90s"`, false, 90 * time.Second, "1m30s"},
		{`"1m"`, false, time.Minute, "1m"},
		{`"0s"`, false, 0, "0s"},
	}
	for _, c := range good {
		var d NillableDuration
		if err := json.Unmarshal([]byte(c.in), &d); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if d.Never != c.never || d.Duration != c.d {
			t.Errorf("%s: got %+v", c.in, d)
		}
		out, err := json.Marshal(d)
		if err != nil || string(out) != `"`+c.out+`"` {
			t.Errorf("%s: marshal = %s, %v; want %q", c.in, out, err, c.out)
		}
	}
	for _, in := range []string{`"never"`, `"abc"`, `"-5m"`, `30`, `null`} {
		var d NillableDuration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("%s: want error, got %+v", in, d)
		}
	}
}
