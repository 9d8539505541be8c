package v1

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const demoNodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        volumeSize: 20Gi
        volumeType: gp3
        encrypted: true
  metadataOptions:
    httpPutResponseHopLimit: 2
    httpTokens: required
  userData: |
    echo hello
`

func TestEC2NodeClassYAMLRoundTrip(t *testing.T) {
	var first EC2NodeClass
	if err := yaml.UnmarshalStrict([]byte(demoNodeClass), &first); err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := yaml.Marshal(&first)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var nc EC2NodeClass
	if err := yaml.UnmarshalStrict(out, &nc); err != nil {
		t.Fatalf("decode re-encoded object: %v\n%s", err, out)
	}

	if nc.Kind != "EC2NodeClass" || nc.APIVersion != GroupVersion.String() || nc.Name != "default" {
		t.Errorf("type/object meta = %q %q %q", nc.Kind, nc.APIVersion, nc.Name)
	}
	s := nc.Spec
	if s.Role != "KarpenterNodeRole-demo" || s.InstanceProfile != nil {
		t.Errorf("role = %q, instanceProfile = %v", s.Role, s.InstanceProfile)
	}
	if len(s.AMISelectorTerms) != 1 || s.AMISelectorTerms[0].Alias != "al2023@latest" {
		t.Errorf("amiSelectorTerms = %+v", s.AMISelectorTerms)
	}
	if len(s.SubnetSelectorTerms) != 1 || s.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "demo" {
		t.Errorf("subnetSelectorTerms = %+v", s.SubnetSelectorTerms)
	}
	if len(s.SecurityGroupSelectorTerms) != 1 || s.SecurityGroupSelectorTerms[0].Tags["karpenter.sh/discovery"] != "demo" {
		t.Errorf("securityGroupSelectorTerms = %+v", s.SecurityGroupSelectorTerms)
	}
	if len(s.BlockDeviceMappings) != 1 {
		t.Fatalf("blockDeviceMappings = %+v", s.BlockDeviceMappings)
	}
	bdm := s.BlockDeviceMappings[0]
	if bdm.DeviceName == nil || *bdm.DeviceName != "/dev/xvda" || !bdm.RootVolume || bdm.EBS == nil {
		t.Fatalf("blockDeviceMappings[0] = %+v", bdm)
	}
	if bdm.EBS.VolumeType == nil || *bdm.EBS.VolumeType != "gp3" {
		t.Errorf("volumeType = %v", bdm.EBS.VolumeType)
	}
	if bdm.EBS.VolumeSize == nil || bdm.EBS.VolumeSize.Cmp(resource.MustParse("20Gi")) != 0 || bdm.EBS.VolumeSize.String() != "20Gi" {
		t.Errorf("volumeSize = %v", bdm.EBS.VolumeSize)
	}
	if bdm.EBS.Encrypted == nil || !*bdm.EBS.Encrypted || bdm.EBS.SnapshotID != nil {
		t.Errorf("encrypted = %v, snapshotID = %v", bdm.EBS.Encrypted, bdm.EBS.SnapshotID)
	}
	mo := s.MetadataOptions
	if mo == nil || mo.HTTPPutResponseHopLimit == nil || *mo.HTTPPutResponseHopLimit != 2 {
		t.Fatalf("metadataOptions = %+v", mo)
	}
	if mo.HTTPTokens == nil || *mo.HTTPTokens != "required" || mo.HTTPEndpoint != nil {
		t.Errorf("metadataOptions tokens/endpoint = %v/%v", mo.HTTPTokens, mo.HTTPEndpoint)
	}
	if s.UserData == nil || *s.UserData != "echo hello\n" {
		t.Errorf("userData = %v", s.UserData)
	}
	if s.AMIFamily != nil || s.Kubelet != nil || len(s.Tags) != 0 {
		t.Errorf("unset fields appeared: amiFamily=%v kubelet=%v tags=%v", s.AMIFamily, s.Kubelet, s.Tags)
	}

	// A deep copy must be equal to, but independent of, the original.
	cp := nc.DeepCopy()
	*cp.Spec.MetadataOptions.HTTPPutResponseHopLimit = 3
	cp.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] = "other"
	if *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 || nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "demo" {
		t.Error("DeepCopy shares memory with the original")
	}
}

func TestSchemeRegistration(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"EC2NodeClass", "EC2NodeClassList"} {
		if !scheme.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognise %s", kind)
		}
	}
}
