package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/karpool/karpool/manifests/build/confined"
)

// hostileKustomizations reach for something outside the repository through every field
// kustomize reads a location from, and a few it does not.
var hostileKustomizations = []string{
	"resources:\n- http://127.0.0.1:1/cm.yaml\n",
	"resources:\n- github.com/acme/pools//base?ref=--upload-pack=touch\n",
	"bases:\n- git@github.com:acme/pools.git\n",
	"components:\n- https://github.com/acme/pools.git//c\n",
	"crds:\n- http://127.0.0.1:1/crd.yaml\n",
	"configurations:\n- http://127.0.0.1:1/conf.yaml\n",
	"generators:\n- http://127.0.0.1:1/gen.yaml\n",
	"generators:\n- ../gen\n",
	"generators:\n- ../gen.yaml\n",
	"generators:\n- |-\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n  metadata:\n    name: x\n  files:\n  - http://127.0.0.1:1/f\n",
	"transformers:\n- |-\n  apiVersion: builtin\n  kind: PatchTransformer\n  metadata:\n    name: p\n  path: https://127.0.0.1:1/p.yaml\n",
	"transformers:\n- ../transformer.yaml\n",
	"validators:\n- http://127.0.0.1:1/v.yaml\n",
	"patches:\n- path: http://127.0.0.1:1/p.yaml\n",
	"patchesStrategicMerge:\n- http://127.0.0.1:1/p.yaml\n",
	"patchesJson6902:\n- target: {kind: NodePool, name: a}\n  path: http://127.0.0.1:1/p.json\n",
	"configMapGenerator:\n- name: x\n  files:\n  - k=http://169.254.169.254/latest/meta-data\n",
	"configMapGenerator:\n- name: x\n  envs:\n  - http://127.0.0.1:1/env\n",
	"secretGenerator:\n- name: x\n  files:\n  - http://127.0.0.1:1/s\n",
	"replacements:\n- path: http://127.0.0.1:1/r.yaml\n",
	"openapi:\n  path: http://127.0.0.1:1/schema.json\n",
	"helmCharts:\n- name: x\n  repo: http://127.0.0.1:1/charts\n",
	"resources:\n- ../../secret.yaml\n",
	"resources:\n- link.yaml\n",
	"resources:\n- /etc/passwd\n",
	"resources:\n- ../base\ncommonAnnotations:\n  docs: https://127.0.0.1:1/docs\n",
	"resources:\n- ../base\nnamePrefix: p-\n",
	"commonAnnotations:\n  docs: &u http://127.0.0.1:1/x.yaml\ngenerators:\n- *u\n",
}

// FuzzBuildIsConfined builds kustomizations against a repository on disk that sits next to a
// secret file (and holds a link to it), recording below the build's guard every path it asks
// for, and every URL, dial and program start: nothing may leave the repository's root, and
// nothing may be fetched or run — not even refused, since the checks before the build must
// catch every remote location first.
func FuzzBuildIsConfined(f *testing.F) {
	for _, k := range hostileKustomizations {
		f.Add(k)
	}
	top := f.TempDir()
	root := filepath.Join(top, "repo")
	files := map[string]string{
		"base/kustomization.yaml": "resources:\n- nodepool.yaml\n",
		"base/nodepool.yaml":      "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\n",
		"gen/kustomization.yaml":  "resources:\n- http://127.0.0.1:1/x.yaml\n",
		"gen.yaml":                "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: g\nfiles:\n- http://127.0.0.1:1/f\n",
		"transformer.yaml":        "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: t\npath: http://127.0.0.1:1/p.yaml\n",
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		must(f, os.MkdirAll(filepath.Dir(p), 0o755))
		must(f, os.WriteFile(p, []byte(data), 0o644))
	}
	must(f, os.WriteFile(filepath.Join(top, "secret.yaml"), []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"), 0o600))
	must(f, os.MkdirAll(filepath.Join(root, "k"), 0o755))
	must(f, os.Symlink(filepath.Join(top, "secret.yaml"), filepath.Join(root, "k", "link.yaml")))

	var mu sync.Mutex
	var seen []confined.Access
	runKustomize = func(ctx context.Context, req confined.Request) (*confined.Result, error) {
		res, err := confined.Build(ctx, req)
		var ce *confined.Error
		mu.Lock()
		defer mu.Unlock()
		switch {
		case res != nil:
			seen = append(seen, res.Access)
		case errors.As(err, &ce):
			seen = append(seen, ce.Access)
		}
		return res, err
	}
	f.Cleanup(func() { runKustomize = confined.Build })

	f.Fuzz(func(t *testing.T, k string) {
		must(t, os.WriteFile(filepath.Join(root, "k", "kustomization.yaml"), []byte(k), 0o644))
		mu.Lock()
		seen = nil
		mu.Unlock()
		_, _ = BuildDir(context.Background(), root, "k")
		mu.Lock()
		defer mu.Unlock()
		for _, a := range seen {
			for _, p := range a.Paths {
				if p != root && !strings.HasPrefix(p, root+"/") {
					t.Errorf("the build reached %s, outside %s", p, root)
				}
			}
			if len(a.URLs)+len(a.Dials) > 0 || a.Exec {
				t.Errorf("the build reached for the network or a program: %+v", a)
			}
		}
	})
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
