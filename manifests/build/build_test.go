package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/karpool/karpool/manifests"
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
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[prefix+e.Name()] = data
	}
	return files
}

var ctx = context.Background()

func ids(objs []*Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.ID()+"@"+o.Source.String())
	}
	return out
}

func TestBuildKustomizationKeepsSources(t *testing.T) {
	files := workshop(t, "clusters/dev/")
	objs, err := Build(ctx, files, "clusters/dev")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ids(objs), " ")
	want := "EC2NodeClass/default@clusters/dev/ec2nodeclass.yaml:4:1 NodePool/default@clusters/dev/nodepool.yaml:4:1"
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
	objs, err := Build(ctx, files, "overlays/prod")
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
	objs, err := Build(ctx, files, "./pools/")
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
			[]string{`kustomization.yaml:2:3: remote location "https://github.com/org/repo//pools?ref=v1": karpool builds read the repository only`, `kustomization.yaml:3:3: remote location "github.com/org/repo/pools": karpool builds read the repository only`}},
		{"http URL with a space, which kustomize still fetches", map[string][]byte{"kustomization.yaml": []byte("configurations:\n- http:- h\n")}, "",
			[]string{`kustomization.yaml:2:3: remote location "http:- h"`}},
		{"remote file in a generator's configuration file", map[string][]byte{"kustomization.yaml": []byte("generators:\n- gen.yaml\n"), "gen.yaml": []byte("apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: x\nfiles:\n- k=http://169.254.169.254/latest/meta-data\n")}, "",
			[]string{`gen.yaml:6:3: remote location "http://169.254.169.254/latest/meta-data"`}},
		{"remote base behind a generator directory", map[string][]byte{"kustomization.yaml": []byte("generators:\n- gen\n"), "gen/kustomization.yaml": []byte("resources:\n- git@github.com:org/repo.git//x?ref=--upload-pack=touch\n")}, "",
			[]string{`gen/kustomization.yaml:2:3: remote location "git@github.com:org/repo.git//x?ref=--upload-pack=touch"`}},
		{"remote patch in an inline transformer", map[string][]byte{"kustomization.yaml": []byte("transformers:\n- |-\n  apiVersion: builtin\n  kind: PatchTransformer\n  metadata:\n    name: p\n  path: https://example.com/p.yaml\n")}, "",
			[]string{`kustomization.yaml:7:9: remote location "https://example.com/p.yaml"`}},
		{"duplicate key", map[string][]byte{"a.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n")}, "",
			[]string{`a.yaml:5:3: key "name" is given twice in this mapping (first at line 4)`}},
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
			// kustomize's message has no position; the line is found by what it quotes.
			[]string{`kustomization.yaml:4:11: kustomize build failed: `}},
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
			_, err := Build(ctx, c.files, c.dir)
			errs, ok := err.(manifests.Errors)
			if !ok {
				t.Fatalf("got %v (%T), want manifests.Errors", err, err)
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

func TestConcurrentBuildsAgree(t *testing.T) {
	files := workshop(t, "")
	done := make(chan string, 8)
	for i := 0; i < 8; i++ {
		go func() {
			objs, err := Build(ctx, files, "")
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

// TestBuildSharesFilesInsideTheRepository: as in Flux, an overlay may take a base and a patch
// from anywhere in the repository, but nothing outside it. `karpool vet` builds through the same
// code (TestKustomizeSharesFilesInsideTheRepository in schema/vet runs the same shape on disk).
func TestBuildSharesFilesInsideTheRepository(t *testing.T) {
	np := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\nspec:\n  weight: 1\n"
	files := map[string][]byte{
		"pools/base/kustomization.yaml":    []byte("resources:\n  - nodepool.yaml\n"),
		"pools/base/nodepool.yaml":         []byte(np),
		"pools/patches/weight.json":        []byte(`[{"op": "replace", "path": "/spec/weight", "value": 10}]`),
		"pools/prod/kustomization.yaml":    []byte("resources:\n  - ../base\npatches:\n  - path: ../patches/weight.json\n    target: {kind: NodePool}\n"),
		"pools/escape/kustomization.yaml":  []byte("resources:\n  - ../base\npatches:\n  - path: ../../../weight.json\n    target: {kind: NodePool}\n"),
		"pools/escape2/kustomization.yaml": []byte("resources:\n  - ../../../base\n"),
	}
	objs, err := Build(ctx, files, "pools/prod")
	if err != nil {
		t.Fatal(err)
	}
	if w, _, _ := unstructured.NestedInt64(objs[0].Object.Object, "spec", "weight"); len(objs) != 1 || w != 10 || objs[0].Source.File != "pools/base/nodepool.yaml" {
		t.Fatalf("got %v with weight %d, want the base's pool patched to weight 10", ids(objs), w)
	}
	for dir, want := range map[string]string{
		"pools/escape":  `pools/escape/kustomization.yaml:4:11: "../../../weight.json" points outside the repository`,
		"pools/escape2": `pools/escape2/kustomization.yaml:2:5: "../../../base" points outside the repository`,
	} {
		_, err := Build(ctx, files, dir)
		if errs, ok := err.(manifests.Errors); !ok || len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
			t.Errorf("%s: got %v, want %s…", dir, err, want)
		}
	}
}

// TestBuildDirReadsOnlyTheRepository: on disk, a build is confined to the repository root even
// where the kustomization itself does not name the outside file (a symbolic link leading out).
func TestBuildDirReadsOnlyTheRepository(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "repo")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "k"), 0o755))
	must(os.WriteFile(filepath.Join(top, "secret.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n"), 0o644))
	must(os.Symlink(filepath.Join(top, "secret.yaml"), filepath.Join(root, "k", "link.yaml")))
	must(os.WriteFile(filepath.Join(root, "k", "kustomization.yaml"), []byte("resources:\n  - link.yaml\n"), 0o644))
	_, err := BuildDir(ctx, root, "k")
	if err == nil || !strings.Contains(err.Error(), "link.yaml") {
		t.Fatalf("got %v, want the link leading out refused", err)
	}
	must(os.WriteFile(filepath.Join(root, "k", "kustomization.yaml"), []byte("resources:\n  - cm.yaml\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "k", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"), 0o644))
	objs, err := BuildDir(ctx, root, "k")
	if err != nil || len(objs) != 1 || objs[0].Source.String() != "k/cm.yaml:1:1" {
		t.Fatalf("got %v, %v", ids(objs), err)
	}
}

func TestLocateQuotedKeys(t *testing.T) {
	objs, err := LoadFile(ctx, "np.yaml", []byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\nspec:\n  template:\n    \"a.b]\\n[c\": {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if line, col := objs[0].Source.Locate(`spec.template["a.b]\n[c"]`); line != 7 || col != 5 {
		t.Fatalf("quoted key at %d:%d, want 7:5", line, col)
	}
}
