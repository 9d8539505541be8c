package build

import (
	"fmt"
	"path"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/manifests/build/confined"
)

const originAnnotation = "config.kubernetes.io/origin"

// runKustomize is confined.Build; the fuzz test wraps it to see what each build reached for.
var runKustomize = confined.Build

// kustomize builds the kustomization in dir in a confined child process.
func (b *builder) kustomize(dir string) ([]*Object, manifests.Errors) {
	kfile := b.kustomization(dir)
	if errs := b.lint(dir, map[string]bool{}); len(errs) > 0 {
		return nil, errs
	}
	data, keepOrigin, err := withOriginAnnotations(b.docs[kfile][0])
	if err != nil {
		return nil, manifests.Errors{{File: kfile, Message: err.Error()}}
	}
	req := b.repo.request(dir)
	req.Override = map[string][]byte{kfile: data}
	req.Limits = b.limits
	res, err := runKustomize(b.ctx, req)
	if err != nil {
		return nil, manifests.Errors{b.buildError(kfile, err)}
	}
	var objs []*Object
	for _, o := range res.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(o.JSON); err != nil {
			return nil, manifests.Errors{{File: kfile, Message: fmt.Sprintf("reading a built object: %v", err)}}
		}
		if !keepOrigin {
			dropAnnotation(u, originAnnotation)
		}
		objs = append(objs, &Object{Object: u, Source: b.sourceOf(dir, kfile, o, u)})
	}
	return objs, nil
}

// withOriginAnnotations returns the kustomization with buildMetadata [originAnnotations] added, so
// that every built object says which file it came from; keep says whether the user asked for the
// annotation already (and so wants it on the objects).
func withOriginAnnotations(root *yaml.Node) (data []byte, keep bool, err error) {
	k := cloneNode(root)
	var meta *yaml.Node
	for i := 0; i+1 < len(k.Content); i += 2 {
		if k.Content[i].Value == "buildMetadata" {
			meta = k.Content[i+1]
		}
	}
	if meta == nil {
		meta = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		k.Content = append(k.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "buildMetadata"}, meta)
	}
	for _, c := range meta.Content {
		if c.Value == types.OriginAnnotations {
			keep = true
		}
	}
	if !keep {
		meta.Content = append(meta.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: types.OriginAnnotations})
	}
	data, err = yaml.Marshal(k)
	return data, keep, err
}

func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		c.Content[i] = cloneNode(ch)
	}
	return &c
}

func dropAnnotation(u *unstructured.Unstructured, key string) {
	a := u.GetAnnotations()
	if _, ok := a[key]; !ok {
		return
	}
	delete(a, key)
	if len(a) == 0 {
		a = nil
	}
	u.SetAnnotations(a)
}

// sourceOf finds the document an object of a kustomize build came from. The origin path is
// relative to the kustomization that was built; within the file, the document is the one with the
// object's kind and name, allowing for a namePrefix or nameSuffix.
func (b *builder) sourceOf(dir, kfile string, origin confined.Object, u *unstructured.Unstructured) Source {
	if origin.OriginPath == "" {
		if origin.ConfiguredIn != "" {
			return Source{File: path.Join(dir, origin.ConfiguredIn)}
		}
		return Source{File: kfile}
	}
	file := path.Join(dir, origin.OriginPath)
	docs, err := b.parse(file)
	if err != nil || len(docs) == 0 {
		return Source{File: file}
	}
	var best *yaml.Node
	bestLen := -1
	for _, d := range docs {
		if d.Kind != yaml.MappingNode || manifests.StringField(d, "kind") != u.GetKind() {
			continue
		}
		name := ""
		if md := manifests.Field(d, "metadata"); md != nil {
			name = manifests.StringField(md, "name")
		}
		score := 0
		switch {
		case name == u.GetName():
			score = len(name) + 1_000_000
		case name != "" && strings.Contains(u.GetName(), name):
			score = len(name)
		}
		if score > bestLen {
			best, bestLen = d, score
		}
	}
	if best == nil {
		best = docs[0]
	}
	return Source{File: file, Line: best.Line, Column: best.Column, doc: best}
}
