package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workshop returns the files of examples/workshop under prefix.
func workshop(t *testing.T, prefix string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	dir := "../../examples/workshop"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[prefix+e.Name()] = data
	}
	return files
}

func ids(objs []*Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.ID()+"@"+o.Source.String())
	}
	return out
}

func TestBuildKustomizationKeepsSources(t *testing.T) {
	files := workshop(t, "clusters/dev/")
	objs, err := Build(files, "clusters/dev")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ids(objs), " ")
	want := "EC2NodeClass/default@clusters/dev/ec2nodeclass.yaml:4:1 NodePool/default@clusters/dev/nodepool.yaml:4:1 Deployment/default/inflate@clusters/dev/inflate.yaml:5:1"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, o := range objs {
		o.Object.DeepCopy() // panics on values that are not JSON-typed (int instead of int64)
		if _, ok := o.Object.GetAnnotations()[originAnnotation]; ok {
			t.Fatalf("%s keeps the origin annotation added for locating it", o.ID())
		}
	}
	line, col := objs[1].Source.Locate("spec.template.spec.requirements[1].operator")
	if line != 19 || col != 21 {
		t.Fatalf("operator of the second requirement at %d:%d, want 19:21", line, col)
	}
	// A field a patch added (so absent from the file) falls back to the closest enclosing one.
	if line, _ := objs[1].Source.Locate("spec.template.spec.expireAfter"); line != 13 {
		t.Fatalf("missing field located at line %d, want the enclosing spec at 13", line)
	}
}

func TestBuildOverlayWithBaseOutsideThePath(t *testing.T) {
	files := workshop(t, "base/")
	files["overlays/prod/kustomization.yaml"] = []byte("resources:\n  - ../../base\nnamePrefix: prod-\n")
	objs, err := Build(files, "overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ids(objs), " ")
	if !strings.Contains(got, "NodePool/prod-default@base/nodepool.yaml:4:1") {
		t.Fatalf("got %s", got)
	}
}

func TestBuildPlainYAMLRecursively(t *testing.T) {
	files := map[string][]byte{
		"pools/a.yaml":        []byte("# comment\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: b\n"),
		"pools/team/c.yml":    []byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: c\n"),
		"pools/values.yaml":   []byte("replicas: 3\n"),
		"pools/README.md":     []byte("# not yaml: [\n"),
		"pools/.github/x.yml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hidden\n"),
		"other/d.yaml":        []byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: d\n"),
	}
	objs, err := Build(files, "./pools/")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ids(objs), " ")
	want := "NodePool/a@pools/a.yaml:2:1 NodePool/b@pools/a.yaml:7:1 NodePool/c@pools/team/c.yml:1:1"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestBuildErrorsAreLocated(t *testing.T) {
	np := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\n"
	cases := []struct {
		name  string
		files map[string][]byte
		dir   string
		want  []string
	}{
		{"missing resource", map[string][]byte{"k/kustomization.yaml": []byte("resources:\n  - a.yaml\n  - missing.yaml\n"), "k/a.yaml": []byte(np)}, "k",
			[]string{`k/kustomization.yaml:3:5: "missing.yaml" not found in the repository (looked for k/missing.yaml)`}},
		{"remote base", map[string][]byte{"kustomization.yaml": []byte("resources:\n- https://github.com/org/repo//pools?ref=v1\n- github.com/org/repo/pools\n")}, "",
			[]string{`kustomization.yaml:2:3: remote resource "https://github.com/org/repo//pools?ref=v1" is not allowed`, `kustomization.yaml:3:3: "github.com/org/repo/pools" is not in the repository; if it is a remote base, remote bases are not allowed`}},
		{"misspelt field", map[string][]byte{"kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresource:\n  - a.yaml\n"), "a.yaml": []byte(np)}, "",
			[]string{`kustomization.yaml:3:1: unknown field "resource" in the kustomization (did you mean "resources"?)`}},
		{"broken kustomization yaml", map[string][]byte{"kustomization.yaml": []byte("resources:\n  - a.yaml\n - b.yaml\n")}, "",
			[]string{`kustomization.yaml:2:1: invalid YAML: did not find expected key`}},
		{"broken resource yaml", map[string][]byte{"kustomization.yaml": []byte("resources:\n  - a.yaml\n"), "a.yaml": []byte("apiVersion: v1\nkind: [\n")}, "",
			[]string{`a.yaml:2:1: invalid YAML: did not find expected node content`}},
		{"outside the repository", map[string][]byte{"k/kustomization.yaml": []byte("resources:\n  - ../../etc/passwd\n")}, "k",
			[]string{`k/kustomization.yaml:2:5: "../../etc/passwd" points outside the repository`}},
		{"helm", map[string][]byte{"kustomization.yaml": []byte("helmCharts:\n- name: x\n")}, "",
			[]string{`kustomization.yaml:1:1: Helm charts are not supported`}},
		{"kustomize's own error", map[string][]byte{"kustomization.yaml": []byte("resources:\n- a.yaml\npatches:\n- patch: 'not a patch'\n"), "a.yaml": []byte(np)}, "",
			[]string{`kustomization.yaml: kustomize build failed: `}},
		{"defined twice", map[string][]byte{"a.yaml": []byte(np), "b.yaml": []byte("\n" + np)}, "",
			[]string{`b.yaml:2:1: NodePool/a is defined twice; the first definition is at a.yaml:1:1`}},
		{"kind without apiVersion", map[string][]byte{"a.yaml": []byte("kind: NodePool\n")}, "",
			[]string{`a.yaml:1:1: a Kubernetes object needs both apiVersion and kind`}},
		{"boolean name", map[string][]byte{"a.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\n")}, "",
			[]string{`a.yaml:4:9: ConfigMap metadata.name is not a string: quote it`}},
		{"no such path", map[string][]byte{"a.yaml": []byte(np)}, "pools",
			[]string{`pools: spec.path does not exist in the repository at this revision`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(c.files, c.dir)
			errs, ok := err.(Errors)
			if !ok {
				t.Fatalf("got %v (%T), want Errors", err, err)
			}
			if len(errs) != len(c.want) {
				t.Fatalf("got %d errors (%v), want %d", len(errs), err, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d:\n got  %s\n want %s…", i, errs[i], w)
				}
			}
		})
	}
}

func TestBuildRecoversAndSerialises(t *testing.T) {
	// Concurrent builds of the same input give the same output (they are serialised inside).
	files := workshop(t, "")
	done := make(chan string, 8)
	for i := 0; i < 8; i++ {
		go func() {
			objs, err := Build(files, "")
			if err != nil {
				done <- err.Error()
				return
			}
			done <- strings.Join(ids(objs), " ")
		}()
	}
	first := <-done
	for i := 1; i < 8; i++ {
		if got := <-done; got != first {
			t.Fatalf("concurrent builds differ:\n%s\n%s", first, got)
		}
	}
}
