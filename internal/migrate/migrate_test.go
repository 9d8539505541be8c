package migrate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// provisioner is a minimal valid v1alpha5 Provisioner with an inline provider; extra spec lines
// are inserted after "spec:" (line 5), so they start at line 6.
func provisioner(extra string) string {
	return `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: p
spec:
` + extra + `  provider:
    instanceProfile: NodeProfile
    subnetSelector:
      karpenter.sh/discovery: c1
    securityGroupSelector:
      karpenter.sh/discovery: c1
`
}

func TestProvisionerTTLs(t *testing.T) {
	out, diags := migrateString(t, provisioner(`  ttlSecondsUntilExpired: 2592000 # 30 days
  ttlSecondsAfterEmpty: 300
`))
	np := find(t, docs(t, []byte(out)), "NodePool", "p")
	wantField(t, np, "spec.template.spec.expireAfter", "720h")
	wantField(t, np, "spec.disruption", map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"})
	if !strings.Contains(out, "expireAfter: 720h # 30 days") {
		t.Errorf("line comment of ttlSecondsUntilExpired lost:\n%s", out)
	}
	for _, d := range diags {
		if strings.Contains(d.Message, "expireAfter: Never") || strings.Contains(d.Message, "consolidateAfter: Never") {
			t.Errorf("unexpected warning %s", d)
		}
	}
}

func TestProvisionerConsolidationEnabled(t *testing.T) {
	out, _ := migrateString(t, provisioner(`  consolidation:
    enabled: true
`))
	np := find(t, docs(t, []byte(out)), "NodePool", "p")
	wantField(t, np, "spec.disruption", map[string]any{"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
}

func TestProvisionerWithoutScaleDownNeverConsolidates(t *testing.T) {
	out, diags := migrateString(t, provisioner(`  consolidation:
    enabled: false
`))
	np := find(t, docs(t, []byte(out)), "NodePool", "p")
	wantField(t, np, "spec.disruption", map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
	wantField(t, np, "spec.template.spec.expireAfter", "Never")
	wantDiag(t, diags, SeverityWarning, "in.yaml", 6, "neither ttlSecondsAfterEmpty nor consolidation", "consolidateAfter: Never")
	wantDiag(t, diags, SeverityWarning, "in.yaml", 5, "no ttlSecondsUntilExpired", "expireAfter: Never")
}

func TestProvisionerTTLAndConsolidationIsAnError(t *testing.T) {
	src := provisioner(`  ttlSecondsAfterEmpty: 30
  consolidation:
    enabled: true
`)
	r := Files([]Input{{Name: "in.yaml", Data: []byte(src)}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 6, "both ttlSecondsAfterEmpty and consolidation.enabled")
	if r.Outputs[0].Changed || string(r.Outputs[0].Data) != src {
		t.Errorf("a failed document must be left unchanged")
	}
}

func TestProvisionerTemplateFields(t *testing.T) {
	out, diags := migrateString(t, provisioner(`  labels:
    team: a
  annotations:
    karpenter.sh/do-not-evict: "true"
    example.com/owner: a
  taints:
    - key: dedicated
      value: a
      effect: NoSchedule
  startupTaints:
    - key: agent-not-ready
      effect: NoExecute
  weight: 20
  limits:
    # caps
    resources:
      cpu: "64"
      memory: 256Gi
`))
	np := find(t, docs(t, []byte(out)), "NodePool", "p")
	wantField(t, np, "spec.template.metadata.labels", map[string]any{"team": "a"})
	wantField(t, np, "spec.template.metadata.annotations", map[string]any{"karpenter.sh/do-not-disrupt": "true", "example.com/owner": "a"})
	wantField(t, np, "spec.template.spec.taints", []any{map[string]any{"key": "dedicated", "value": "a", "effect": "NoSchedule"}})
	wantField(t, np, "spec.template.spec.startupTaints", []any{map[string]any{"key": "agent-not-ready", "effect": "NoExecute"}})
	wantField(t, np, "spec.weight", 20)
	wantField(t, np, "spec.limits", map[string]any{"cpu": "64", "memory": "256Gi"})
	wantDiag(t, diags, SeverityWarning, "in.yaml", 9, "do-not-evict renamed to karpenter.sh/do-not-disrupt")
	if !strings.Contains(out, "# caps\n  limits:") {
		t.Errorf("head comment of limits lost:\n%s", out)
	}
	// Order inside the new spec: template, disruption, limits, weight.
	if !(strings.Index(out, "template:") < strings.Index(out, "disruption:") &&
		strings.Index(out, "disruption:") < strings.Index(out, "limits:") &&
		strings.Index(out, "limits:") < strings.Index(out, "weight:")) {
		t.Errorf("unexpected spec order:\n%s", out)
	}
}

func TestProvisionerWebhookDefaultsRespectLabelsAndRequirements(t *testing.T) {
	out, diags := migrateString(t, provisioner(`  labels:
    kubernetes.io/arch: arm64
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [m7g]
    - key: karpenter.sh/capacity-type
      operator: In
      values: [spot]
`))
	np := find(t, docs(t, []byte(out)), "NodePool", "p")
	reqs := field(np, "spec.template.spec.requirements").([]any)
	var keys []string
	for _, r := range reqs {
		keys = append(keys, field(r, "key").(string))
	}
	// arch comes from a label, capacity type and family from requirements: only os and
	// (no instance type given) nothing else; family blocks both category and generation.
	if got := strings.Join(keys, ","); got != "karpenter.k8s.aws/instance-family,karpenter.sh/capacity-type,kubernetes.io/os" {
		t.Errorf("requirement keys %s", got)
	}
	wantDiag(t, diags, SeverityWarning, "in.yaml", 8, "webhook", "kubernetes.io/os In [linux]")
}

func TestProvisionerWithLabelsOnlyGetsEmptyRequirements(t *testing.T) {
	out, diags := migrateString(t, provisioner(`  labels:
    karpenter.sh/capacity-type: on-demand
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: m5.large
`))
	np := find(t, docs(t, []byte(out)), "NodePool", "p")
	wantField(t, np, "spec.template.spec.requirements", []any{})
	for _, d := range diags {
		if strings.Contains(d.Message, "webhook") {
			t.Errorf("unexpected %s", d)
		}
	}
}

func TestProvisionerRequirementKeys(t *testing.T) {
	// provisioner-name is dropped with a warning.
	out, diags := migrateString(t, provisioner(`  requirements:
    - key: karpenter.sh/provisioner-name
      operator: In
      values: [p]
`))
	wantDiag(t, diags, SeverityWarning, "in.yaml", 7, "karpenter.sh/provisioner-name removed")
	if strings.Contains(out, "provisioner-name") {
		t.Errorf("provisioner-name requirement kept:\n%s", out)
	}
	// Labels v1 does not know are errors.
	r := Files([]Input{{Name: "in.yaml", Data: []byte(provisioner(`  requirements:
    - key: karpenter.k8s.aws/instance-pods
      operator: Gt
      values: ["20"]
`))}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 7, "karpenter.k8s.aws/instance-pods", "no such karpenter.k8s.aws label")
}

func TestProvisionerNeedsAProvider(t *testing.T) {
	src := `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: bare
spec:
  ttlSecondsAfterEmpty: 30
`
	r := Files([]Input{{Name: "in.yaml", Data: []byte(src)}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 5, "neither provider nor providerRef")
}

func TestStrictDecodingNamesTheLine(t *testing.T) {
	r := Files([]Input{{Name: "in.yaml", Data: []byte(provisioner(`  ttlSecondsAfterEmty: 30
`))}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 6, `unknown field "spec.ttlSecondsAfterEmty"`)
	r = Files([]Input{{Name: "in.yaml", Data: []byte(provisioner(`  weight: heavy
`))}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 6, "spec.weight", "int32")
	// An unknown key inside the inline provider.
	r = Files([]Input{{Name: "in.yaml", Data: []byte(strings.Replace(provisioner(""), "    instanceProfile: NodeProfile\n", "    userData: x\n", 1))}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 7, `unknown field "userData"`, "AWSNodeTemplate")
}

func TestInlineProviderDetails(t *testing.T) {
	path := filepath.Join("testdata", "v1alpha5-inline.yaml")
	r := migrateFiles(t, readFile(t, path))
	out := docs(t, r.Outputs[0].Data)
	nc := find(t, out, "EC2NodeClass", "bottlerocket")
	wantField(t, nc, "spec.amiSelectorTerms", []any{map[string]any{"alias": "bottlerocket@latest"}})
	wantField(t, nc, "spec.amiFamily", nil)
	wantField(t, nc, "spec.instanceProfile", "KarpenterNodeInstanceProfile")
	wantField(t, nc, "spec.role", nil)
	wantField(t, nc, "spec.subnetSelectorTerms", []any{map[string]any{"tags": map[string]any{"Name": "private-*", "karpenter.sh/discovery": "*"}}})
	wantField(t, nc, "spec.securityGroupSelectorTerms", []any{map[string]any{"id": "sg-0123456789abcdef0"}})
	wantField(t, nc, "spec.metadataOptions", map[string]any{"httpTokens": "optional", "httpPutResponseHopLimit": 2})
	wantField(t, nc, "spec.blockDeviceMappings[0].ebs.volumeSize", "50Gi")
	np := find(t, out, "NodePool", "bottlerocket")
	wantField(t, np, "spec.disruption.consolidateAfter", "0s")
	d := r.Diagnostics
	wantDiag(t, d, SeverityWarning, path, 10, "provisioner-name removed")
	wantDiag(t, d, SeverityWarning, path, 17, "empty value", `"*"`)
	wantDiag(t, d, SeverityWarning, path, 20, "httpPutResponseHopLimit: 2 written out")
	wantDiag(t, d, SeverityWarning, path, 25, "volumeSize", "50Gi")
	// The file used compact sequences ("- " under the key): the output does too.
	if !strings.Contains(string(r.Outputs[0].Data), "\n      requirements:\n      - key:") {
		t.Errorf("sequence indentation style not kept:\n%s", r.Outputs[0].Data)
	}
}

func TestAWSNodeTemplateAndSharedKubelet(t *testing.T) {
	path := filepath.Join("testdata", "v1alpha5-template.yaml")
	r := migrateFiles(t, readFile(t, path))
	out := docs(t, r.Outputs[0].Data)
	if len(out) != 4 {
		t.Fatalf("want 2 NodePools and 2 EC2NodeClasses, got %d documents", len(out))
	}
	web := find(t, out, "NodePool", "web")
	wantField(t, web, "spec.template.spec.nodeClassRef", map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
	wantField(t, web, "spec.disruption.consolidationPolicy", "WhenEmptyOrUnderutilized")
	wantField(t, web, "spec.template.spec.kubelet", nil)
	batch := find(t, out, "NodePool", "batch")
	wantField(t, batch, "spec.template.spec.nodeClassRef.name", "default-batch")
	wantField(t, batch, "spec.template.spec.expireAfter", "720h")
	wantField(t, batch, "spec.disruption", map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"})

	def := find(t, out, "EC2NodeClass", "default")
	wantField(t, def, "spec.kubelet", map[string]any{"maxPods": 58, "systemReserved": map[string]any{"cpu": "1", "memory": "1Gi"}})
	wantField(t, def, "spec.subnetSelectorTerms", []any{map[string]any{"id": "subnet-0a1b2c3d"}, map[string]any{"id": "subnet-0e0f0a0b"}})
	wantField(t, def, "spec.amiFamily", "AL2")
	wantField(t, def, "spec.amiSelectorTerms", []any{
		map[string]any{"name": "amazon-eks-node-1.29-*", "owner": "amazon"},
		map[string]any{"name": "amazon-eks-node-1.29-*", "owner": "123456789012"},
	})
	wantField(t, def, "spec.userData", "#!/bin/bash\necho hello\n")
	wantField(t, def, "spec.detailedMonitoring", true)
	wantField(t, def, "spec.tags", map[string]any{"team": "platform"})
	wantField(t, def, "spec.instanceProfile", "KarpenterNodeInstanceProfile-my-cluster")
	split := find(t, out, "EC2NodeClass", "default-batch")
	wantField(t, split, "spec.kubelet", map[string]any{"maxPods": 110})
	wantField(t, split, "spec.subnetSelectorTerms", field(def, "spec.subnetSelectorTerms"))

	d := r.Diagnostics
	wantDiag(t, d, SeverityWarning, path, 19, `kubelet settings moved to EC2NodeClass "default"`)
	wantDiag(t, d, SeverityWarning, path, 20, "containerRuntime dropped", "dockerd")
	wantDiag(t, d, SeverityWarning, path, 43, "different kubelet settings", `"default-batch"`)
	wantDiag(t, d, SeverityWarning, path, 54, "split", "default-batch (for batch)")
	wantDiag(t, d, SeverityWarning, path, 55, "amiFamily: AL2 written out")
	wantDiag(t, d, SeverityWarning, path, 69, "kubernetes.io/cluster/my-cluster", "removed")
	if !strings.Contains(string(r.Outputs[0].Data), "# Replace nodes every 30 days.\n      expireAfter: 720h") {
		t.Errorf("head comment of ttlSecondsUntilExpired lost:\n%s", r.Outputs[0].Data)
	}
}

// The kubelet block of a pool moves into a class defined in another file.
func TestKubeletMovesAcrossFiles(t *testing.T) {
	pools := `apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: a
spec:
  template:
    spec:
      requirements: []
      nodeClassRef:
        name: cls
      kubelet:
        maxPods: 30 # keep
`
	class := `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: cls
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: R
  subnetSelectorTerms:
    - tags: {a: b}
  securityGroupSelectorTerms:
    - tags: {a: b}
`
	r := migrateFiles(t, Input{Name: "pools.yaml", Data: []byte(pools)}, Input{Name: "classes.yaml", Data: []byte(class)})
	if !r.Outputs[1].Changed {
		t.Fatal("the v1 class was not given the kubelet block")
	}
	nc := find(t, docs(t, r.Outputs[1].Data), "EC2NodeClass", "cls")
	wantField(t, nc, "spec.kubelet", map[string]any{"maxPods": 30})
	if !strings.Contains(string(r.Outputs[1].Data), "maxPods: 30 # keep") {
		t.Errorf("comment of the moved kubelet block lost:\n%s", r.Outputs[1].Data)
	}
	wantDiag(t, r.Diagnostics, SeverityWarning, "pools.yaml", 11, `moved to EC2NodeClass "cls"`)

	// Without the class file, the kubelet block has nowhere to go: an error.
	r = Files([]Input{{Name: "pools.yaml", Data: []byte(pools)}})
	wantDiag(t, r.Diagnostics, SeverityError, "pools.yaml", 11, `EC2NodeClass "cls"`, "not among the files")
}

func TestV1beta1KubeletSplit(t *testing.T) {
	path := filepath.Join("testdata", "v1beta1-kubelet.yaml")
	r := migrateFiles(t, readFile(t, path))
	out := docs(t, r.Outputs[0].Data)
	general := find(t, out, "NodePool", "general")
	wantField(t, general, "spec.template.spec.nodeClassRef", map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "shared"})
	wantField(t, general, "spec.template.spec.expireAfter", "Never")
	wantField(t, general, "spec.template.spec.requirements[0].minValues", 2)
	wantField(t, general, "spec.disruption", map[string]any{
		"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
		"budgets": []any{map[string]any{"nodes": "20%"}, map[string]any{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}},
	})
	gpu := find(t, out, "NodePool", "gpu")
	wantField(t, gpu, "spec.template.spec.nodeClassRef", map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "shared-gpu"})
	wantField(t, gpu, "spec.disruption", nil) // v1beta1 defaults equal v1 defaults
	shared := find(t, out, "EC2NodeClass", "shared")
	wantField(t, shared, "spec.kubelet", map[string]any{"maxPods": 50, "evictionHard": map[string]any{"memory.available": "5%"}})
	wantField(t, shared, "spec.amiSelectorTerms", []any{map[string]any{"alias": "al2023@latest"}})
	wantField(t, shared, "spec.amiFamily", nil)
	wantField(t, shared, "spec.metadataOptions", map[string]any{"httpTokens": "required", "httpPutResponseHopLimit": 1})
	copyCls := find(t, out, "EC2NodeClass", "shared-gpu")
	wantField(t, copyCls, "spec.kubelet", map[string]any{"maxPods": 20})
	wantField(t, copyCls, "spec.blockDeviceMappings", field(shared, "spec.blockDeviceMappings"))
	if !strings.Contains(string(r.Outputs[0].Data), "amiSelectorTerms: # newest AL2023 EKS AMI") {
		t.Errorf("comment of amiFamily not carried to the alias:\n%s", r.Outputs[0].Data)
	}
	wantDiag(t, r.Diagnostics, SeverityWarning, path, 18, `moved to EC2NodeClass "shared"`)
	wantDiag(t, r.Diagnostics, SeverityWarning, path, 50, "split", `"shared-gpu"`)
	wantDiag(t, r.Diagnostics, SeverityWarning, path, 57, "split", "stays with general")
	// An explicit hop limit is kept and not reported.
	for _, d := range r.Diagnostics {
		if strings.Contains(d.Message, "HopLimit") {
			t.Errorf("unexpected %s", d)
		}
	}
}

func TestV1beta1Disruption(t *testing.T) {
	pool := func(disruption string) string {
		return `apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: np
spec:
  template:
    spec:
      requirements: []
      nodeClassRef:
        name: x
` + disruption
	}
	cases := []struct {
		name, in string
		want     map[string]any
		expire   any
	}{
		{"expire only", "  disruption:\n    expireAfter: 24h\n", map[string]any{"consolidateAfter": "0s"}, "24h"},
		{"underutilized", "  disruption:\n    consolidationPolicy: WhenUnderutilized\n", map[string]any{"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}, nil},
		{"empty", "  disruption:\n    consolidationPolicy: WhenEmpty\n    consolidateAfter: Never\n", map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _ := migrateString(t, pool(c.in))
			np := find(t, docs(t, []byte(out)), "NodePool", "np")
			wantField(t, np, "spec.disruption", c.want)
			wantField(t, np, "spec.template.spec.expireAfter", c.expire)
		})
	}
}

func TestV1beta1EC2NodeClassRules(t *testing.T) {
	class := func(spec string) string {
		return `apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: c
spec:
  role: R
  subnetSelectorTerms:
    - tags: {a: b}
  securityGroupSelectorTerms:
    - tags: {a: b}
` + spec
	}
	// Ubuntu is gone: an error at the amiFamily line, and the document is left alone.
	src := class("  amiFamily: Ubuntu\n")
	r := Files([]Input{{Name: "in.yaml", Data: []byte(src)}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 11, "Ubuntu no longer exists")
	if string(r.Outputs[0].Data) != src {
		t.Error("failed document changed")
	}
	// Bottlerocket without AMI terms: alias.
	out, _ := migrateString(t, class("  amiFamily: Bottlerocket\n"))
	nc := find(t, docs(t, []byte(out)), "EC2NodeClass", "c")
	wantField(t, nc, "spec.amiSelectorTerms", []any{map[string]any{"alias": "bottlerocket@latest"}})
	wantField(t, nc, "spec.metadataOptions.httpPutResponseHopLimit", 2)
	// Partial metadata options get the hop limit added, nothing else.
	out, diags := migrateString(t, class("  amiFamily: AL2023\n  metadataOptions:\n    httpTokens: optional\n"))
	nc = find(t, docs(t, []byte(out)), "EC2NodeClass", "c")
	wantField(t, nc, "spec.metadataOptions", map[string]any{"httpTokens": "optional", "httpPutResponseHopLimit": 2})
	wantDiag(t, diags, SeverityWarning, "in.yaml", 12, "httpPutResponseHopLimit: 2 written out", "v1beta1")
	// Custom without AMI terms cannot be expressed.
	r = Files([]Input{{Name: "in.yaml", Data: []byte(class("  amiFamily: Custom\n"))}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 11, "Custom needs amiSelectorTerms")
}

func TestV1alpha5UbuntuAndLaunchTemplateAreErrors(t *testing.T) {
	src := strings.Replace(provisioner(""), "    instanceProfile: NodeProfile\n", "    amiFamily: Ubuntu\n    launchTemplate: my-template\n", 1)
	r := Files([]Input{{Name: "in.yaml", Data: []byte(src)}})
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 7, "Ubuntu no longer exists")
	wantDiag(t, r.Diagnostics, SeverityError, "in.yaml", 8, "launchTemplate", "cannot be migrated")
	if r.Outputs[0].Changed {
		t.Error("failed document changed")
	}
}

func TestWorkloadReferences(t *testing.T) {
	path := filepath.Join("testdata", "workloads.yaml")
	in := readFile(t, path)
	r := migrateFiles(t, in)
	out := docs(t, r.Outputs[0].Data)
	dep := find(t, out, "Deployment", "api")
	wantField(t, dep, "spec.template.metadata.annotations", map[string]any{"karpenter.sh/do-not-disrupt": "true"})
	wantField(t, dep, "spec.template.spec.nodeSelector", map[string]any{"karpenter.sh/nodepool": "web"})
	wantDiag(t, r.Diagnostics, SeverityWarning, path, 14, "do-not-evict renamed")
	wantDiag(t, r.Diagnostics, SeverityWarning, path, 17, "provisioner-name renamed to karpenter.sh/nodepool")
	// The untouched ConfigMap is copied byte for byte.
	cm := in.Data[bytes.Index(in.Data, []byte("---\napiVersion: v1\nkind: ConfigMap")):]
	if !bytes.HasSuffix(r.Outputs[0].Data, cm) {
		t.Errorf("ConfigMap not copied verbatim:\n%s", r.Outputs[0].Data)
	}
}

func TestPassThroughKeepsBytes(t *testing.T) {
	src := "# a file\n\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: x   # odd   spacing\n\n\n---\n---\n# only a comment\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: y}\nspec: {template: {spec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: z}}}}\n"
	r := migrateFiles(t, Input{Name: "in.yaml", Data: []byte(src)})
	if r.Outputs[0].Changed || string(r.Outputs[0].Data) != src {
		t.Errorf("pass-through changed the file:\n%s", r.Outputs[0].Data)
	}
}

func TestLineNumbersInMultiDocumentFiles(t *testing.T) {
	src := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n" + provisioner("")
	// The provisioner starts at line 6, so its spec is at line 10.
	_, diags := migrateString(t, src)
	wantDiag(t, diags, SeverityWarning, "in.yaml", 10, "expireAfter: Never")
	// A parse error in the third document names its line.
	bad := "a: 1\n---\nb: 2\n---\nc: [1,\n"
	r := Files([]Input{{Name: "bad.yaml", Data: []byte(bad)}})
	if errs := errorsOf(r.Diagnostics); len(errs) != 1 || errs[0].Line < 5 {
		t.Errorf("want one parse error at line 5 or later, got %v", r.Diagnostics)
	}
}

func TestUnsupportedInputs(t *testing.T) {
	cases := []struct {
		name, src, want string
		line            int
	}{
		{"alias", provisioner("  labels: &l\n    a: b\n  annotations: *l\n"), "anchors, aliases", 0},
		{"machine", "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata:\n  name: m\n", "Machine", 2},
		{"old version", "apiVersion: karpenter.sh/v1alpha4\nkind: Provisioner\nmetadata:\n  name: m\n", "cannot be migrated", 1},
		{"list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: karpenter.sh/v1alpha5\n  kind: Provisioner\n", "separate documents", 4},
		{"providerRef kind", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n  providerRef:\n    kind: Other\n    name: x\n", "not AWSNodeTemplate", 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Files([]Input{{Name: "in.yaml", Data: []byte(c.src)}})
			errs := errorsOf(r.Diagnostics)
			if len(errs) == 0 {
				t.Fatalf("no error; diagnostics %v", r.Diagnostics)
			}
			if c.want != "" && !strings.Contains(errs[0].Message, c.want) {
				t.Errorf("error %q lacks %q", errs[0].Message, c.want)
			}
			if c.line > 0 && errs[0].Line != c.line {
				t.Errorf("error at line %d, want %d", errs[0].Line, c.line)
			}
			if r.Outputs[0].Changed {
				t.Errorf("output changed despite the error")
			}
		})
	}
}

func TestLiveObjectDump(t *testing.T) {
	src := `apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: c
  uid: 0b9d6a2e-0000-0000-0000-000000000000
  resourceVersion: "42"
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{}'
spec:
  amiFamily: AL2023
  role: R
  subnetSelectorTerms:
    - tags: {a: b}
  securityGroupSelectorTerms:
    - tags: {a: b}
status:
  subnets: []
`
	out, diags := migrateString(t, src)
	nc := find(t, docs(t, []byte(out)), "EC2NodeClass", "c")
	wantField(t, nc, "metadata", map[string]any{"name": "c"})
	wantField(t, nc, "status", nil)
	wantDiag(t, diags, SeverityWarning, "in.yaml", 5, "live object", "status", "metadata.uid")
}

func TestVolumeSizes(t *testing.T) {
	src := strings.Replace(provisioner(""), "    instanceProfile: NodeProfile\n", `    instanceProfile: NodeProfile
    blockDeviceMappings:
      - deviceName: /dev/xvda
        ebs: {volumeSize: 20Gi}
      - deviceName: /dev/xvdb
        ebs: {volumeSize: 100}
      - deviceName: /dev/xvdc
        ebs: {volumeSize: 500M}
`, 1)
	out, diags := migrateString(t, src)
	nc := find(t, docs(t, []byte(out)), "EC2NodeClass", "p")
	wantField(t, nc, "spec.blockDeviceMappings[0].ebs.volumeSize", "20Gi")
	wantField(t, nc, "spec.blockDeviceMappings[1].ebs.volumeSize", "1Gi")
	wantField(t, nc, "spec.blockDeviceMappings[2].ebs.volumeSize", "1Gi")
	wantDiag(t, diags, SeverityWarning, "in.yaml", 12, "not a whole number of GiB", "1Gi")
}

func TestNameClashGetsASuffix(t *testing.T) {
	src := provisioner("") + `---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: p
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: R
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
`
	out, diags := migrateString(t, src)
	ds := docs(t, []byte(out))
	find(t, ds, "EC2NodeClass", "p-2")
	wantField(t, find(t, ds, "NodePool", "p"), "spec.template.spec.nodeClassRef.name", "p-2")
	wantDiag(t, diags, SeverityWarning, "in.yaml", 6, `named "p-2"`)
}

func TestBytesReturnsErrors(t *testing.T) {
	_, _, err := Bytes("x.yaml", []byte("apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: m}\n"))
	if err == nil || !strings.Contains(err.Error(), "x.yaml:2: error:") {
		t.Errorf("error %v", err)
	}
	out, diags, err := Bytes("y.yaml", []byte("a: 1\n"))
	if err != nil || len(diags) != 0 || string(out) != "a: 1\n" {
		t.Errorf("plain file: %q %v %v", out, diags, err)
	}
}
