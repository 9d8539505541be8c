package migrate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

// e2eSets are the seeds (000 v1alpha5, 004 v1beta1, 002 v1) and the synthetic inputs. Each set
// is migrated on its own, as a user would: they are unrelated, and several define a class
// called "default".
func e2eSets(t *testing.T) [][]Input {
	var sets [][]Input
	for _, set := range [][]string{
		{"000-spot-dedicated/karpenter-provisioner1.yaml", "000-spot-dedicated/karpenter-provisioner2.yaml",
			"000-spot-dedicated/karpenter-inflate1.yaml", "000-spot-dedicated/karpenter-inflate2.yaml"},
		{"004-weasel/nodepool-ec2nodeclass.yaml"},
		{"002-hpa-terraform/ec2nodeclass.yaml", "002-hpa-terraform/nodepool.yaml"},
	} {
		var ins []Input
		for _, p := range set {
			ins = append(ins, readFile(t, filepath.Join(seedDir, p)))
		}
		sets = append(sets, ins)
	}
	synthetic, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, p := range synthetic {
		sets = append(sets, []Input{readFile(t, p)})
	}
	return sets
}

// decodeV1 decodes one migrated Karpenter document STRICTLY into karpool's v1 Go types (an unknown
// or misplaced field fails here); ok is false for documents of other APIs.
func decodeV1(t *testing.T, raw []byte) (obj client.Object, ok bool) {
	t.Helper()
	var meta struct{ APIVersion, Kind string }
	if err := sigsyaml.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("migrated document does not parse: %v\n%s", err, raw)
	}
	switch {
	case meta.APIVersion == "karpenter.sh/v1" && meta.Kind == "NodePool":
		obj = &karpenterv1.NodePool{}
	case meta.APIVersion == "karpenter.sh/v1" && meta.Kind == "NodeClaim":
		obj = &karpenterv1.NodeClaim{}
	case meta.APIVersion == "karpenter.k8s.aws/v1" && meta.Kind == "EC2NodeClass":
		obj = &karpenterawsv1.EC2NodeClass{}
	case isKarpenterGroup(meta.APIVersion):
		t.Errorf("migrated output still holds %s %s:\n%s", meta.APIVersion, meta.Kind, raw)
		return nil, false
	default:
		return nil, false
	}
	if err := sigsyaml.UnmarshalStrict(raw, obj); err != nil {
		t.Errorf("strict decoding into the v1 Go type failed: %v\n%s", err, raw)
		return nil, false
	}
	return obj, true
}

// TestE2EMigratedManifestsAreAccepted proves the converted output is valid v1: every NodePool and
// EC2NodeClass the migration produced decodes strictly into the v1 Go types and is accepted by a
// real kube-apiserver serving karpool's CRDs (server-side dry-run, so every OpenAPI and CEL rule
// of the CRDs runs). The seed placeholders (${EKSCLUSTER_NAME} in selector tags and in the
// placeholder role, and seed 002's Terraform interpolations) are left as they are: they are
// non-empty strings, which is all the CRDs require of those fields, so no substitution is needed
// and the output is checked exactly as `karpool migrate` prints it.
func TestE2EMigratedManifestsAreAccepted(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var outputs []Output
	for _, set := range e2eSets(t) {
		r := Files(set)
		if n := r.Errors(); n > 0 {
			t.Fatalf("%d migration errors: %v", n, r.Diagnostics)
		}
		outputs = append(outputs, r.Outputs...)
	}
	counts := map[string]int{}
	for _, o := range outputs {
		for _, raw := range rawDocs(t, o.Data) {
			obj, ok := decodeV1(t, raw)
			if !ok {
				continue
			}
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %q rejected by the API server: %v\n%s", o.Name, kind, obj.GetName(), err, raw)
				continue
			}
			counts[kind]++
		}
	}
	// seed 000: 2 pools + 2 classes; 004: 1 + 1; 002: 1 + 1; synthetic: 5 pools + 5 classes.
	if counts["NodePool"] != 9 || counts["EC2NodeClass"] != 9 {
		t.Errorf("accepted %v, want 9 NodePools and 9 EC2NodeClasses", counts)
	}
}

// TestE2EDryRunChecksCEL is the control for the test above: the same API server rejects a
// migrated class once its role is removed (the CRD's "exactly one of role and instanceProfile"
// CEL rule), and a pool whose requirement uses a label v1 reserves.
func TestE2EDryRunChecksCEL(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := migrateFiles(t, readFile(t, filepath.Join(seedDir, "000-spot-dedicated", "karpenter-provisioner1.yaml")))
	var class *karpenterawsv1.EC2NodeClass
	var pool *karpenterv1.NodePool
	for _, raw := range rawDocs(t, r.Outputs[0].Data) {
		obj, _ := decodeV1(t, raw)
		switch o := obj.(type) {
		case *karpenterawsv1.EC2NodeClass:
			class = o
		case *karpenterv1.NodePool:
			pool = o
		}
	}
	if class == nil || pool == nil {
		t.Fatal("seed 000 did not yield a pool and a class")
	}
	class.Spec.Role = ""
	err = c.Create(ctx, class, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("class without role: error %v, want a CEL rejection naming role", err)
	}
	pool.Spec.Template.Spec.Requirements[0].Key = "karpenter.sh/provisioner-name"
	err = c.Create(ctx, pool, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "karpenter.sh") {
		t.Errorf("pool with a karpenter.sh requirement: error %v, want a CEL rejection", err)
	}
}
