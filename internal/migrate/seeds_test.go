package migrate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// Seed 000: two v1alpha5 Provisioners with inline providers, next to two Deployments.
func TestSeed000SpotDedicated(t *testing.T) {
	dir := filepath.Join(seedDir, "000-spot-dedicated")
	p1 := filepath.Join(dir, "karpenter-provisioner1.yaml")
	p2 := filepath.Join(dir, "karpenter-provisioner2.yaml")
	i1 := filepath.Join(dir, "karpenter-inflate1.yaml")
	i2 := filepath.Join(dir, "karpenter-inflate2.yaml")
	ins := []Input{readFile(t, p1), readFile(t, i1), readFile(t, p2), readFile(t, i2)}
	r := migrateFiles(t, ins...)

	// The Deployments are not touched at all.
	for _, i := range []int{1, 3} {
		if r.Outputs[i].Changed || !bytes.Equal(r.Outputs[i].Data, ins[i].Data) {
			t.Errorf("%s changed", ins[i].Name)
		}
	}

	out1 := docs(t, r.Outputs[0].Data)
	if len(out1) != 2 {
		t.Fatalf("provisioner1: want a NodePool and an EC2NodeClass, got %d documents", len(out1))
	}
	np := find(t, out1, "NodePool", "provisioner1")
	wantField(t, np, "apiVersion", "karpenter.sh/v1")
	// The spot requirement is kept; the webhook's implicit defaults follow (capacity type was set,
	// so no on-demand default).
	wantField(t, np, "spec.template.spec.requirements", []any{
		map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"spot"}},
		map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}},
		map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}},
		map[string]any{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": []any{"c", "m", "r"}},
		map[string]any{"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": []any{"2"}},
	})
	wantField(t, np, "spec.template.spec.nodeClassRef", map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "provisioner1"})
	wantField(t, np, "spec.template.spec.expireAfter", "Never")
	wantField(t, np, "spec.disruption", map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
	wantField(t, np, "spec.limits", map[string]any{"cpu": 1000})

	nc := find(t, out1, "EC2NodeClass", "provisioner1")
	wantField(t, nc, "apiVersion", "karpenter.k8s.aws/v1")
	wantField(t, nc, "spec.amiSelectorTerms", []any{map[string]any{"alias": "al2@latest"}})
	wantField(t, nc, "spec.subnetSelectorTerms", []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "${EKSCLUSTER_NAME}"}}})
	wantField(t, nc, "spec.securityGroupSelectorTerms", []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "${EKSCLUSTER_NAME}"}}})
	wantField(t, nc, "spec.role", "KarpenterNodeRole-${EKSCLUSTER_NAME}")
	wantField(t, nc, "spec.instanceProfile", nil)
	wantField(t, nc, "spec.metadataOptions", map[string]any{"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"})

	// Comments survive, on the values they were written next to.
	text1 := string(r.Outputs[0].Data)
	for _, want := range []string{
		`values: ["spot"] # EC2 Spot 인스턴스를 사용`,
		`cpu: 1000 # 최대 1000 vCPU 제한`,
		`consolidateAfter: 30s # 30초 동안 사용되지 않은 노드는 자동 종료`,
		`karpenter.sh/discovery: ${EKSCLUSTER_NAME} # Karpenter가 사용할 서브넷 자동 검색`,
		`karpenter.sh/discovery: ${EKSCLUSTER_NAME} # 보안 그룹 자동 검색`,
	} {
		if !strings.Contains(text1, want) {
			t.Errorf("provisioner1 output lacks %q:\n%s", want, text1)
		}
	}

	out2 := docs(t, r.Outputs[2].Data)
	np2 := find(t, out2, "NodePool", "provisioner2")
	wantField(t, np2, "spec.template.metadata.labels", map[string]any{"phase": "test2", "nodeType": "cpu-node"})
	wantField(t, np2, "spec.template.spec.taints", []any{map[string]any{"key": "cpuIntensive", "value": "true", "effect": "NoSchedule"}})
	// Instance type and capacity type are constrained: only arch and os defaults are added.
	wantField(t, np2, "spec.template.spec.requirements[3]", map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}})
	wantField(t, np2, "spec.template.spec.requirements[4]", map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}})
	wantField(t, np2, "spec.template.spec.requirements[5]", nil)
	wantField(t, np2, "spec.template.spec.nodeClassRef.name", "provisioner2")
	find(t, out2, "EC2NodeClass", "provisioner2")

	d := r.Diagnostics
	wantDiag(t, d, SeverityWarning, p1, 5, "ttlSecondsUntilExpired", "expireAfter: Never")
	wantDiag(t, d, SeverityWarning, p1, 6, "webhook", "kubernetes.io/arch In [amd64]", "instance-category In [c,m,r]", "instance-generation Gt [2]")
	wantDiag(t, d, SeverityWarning, p1, 13, "placeholder role", "KarpenterNodeRole-${EKSCLUSTER_NAME}")
	wantDiag(t, d, SeverityWarning, p1, 13, "amiFamily was not set", "al2@latest")
	wantDiag(t, d, SeverityWarning, p1, 13, "httpPutResponseHopLimit 2")
	wantDiag(t, d, SeverityWarning, p2, 13, "webhook", "kubernetes.io/os In [linux]")
	wantDiag(t, d, SeverityWarning, p2, 26, "placeholder role")
}

// Seed 004: a v1beta1 NodePool and EC2NodeClass in one file.
func TestSeed004Weasel(t *testing.T) {
	path := filepath.Join(seedDir, "004-weasel", "nodepool-ec2nodeclass.yaml")
	r := migrateFiles(t, readFile(t, path))
	out := docs(t, r.Outputs[0].Data)
	if len(out) != 2 {
		t.Fatalf("want 2 documents, got %d", len(out))
	}
	np := find(t, out, "NodePool", "default")
	wantField(t, np, "apiVersion", "karpenter.sh/v1")
	wantField(t, np, "spec.template.spec.nodeClassRef", map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
	wantField(t, np, "spec.template.spec.expireAfter", "720h")
	wantField(t, np, "spec.disruption", map[string]any{"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
	wantField(t, np, "spec.limits", map[string]any{"cpu": 1000})
	// No webhook defaults for v1beta1: the four requirements stay as they are.
	if reqs := field(np, "spec.template.spec.requirements").([]any); len(reqs) != 4 {
		t.Errorf("want the 4 original requirements, got %d", len(reqs))
	}

	nc := find(t, out, "EC2NodeClass", "default")
	wantField(t, nc, "apiVersion", "karpenter.k8s.aws/v1")
	wantField(t, nc, "spec.amiFamily", "AL2")
	wantField(t, nc, "spec.amiSelectorTerms", []any{map[string]any{"id": "ami-09c00c2e93ce7bd23"}})
	wantField(t, nc, "spec.role", "KarpenterNodeRole-weasel-eks")
	wantField(t, nc, "spec.metadataOptions.httpPutResponseHopLimit", 2)

	text := string(r.Outputs[0].Data)
	for _, want := range []string{
		"expireAfter: 720h # 30 * 24h = 720h",
		"amiFamily: AL2 # Amazon Linux 2",
		`# - key: karpenter.k8s.aws/instance-category`,
		`#   values: ["2", "4", "8"]`,
		`role: "KarpenterNodeRole-weasel-eks"`, // quoting style kept
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Key order: spec.limits still comes before spec.disruption, as in the source.
	if strings.Index(text, "limits:") > strings.Index(text, "disruption:") {
		t.Errorf("key order changed:\n%s", text)
	}
	if n := len(r.Diagnostics); n != 1 {
		t.Errorf("want exactly one warning (the hop limit), got %v", r.Diagnostics)
	}
	wantDiag(t, r.Diagnostics, SeverityWarning, path, 44, "v1beta1 defaults", "hop limit to 1")
}

// Seed 002 is already v1: it passes through byte for byte, without diagnostics.
func TestSeed002PassesThrough(t *testing.T) {
	dir := filepath.Join(seedDir, "002-hpa-terraform")
	ins := []Input{readFile(t, filepath.Join(dir, "ec2nodeclass.yaml")), readFile(t, filepath.Join(dir, "nodepool.yaml"))}
	r := migrateFiles(t, ins...)
	for i, o := range r.Outputs {
		if o.Changed || !bytes.Equal(o.Data, ins[i].Data) {
			t.Errorf("%s changed", o.Name)
		}
	}
	if len(r.Diagnostics) != 0 {
		t.Errorf("unexpected diagnostics: %v", r.Diagnostics)
	}
}

// Migrated output is stable: migrating it again changes nothing.
func TestMigrationIsIdempotent(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(seedDir, "*", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, p := range append(paths, more...) {
		r := migrateFiles(t, readFile(t, p))
		r2 := migrateFiles(t, Input{Name: p, Data: r.Outputs[0].Data})
		if r2.Outputs[0].Changed {
			t.Errorf("%s changed on a second migration:\n%s", p, r2.Outputs[0].Data)
		}
		if len(r2.Diagnostics) != 0 {
			t.Errorf("%s: second migration reported %v", p, r2.Diagnostics)
		}
	}
}

// Unrelated manifests that reuse a class name cannot be migrated as one set when a kubelet block
// has to move: which "default" would it go to?
func TestDuplicateClassNamesBlockKubeletPlacement(t *testing.T) {
	r := Files([]Input{
		readFile(t, filepath.Join("testdata", "v1alpha5-template.yaml")),
		readFile(t, filepath.Join(seedDir, "004-weasel", "nodepool-ec2nodeclass.yaml")),
	})
	wantDiag(t, r.Diagnostics, SeverityError, filepath.Join("testdata", "v1alpha5-template.yaml"), 19, `"default"`, "defined 2 times", "nodepool-ec2nodeclass.yaml:41")
}
