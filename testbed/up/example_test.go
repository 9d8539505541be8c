package up

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/karpool/karpool/examples"
)

func workloadIDs(ex *example) []string {
	var ids []string
	for _, o := range ex.workload {
		ids = append(ids, o.ID())
	}
	return ids
}

// The workshop's repository holds its pools only; inflate is workload.
func TestReadExampleWorkshop(t *testing.T) {
	ex, err := readExample(examples.FS, "workshop")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(ex.pools)), []string{"ec2nodeclass.yaml", "kustomization.yaml", "nodepool.yaml"}; !slices.Equal(got, want) {
		t.Errorf("repository files %v, want %v", got, want)
	}
	if got, want := workloadIDs(ex), []string{"Deployment/default/inflate"}; !slices.Equal(got, want) {
		t.Errorf("workload %v, want %v", got, want)
	}
	if src := ex.workload[0].Source.String(); !strings.HasPrefix(src, "examples/workshop/workload/inflate.yaml:") {
		t.Errorf("inflate located at %s", src)
	}
}

// Seed 000 keeps its Provisioners next to its Deployments: the Provisioners are migrated into the
// repository, the Deployments are applied.
func TestReadExampleSeedMixesPoolsAndWorkloadFiles(t *testing.T) {
	ex, err := readExample(examples.FS, "seeds/000-spot-dedicated")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(ex.pools)), []string{"karpenter-provisioner1.yaml", "karpenter-provisioner2.yaml"}; !slices.Equal(got, want) {
		t.Errorf("repository files %v, want %v", got, want)
	}
	for name, data := range ex.pools {
		if !strings.Contains(string(data), "kind: NodePool") || strings.Contains(string(data), "kind: Provisioner") {
			t.Errorf("%s is not migrated to a NodePool:\n%s", name, data)
		}
	}
	if got, want := workloadIDs(ex), []string{"Deployment/karpenter-inflate/inflate1", "Deployment/karpenter-inflate/inflate2"}; !slices.Equal(got, want) {
		t.Errorf("workload %v, want %v", got, want)
	}
}

func TestReadExampleRejects(t *testing.T) {
	const pool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: default\n"
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: inflate\n"
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"workload only", fstest.MapFS{"ex/inflate.yaml": {Data: []byte(deployment)}},
			"examples/ex holds no NodePool or EC2NodeClass, only a workload"},
		{"one file mixing both", fstest.MapFS{"ex/all.yaml": {Data: []byte(pool + "---\n" + deployment)}},
			"examples/ex/all.yaml mixes pools (NodePool/default) with workload objects (Deployment/inflate)"},
		{"broken YAML, located", fstest.MapFS{"ex/pool.yaml": {Data: []byte(pool + "  labels: [\n")}},
			"examples/ex/pool.yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readExample(tc.files, "ex")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Every example and seed that runs is listed: seed 003 prints no pool, but runs as its v1
// rendering, the workshop; seed 002 as hpa.
func TestExamplesListsRunnableOnes(t *testing.T) {
	got := Examples()
	for _, want := range []string{"workshop", "hpa", "seeds/000-spot-dedicated", "seeds/002-hpa-terraform", "seeds/003-workshop", "seeds/004-weasel"} {
		if !slices.Contains(got, want) {
			t.Errorf("Examples() = %v, missing %s", got, want)
		}
	}
}

// Seed 002 runs as its local rendering: the hpa example, whose repository holds the pools and
// whose backend and HPA are workload.
func TestSeedRunsItsLocalRendering(t *testing.T) {
	var out strings.Builder
	opts := Options{Example: "seeds/002-hpa-terraform", Demo: true, Out: &out}
	ex, err := opts.complete()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Example != "hpa" || !strings.Contains(out.String(), "running its local rendering, examples/hpa") {
		t.Errorf("example %q, output %q; want hpa, said", opts.Example, out.String())
	}
	if got, want := slices.Sorted(maps.Keys(ex.pools)), []string{"ec2nodeclass.yaml", "kustomization.yaml", "nodepool.yaml"}; !slices.Equal(got, want) {
		t.Errorf("repository files %v, want %v", got, want)
	}
	if got, want := workloadIDs(ex), []string{"Deployment/default/backend", "HorizontalPodAutoscaler/default/backend"}; !slices.Equal(got, want) {
		t.Errorf("workload %v, want %v", got, want)
	}
	bad := Options{Example: "seeds/004-weasel", Demo: true}
	if _, err := bad.complete(); err == nil || !strings.Contains(err.Error(), "--demo walks through the hpa and workshop examples") {
		t.Errorf("--demo on an example without one: %v", err)
	}
}
