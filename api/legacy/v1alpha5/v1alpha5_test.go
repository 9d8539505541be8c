package v1alpha5

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// seedDir is where the seed-000 manifests live relative to this package.
var seedDir = filepath.Join("..", "..", "..", "examples", "seeds", "000-spot-dedicated")

func decodeSeed(t *testing.T, name string) *Provisioner {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(seedDir, name))
	if err != nil {
		t.Fatalf("reading seed: %v", err)
	}
	var p Provisioner
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("strict decode of %s: %v", name, err)
	}
	return &p
}

func TestDecodeSeed000Provisioner1(t *testing.T) {
	p := decodeSeed(t, "karpenter-provisioner1.yaml")
	if p.APIVersion != ProvisionerGroupVersion.String() || p.Kind != ProvisionerKind || p.Name != "provisioner1" {
		t.Errorf("unexpected identity %s %s %q", p.APIVersion, p.Kind, p.Name)
	}
	if len(p.Spec.Requirements) != 1 {
		t.Fatalf("want 1 requirement, got %d", len(p.Spec.Requirements))
	}
	r := p.Spec.Requirements[0]
	if r.Key != "karpenter.sh/capacity-type" || r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1 || r.Values[0] != "spot" {
		t.Errorf("unexpected requirement %+v", r)
	}
	if p.Spec.Limits == nil {
		t.Fatal("limits missing")
	}
	if cpu := p.Spec.Limits.Resources[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("1000")) != 0 {
		t.Errorf("cpu limit = %s, want 1000", cpu.String())
	}
	if p.Spec.TTLSecondsAfterEmpty == nil || *p.Spec.TTLSecondsAfterEmpty != 30 {
		t.Errorf("ttlSecondsAfterEmpty = %v, want 30", p.Spec.TTLSecondsAfterEmpty)
	}
	if p.Spec.TTLSecondsUntilExpired != nil || p.Spec.Consolidation != nil || p.Spec.ProviderRef != nil || p.Spec.Weight != nil {
		t.Errorf("ttlSecondsUntilExpired, consolidation, providerRef and weight should be unset")
	}

	aws, err := p.Spec.AWSProvider()
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	if aws == nil {
		t.Fatal("provider block missing")
	}
	// The seed keeps the shell placeholder; it is just a string to the decoder.
	if got := aws.SubnetSelector["karpenter.sh/discovery"]; got != "${EKSCLUSTER_NAME}" {
		t.Errorf("subnetSelector = %q", got)
	}
	if got := aws.SecurityGroupSelector["karpenter.sh/discovery"]; got != "${EKSCLUSTER_NAME}" {
		t.Errorf("securityGroupSelector = %q", got)
	}
	if aws.InstanceProfile != nil || aws.AMIFamily != nil {
		t.Errorf("instanceProfile and amiFamily should be unset in the seed")
	}
}

func TestDecodeSeed000Provisioner2(t *testing.T) {
	p := decodeSeed(t, "karpenter-provisioner2.yaml")
	if len(p.Spec.Taints) != 1 {
		t.Fatalf("want 1 taint, got %d", len(p.Spec.Taints))
	}
	if tn := p.Spec.Taints[0]; tn.Key != "cpuIntensive" || tn.Value != "true" || tn.Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("unexpected taint %+v", tn)
	}
	if p.Spec.Labels["nodeType"] != "cpu-node" || p.Spec.Labels["phase"] != "test2" {
		t.Errorf("unexpected labels %v", p.Spec.Labels)
	}
	want := map[string]string{
		corev1.LabelInstanceTypeStable: "c5.xlarge",
		corev1.LabelTopologyZone:       "ap-northeast-1a",
		"karpenter.sh/capacity-type":   "on-demand",
	}
	if len(p.Spec.Requirements) != len(want) {
		t.Fatalf("want %d requirements, got %d", len(want), len(p.Spec.Requirements))
	}
	for _, r := range p.Spec.Requirements {
		if len(r.Values) != 1 || want[r.Key] != r.Values[0] {
			t.Errorf("unexpected requirement %+v", r)
		}
	}
	if aws, err := p.Spec.AWSProvider(); err != nil || aws == nil || len(aws.SubnetSelector) != 1 {
		t.Errorf("provider = %+v, %v", aws, err)
	}
}

// A synthetic Provisioner touching every spec field of the v1alpha5 schema, with a providerRef
// to the AWSNodeTemplate below instead of an inline provider.
const fullProvisioner = `
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: full
spec:
  annotations: {note: x}
  labels: {team: a}
  taints: [{key: dedicated, value: a, effect: NoSchedule}]
  startupTaints: [{key: cni-not-ready, effect: NoExecute, timeAdded: "2023-01-02T03:04:05Z"}]
  requirements:
    - {key: karpenter.k8s.aws/instance-category, operator: NotIn, values: [t]}
  kubeletConfiguration:
    clusterDNS: ["10.0.0.10"]
    containerRuntime: containerd
    maxPods: 110
    podsPerCore: 2
    systemReserved: {cpu: 100m, memory: 100Mi}
    kubeReserved: {cpu: 1, ephemeral-storage: 1Gi}
    evictionHard: {memory.available: 5%}
    evictionSoft: {nodefs.available: 10%}
    evictionSoftGracePeriod: {nodefs.available: 2m}
    evictionMaxPodGracePeriod: 30
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
  providerRef: {name: full}
  ttlSecondsAfterEmpty: 0
  ttlSecondsUntilExpired: 2592000
  limits: {resources: {cpu: "64", memory: 256Gi}}
  weight: 50
  consolidation: {enabled: false}
`

const fullAWSNodeTemplate = `
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: full
spec:
  amiFamily: Bottlerocket
  amiSelector: {"aws::ids": "ami-1,ami-2"}
  subnetSelector: {karpenter.sh/discovery: my-cluster}
  securityGroupSelector: {"aws-ids": "sg-1"}
  instanceProfile: KarpenterNodeInstanceProfile-my-cluster
  launchTemplate: my-template
  context: ctx
  tags: {team: a}
  userData: |
    [settings.kubernetes]
    max-pods = 110
  detailedMonitoring: true
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 2
    httpTokens: required
  blockDeviceMappings:
    - deviceName: /dev/xvdb
      ebs:
        volumeSize: 100
        volumeType: gp3
        iops: 3000
        throughput: 125
        encrypted: true
        kmsKeyID: alias/ebs
        deleteOnTermination: true
        snapshotID: snap-1
`

func TestDecodeFullManifests(t *testing.T) {
	var p Provisioner
	if err := yaml.UnmarshalStrict([]byte(fullProvisioner), &p); err != nil {
		t.Fatalf("Provisioner: %v", err)
	}
	if p.Spec.TTLSecondsAfterEmpty == nil || *p.Spec.TTLSecondsAfterEmpty != 0 {
		t.Errorf("explicit zero ttlSecondsAfterEmpty lost: %v", p.Spec.TTLSecondsAfterEmpty)
	}
	if p.Spec.Consolidation.Enabled == nil || *p.Spec.Consolidation.Enabled {
		t.Errorf("explicit false consolidation lost")
	}
	k := p.Spec.KubeletConfiguration
	if q := k.KubeReserved[corev1.ResourceCPU]; q.Value() != 1 {
		t.Errorf("kubeReserved cpu = %s", q.String())
	}
	if g := k.EvictionSoftGracePeriod["nodefs.available"]; g.Duration != 2*time.Minute {
		t.Errorf("evictionSoftGracePeriod = %v", g.Duration)
	}
	if p.Spec.ProviderRef == nil || p.Spec.ProviderRef.Name != "full" || p.Spec.ProviderRef.Kind != nil {
		t.Errorf("providerRef = %+v", p.Spec.ProviderRef)
	}
	if aws, err := p.Spec.AWSProvider(); aws != nil || err != nil {
		t.Errorf("no provider block: want nil, nil; got %+v, %v", aws, err)
	}

	var n AWSNodeTemplate
	if err := yaml.UnmarshalStrict([]byte(fullAWSNodeTemplate), &n); err != nil {
		t.Fatalf("AWSNodeTemplate: %v", err)
	}
	if n.APIVersion != AWSNodeTemplateGroupVersion.String() || n.Kind != AWSNodeTemplateKind {
		t.Errorf("unexpected identity %s %s", n.APIVersion, n.Kind)
	}
	if *n.Spec.AMIFamily != "Bottlerocket" || n.Spec.AMISelector["aws::ids"] != "ami-1,ami-2" {
		t.Errorf("ami settings not decoded")
	}
	if *n.Spec.LaunchTemplateName != "my-template" || !strings.Contains(*n.Spec.UserData, "max-pods") {
		t.Errorf("launchTemplate/userData not decoded")
	}
	// v1alpha1 accepted a bare number of bytes for volumeSize.
	if v := n.Spec.BlockDeviceMappings[0].EBS.VolumeSize; v == nil || v.Value() != 100 {
		t.Errorf("volumeSize = %v", v)
	}
	// The embedded TypeMeta of AWS must not swallow the object's own apiVersion/kind.
	if n.Spec.APIVersion != "" || n.Spec.Kind != "" {
		t.Errorf("spec apiVersion/kind should be empty, got %q %q", n.Spec.APIVersion, n.Spec.Kind)
	}
}

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	bad := strings.Replace(fullProvisioner, "  weight: 50", "  weight: 50\n  ttlSecondsAfterIdle: 5", 1)
	var p Provisioner
	if err := yaml.UnmarshalStrict([]byte(bad), &p); err == nil || !strings.Contains(err.Error(), "ttlSecondsAfterIdle") {
		t.Errorf("want unknown field error, got %v", err)
	}
}

func TestAWSProviderRejectsTemplateOnlyFields(t *testing.T) {
	in := `
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: p}
spec:
  provider:
    apiVersion: extensions.karpenter.sh/v1alpha1
    kind: AWS
    subnetSelector: {Name: private}
    userData: "#!/bin/bash"
`
	var p Provisioner
	if err := yaml.UnmarshalStrict([]byte(in), &p); err != nil {
		t.Fatalf("provider is free-form, decoding must succeed: %v", err)
	}
	if _, err := p.Spec.AWSProvider(); err == nil || !strings.Contains(err.Error(), "userData") {
		t.Errorf("want unknown field userData, got %v", err)
	}

	ok := strings.Replace(in, "    userData: \"#!/bin/bash\"\n", "", 1)
	p = Provisioner{}
	if err := yaml.UnmarshalStrict([]byte(ok), &p); err != nil {
		t.Fatal(err)
	}
	aws, err := p.Spec.AWSProvider()
	if err != nil || aws.Kind != "AWS" || aws.APIVersion != "extensions.karpenter.sh/v1alpha1" || aws.SubnetSelector["Name"] != "private" {
		t.Errorf("provider = %+v, %v", aws, err)
	}
}
