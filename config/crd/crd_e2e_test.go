package crd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

const validNodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: base
spec:
  template:
    metadata:
      labels:
        team: platform
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
          minValues: 2
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["2"]
  limits:
    cpu: "1000"
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "10%"
      - nodes: "0"
        schedule: "0 9 * * mon-fri"
        duration: 8h
`

const validEC2NodeClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: base
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
  metadataOptions:
    httpPutResponseHopLimit: 2
  tags:
    team: platform
`

// invalidCase is one object the API server must reject, made by mutating a valid base object.
type invalidCase struct {
	name   string
	base   string
	mutate func(o map[string]any)
	// want is a part of the rule's message as the API server reports it.
	want string
}

func set(path string, value any) func(map[string]any) {
	return func(o map[string]any) {
		if err := unstructured.SetNestedField(o, value, strings.Split(path, ".")...); err != nil {
			panic(fmt.Sprintf("set %s: %v", path, err))
		}
	}
}

func del(path string) func(map[string]any) {
	return func(o map[string]any) { unstructured.RemoveNestedField(o, strings.Split(path, ".")...) }
}

func both(fs ...func(map[string]any)) func(map[string]any) {
	return func(o map[string]any) {
		for _, f := range fs {
			f(o)
		}
	}
}

func requirement(key, op string, values []any, extra ...any) func(map[string]any) {
	r := map[string]any{"key": key, "operator": op}
	if values != nil {
		r["values"] = values
	}
	for i := 0; i+1 < len(extra); i += 2 {
		r[extra[i].(string)] = extra[i+1]
	}
	return set("spec.template.spec.requirements", []any{r})
}

func vals(v ...any) []any { return v }

var invalidCases = []invalidCase{
	// NodePool
	{"budget schedule without duration", validNodePool, set("spec.disruption.budgets", []any{map[string]any{"nodes": "1", "schedule": "@daily"}}), "'schedule' must be set with 'duration'"},
	{"requirement in karpenter.sh domain", validNodePool, requirement("karpenter.sh/custom", "Exists", nil), `label domain "karpenter.sh" is restricted`},
	{"requirement on karpenter.sh/nodepool", validNodePool, requirement("karpenter.sh/nodepool", "In", vals("a")), `label "karpenter.sh/nodepool" is restricted`},
	{"requirement on kubernetes.io/hostname", validNodePool, requirement("kubernetes.io/hostname", "In", vals("a")), `label "kubernetes.io/hostname" is restricted`},
	{"requirement in karpenter.k8s.aws domain", validNodePool, requirement("karpenter.k8s.aws/made-up", "Exists", nil), `label domain "karpenter.k8s.aws" is restricted`},
	{"template label in karpenter.sh domain", validNodePool, set("spec.template.metadata.labels", map[string]any{"karpenter.sh/custom": "x"}), `label domain "karpenter.sh" is restricted`},
	{"template label karpenter.sh/nodepool", validNodePool, set("spec.template.metadata.labels", map[string]any{"karpenter.sh/nodepool": "x"}), `label "karpenter.sh/nodepool" is restricted`},
	{"template label kubernetes.io/hostname", validNodePool, set("spec.template.metadata.labels", map[string]any{"kubernetes.io/hostname": "x"}), `label "kubernetes.io/hostname" is restricted`},
	{"template label in karpenter.k8s.aws domain", validNodePool, set("spec.template.metadata.labels", map[string]any{"karpenter.k8s.aws/made-up": "x"}), `label domain "karpenter.k8s.aws" is restricted`},
	{"nodeClassRef empty group", validNodePool, set("spec.template.spec.nodeClassRef.group", ""), "group may not be empty"},
	{"nodeClassRef empty kind", validNodePool, set("spec.template.spec.nodeClassRef.kind", ""), "kind may not be empty"},
	{"nodeClassRef empty name", validNodePool, set("spec.template.spec.nodeClassRef.name", ""), "name may not be empty"},
	{"In with no values", validNodePool, requirement("node.kubernetes.io/instance-type", "In", vals()), "requirements with operator 'In' must have a value defined"},
	{"Gt with two values", validNodePool, requirement("karpenter.k8s.aws/instance-cpu", "Gt", vals("2", "4")), "must have a single positive integer value"},
	{"Lte with a negative value", validNodePool, requirement("karpenter.k8s.aws/instance-cpu", "Lte", vals("-4")), "must have a single positive integer value"},
	{"minValues above the number of values", validNodePool, requirement("karpenter.k8s.aws/instance-family", "In", vals("m5", "c5"), "minValues", int64(3)), "must have at least that many values specified"},
	{"static pool with cpu limit", validNodePool, both(set("spec.replicas", int64(3)), del("spec.disruption.budgets"), set("spec.disruption.consolidationPolicy", "WhenEmpty")), "only 'limits.nodes' is supported on static NodePools"},
	{"static pool with weight", validNodePool, both(set("spec.replicas", int64(3)), del("spec.limits"), set("spec.weight", int64(10))), "'weight' is not supported on static NodePools"},
	// EC2NodeClass
	{"role and instanceProfile both", validEC2NodeClass, set("spec.instanceProfile", "KarpenterNodeInstanceProfile"), "must specify exactly one of ['role', 'instanceProfile']"},
	{"neither role nor instanceProfile", validEC2NodeClass, del("spec.role"), "must specify exactly one of ['role', 'instanceProfile']"},
	{"empty role", validEC2NodeClass, set("spec.role", ""), "role cannot be empty"},
	{"empty instanceProfile", validEC2NodeClass, both(del("spec.role"), set("spec.instanceProfile", "")), "instanceProfile cannot be empty"},
	{"al2023 alias with AL2 family", validEC2NodeClass, set("spec.amiFamily", "AL2"), "amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
	{"al2 alias with AL2023 family", validEC2NodeClass, both(set("spec.amiSelectorTerms", []any{map[string]any{"alias": "al2@latest"}}), set("spec.amiFamily", "AL2023")), "amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"},
	{"bottlerocket alias with AL2023 family", validEC2NodeClass, both(set("spec.amiSelectorTerms", []any{map[string]any{"alias": "bottlerocket@latest"}}), set("spec.amiFamily", "AL2023")), "amiFamily must be 'Bottlerocket' or 'Custom'"},
	{"no alias and no amiFamily", validEC2NodeClass, set("spec.amiSelectorTerms", []any{map[string]any{"id": "ami-0123456789abcdef0"}}), "must specify amiFamily if amiSelectorTerms does not contain an alias"},
	{"empty AMI selector term", validEC2NodeClass, both(set("spec.amiFamily", "AL2023"), set("spec.amiSelectorTerms", []any{map[string]any{}})), "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
	{"AMI id with tags", validEC2NodeClass, both(set("spec.amiFamily", "AL2023"), set("spec.amiSelectorTerms", []any{map[string]any{"id": "ami-0123456789abcdef0", "tags": map[string]any{"a": "b"}}})), "'id' is mutually exclusive"},
	{"alias with tags", validEC2NodeClass, set("spec.amiSelectorTerms", []any{map[string]any{"alias": "al2023@latest", "tags": map[string]any{"a": "b"}}}), "'alias' is mutually exclusive, cannot be set with a combination of other fields"},
	{"alias with a second term", validEC2NodeClass, set("spec.amiSelectorTerms", []any{map[string]any{"alias": "al2023@latest"}, map[string]any{"name": "my-ami"}}), "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
	{"alias without version", validEC2NodeClass, set("spec.amiSelectorTerms", []any{map[string]any{"alias": "al2023"}}), "'alias' is improperly formatted"},
	{"alias with unknown family", validEC2NodeClass, set("spec.amiSelectorTerms", []any{map[string]any{"alias": "ubuntu@latest"}}), "family is not supported"},
	{"windows alias pinned to a version", validEC2NodeClass, set("spec.amiSelectorTerms", []any{map[string]any{"alias": "windows2022@v20240101"}}), "windows families may only specify version 'latest'"},
	{"AMI tag with empty value", validEC2NodeClass, both(set("spec.amiFamily", "AL2023"), set("spec.amiSelectorTerms", []any{map[string]any{"tags": map[string]any{"k": ""}}})), "empty tag keys or values aren't supported"},
	{"two root volumes", validEC2NodeClass, set("spec.blockDeviceMappings", []any{
		map[string]any{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": map[string]any{"volumeSize": "20Gi"}},
		map[string]any{"deviceName": "/dev/xvdb", "rootVolume": true, "ebs": map[string]any{"volumeSize": "20Gi"}},
	}), "must have only one blockDeviceMappings with rootVolume"},
	{"EBS without snapshot or size", validEC2NodeClass, set("spec.blockDeviceMappings", []any{map[string]any{"deviceName": "/dev/xvda", "ebs": map[string]any{"volumeType": "gp3"}}}), "snapshotID or volumeSize must be defined"},
	{"initialization rate without snapshot", validEC2NodeClass, set("spec.blockDeviceMappings", []any{map[string]any{"deviceName": "/dev/xvda", "ebs": map[string]any{"volumeSize": "20Gi", "volumeInitializationRate": int64(200)}}}), "snapshotID must be set when volumeInitializationRate is set"},
	{"empty capacity reservation term", validEC2NodeClass, set("spec.capacityReservationSelectorTerms", []any{map[string]any{}}), "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
	{"capacity reservation id with tags", validEC2NodeClass, set("spec.capacityReservationSelectorTerms", []any{map[string]any{"id": "cr-0123456789abcdef0", "tags": map[string]any{"a": "b"}}}), "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
	{"empty connection tracking", validEC2NodeClass, set("spec.connectionTracking", map[string]any{}), "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
	{"image GC high not above low", validEC2NodeClass, set("spec.kubelet", map[string]any{"imageGCHighThresholdPercent": int64(50), "imageGCLowThresholdPercent": int64(60)}), "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
	{"evictionSoft without grace period", validEC2NodeClass, set("spec.kubelet", map[string]any{"evictionSoft": map[string]any{"memory.available": "5%"}}), "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
	{"grace period without evictionSoft", validEC2NodeClass, set("spec.kubelet", map[string]any{"evictionSoftGracePeriod": map[string]any{"memory.available": "1m"}}), "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"},
	{"evictionHard unknown signal", validEC2NodeClass, set("spec.kubelet", map[string]any{"evictionHard": map[string]any{"cpu.available": "5%"}}), "valid keys for evictionHard are"},
	{"kubeReserved unknown resource", validEC2NodeClass, set("spec.kubelet", map[string]any{"kubeReserved": map[string]any{"gpu": "1"}}), "valid keys for kubeReserved are"},
	{"systemReserved unknown resource", validEC2NodeClass, set("spec.kubelet", map[string]any{"systemReserved": map[string]any{"disk": "1Gi"}}), "valid keys for systemReserved are"},
	{"no primary network interface", validEC2NodeClass, set("spec.networkInterfaces", []any{map[string]any{"networkCardIndex": int64(0), "deviceIndex": int64(1), "interfaceType": "efa-only"}}), "networkInterfaces must include a primary interface"},
	{"empty placement group selector", validEC2NodeClass, set("spec.placementGroupSelector", map[string]any{}), "expected at least one, got none, ['name', 'id']"},
	{"placement group name and id", validEC2NodeClass, set("spec.placementGroupSelector", map[string]any{"name": "pg", "id": "pg-0123456789abcdef0"}), "'name' and 'id' are mutually exclusive"},
	{"no security group terms", validEC2NodeClass, set("spec.securityGroupSelectorTerms", []any{}), "securityGroupSelectorTerms cannot be empty"},
	{"empty security group term", validEC2NodeClass, set("spec.securityGroupSelectorTerms", []any{map[string]any{}}), "expected at least one, got none, ['tags', 'id', 'name']"},
	{"security group id with tags", validEC2NodeClass, set("spec.securityGroupSelectorTerms", []any{map[string]any{"id": "sg-0123456789abcdef0", "tags": map[string]any{"a": "b"}}}), "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
	{"security group name with tags", validEC2NodeClass, set("spec.securityGroupSelectorTerms", []any{map[string]any{"name": "nodes", "tags": map[string]any{"a": "b"}}}), "'name' is mutually exclusive"},
	{"security group tag with empty value", validEC2NodeClass, set("spec.securityGroupSelectorTerms", []any{map[string]any{"tags": map[string]any{"a": ""}}}), "empty tag keys or values aren't supported"},
	{"no subnet terms", validEC2NodeClass, set("spec.subnetSelectorTerms", []any{}), "subnetSelectorTerms cannot be empty"},
	{"empty subnet term", validEC2NodeClass, set("spec.subnetSelectorTerms", []any{map[string]any{}}), "expected at least one, got none, ['tags', 'id']"},
	{"subnet id with tags", validEC2NodeClass, set("spec.subnetSelectorTerms", []any{map[string]any{"id": "subnet-0123456789abcdef0", "tags": map[string]any{"a": "b"}}}), "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
	{"subnet tag with empty value", validEC2NodeClass, set("spec.subnetSelectorTerms", []any{map[string]any{"tags": map[string]any{"a": ""}}}), "empty tag keys or values aren't supported"},
	{"tag eks:eks-cluster-name", validEC2NodeClass, set("spec.tags", map[string]any{"eks:eks-cluster-name": "x"}), "tag contains a restricted tag matching eks:eks-cluster-name"},
	{"tag kubernetes.io/cluster/", validEC2NodeClass, set("spec.tags", map[string]any{"kubernetes.io/cluster/demo": "owned"}), "tag contains a restricted tag matching kubernetes.io/cluster/"},
	{"tag karpenter.sh/nodepool", validEC2NodeClass, set("spec.tags", map[string]any{"karpenter.sh/nodepool": "x"}), "tag contains a restricted tag matching karpenter.sh/nodepool"},
	{"tag karpenter.sh/nodeclaim", validEC2NodeClass, set("spec.tags", map[string]any{"karpenter.sh/nodeclaim": "x"}), "tag contains a restricted tag matching karpenter.sh/nodeclaim"},
	{"tag karpenter.k8s.aws/ec2nodeclass", validEC2NodeClass, set("spec.tags", map[string]any{"karpenter.k8s.aws/ec2nodeclass": "x"}), "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"},
	{"empty tag key", validEC2NodeClass, set("spec.tags", map[string]any{"": "x"}), "empty tag keys aren't supported"},
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	o := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: o}
}

// TestCRDsRejectWhatKarpenterRejects sends each invalid object to the real API server (server-side
// dry run, so nothing is stored) and expects the CEL rule's message back. The valid base objects
// go first: if they were rejected, every case below would pass for the wrong reason.
func TestCRDsRejectWhatKarpenterRejects(t *testing.T) {
	c, err := localenvtest.Env(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, base := range []string{validNodePool, validEC2NodeClass} {
		obj := decode(t, base)
		if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Fatalf("valid %s rejected: %v", obj.GetKind(), err)
		}
	}
	if len(invalidCases) < 25 {
		t.Fatalf("only %d invalid cases", len(invalidCases))
	}
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.base)
			tc.mutate(obj.Object)
			err := c.Create(ctx, obj, client.DryRunAll)
			if err == nil {
				t.Fatalf("accepted; want rejection with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("rejected with\n  %v\nwant a message containing\n  %q", err, tc.want)
			}
		})
	}
}

// TestExamplesAreAccepted dry-runs every karpenter.sh/v1 and karpenter.k8s.aws/v1 manifest under
// examples/ (the workshop pools and the v1 seed), as a user would `kubectl apply` them.
func TestExamplesAreAccepted(t *testing.T) {
	c, err := localenvtest.Env(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	files, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../examples/seeds/*/*.yaml")
	checked := 0
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---") {
			obj := decode(t, doc)
			if av := obj.GetAPIVersion(); av != "karpenter.sh/v1" && av != "karpenter.k8s.aws/v1" {
				continue
			}
			checked++
			if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
				t.Errorf("%s document %d (%s %s) rejected: %v", f, i+1, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("checked only %d v1 manifests under examples/; the globs have gone stale", checked)
	}
}

// TestCRDsRejectImmutableChanges covers the rules that compare an update with the stored object.
func TestCRDsRejectImmutableChanges(t *testing.T) {
	c, err := localenvtest.Env(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stored := decode(t, validNodePool)
	stored.SetName("immutable")
	if err := c.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), stored) })
	cases := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"nodeClassRef group", set("spec.template.spec.nodeClassRef.group", "example.com"), "nodeClassRef.group is immutable"},
		{"nodeClassRef kind", set("spec.template.spec.nodeClassRef.kind", "OtherNodeClass"), "nodeClassRef.kind is immutable"},
		{"dynamic to static", both(set("spec.replicas", int64(2)), del("spec.limits")), "Cannot transition NodePool between static (replicas set) and dynamic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := stored.DeepCopy()
			tc.mutate(obj.Object)
			err := c.Update(ctx, obj, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The same update with an unchanged nodeClassRef is accepted, so the rejections above are
	// about the field, not about updates in general.
	ok := stored.DeepCopy()
	ok.SetLabels(map[string]string{"touched": "yes"})
	if err := c.Update(ctx, ok, client.DryRunAll); err != nil {
		t.Fatalf("harmless update rejected: %v", err)
	}
}
