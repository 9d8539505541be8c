// Package build turns the files of one path of a repository into Kubernetes objects, each with the
// file and line it came from.
//
// A path holding a kustomization is built with kustomize in a confined child process (package
// confined): it reads the repository and nothing else, starts no program, opens no connection,
// and is bounded by a deadline and caps. Any other path is read as plain YAML, recursively, the
// way Flux generates a kustomization for such a path, with the same caps. The kustomization
// files are checked before kustomize runs, so that the common mistakes (a misspelt field, a
// missing resource, a remote location anywhere in them, broken YAML) are reported at their
// file:line:col rather than as kustomize's unlocated message.
package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/manifests/build/confined"
)

// Object is one Kubernetes object of the build and where it was written.
type Object struct {
	Object *unstructured.Unstructured
	Source Source
}

// ID names the object as kind/namespace/name (kind/name when cluster-scoped).
func (o *Object) ID() string {
	if ns := o.Object.GetNamespace(); ns != "" {
		return o.Object.GetKind() + "/" + ns + "/" + o.Object.GetName()
	}
	return o.Object.GetKind() + "/" + o.Object.GetName()
}

// KustomizationFiles are the names kustomize accepts, in its order of preference.
var KustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Build builds the objects under dir (slash-separated, relative to the repository root; "" or
// "." for the root) of a repository's files, within the limits of ctx (WithLimits). The error is
// manifests.Errors when the input is at fault.
func Build(ctx context.Context, files map[string][]byte, dir string) ([]*Object, error) {
	return build(ctx, &memRepo{files: files}, dir)
}

// BuildDir is Build on a working copy on disk whose root is root: what `karpool vet` checks is
// built exactly as PoolSync builds it. Only the files the build needs are read, and nothing
// outside root.
func BuildDir(ctx context.Context, root, dir string) ([]*Object, error) {
	r, err := newDiskRepo(root)
	if err != nil {
		return nil, err
	}
	return build(ctx, r, dir)
}

func build(ctx context.Context, r repo, dir string) ([]*Object, error) {
	dir, err := cleanDir(dir)
	if err != nil {
		return nil, manifests.Errors{{Message: err.Error()}}
	}
	b := newBuilder(ctx, r)
	if !r.isDir(dir) {
		if r.isFile(dir) {
			return nil, manifests.Errors{{File: dir, Message: "spec.path names a file; it must name a directory"}}
		}
		return nil, manifests.Errors{{File: dir, Message: "spec.path does not exist in the repository at this revision"}}
	}
	var objs []*Object
	var errs manifests.Errors
	if b.kustomization(dir) != "" {
		objs, errs = b.kustomize(dir)
	} else {
		objs, errs = b.plain(dir)
	}
	if len(errs) == 0 {
		errs = b.check(objs)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return objs, nil
}

// check is what every build's objects must pass, however they were read.
func (b *builder) check(objs []*Object) manifests.Errors {
	if len(objs) > b.limits.Objects {
		return manifests.Errors{{Message: fmt.Sprintf("the build holds %d objects, more than the %d a revision may hold", len(objs), b.limits.Objects)}}
	}
	return append(unnamed(objs), duplicates(objs)...)
}

func cleanDir(dir string) (string, error) {
	d := path.Clean("/" + strings.TrimSpace(dir))
	if strings.Contains(dir, "..") {
		return "", fmt.Errorf("spec.path %q must stay inside the repository (no ..)", dir)
	}
	return strings.TrimPrefix(d, "/"), nil
}

type builder struct {
	ctx    context.Context
	limits confined.Limits
	repo   repo
	docs   map[string][]*yaml.Node // parsed files, by path
	read   int64                   // bytes parsed so far, against limits.ReadBytes
}

func newBuilder(ctx context.Context, r repo) *builder {
	return &builder{ctx: ctx, limits: limitsOf(ctx), repo: r, docs: map[string][]*yaml.Node{}}
}

// kustomization returns the kustomization file of a directory, or "".
func (b *builder) kustomization(dir string) string {
	for _, n := range KustomizationFiles {
		p := path.Join(dir, n)
		if b.repo.isFile(p) {
			return p
		}
	}
	return ""
}

// plain reads every YAML file under dir. A subdirectory with its own kustomization is built with
// kustomize instead, as Flux does.
func (b *builder) plain(dir string) ([]*Object, manifests.Errors) {
	names := b.repo.under(dir)
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	var objs []*Object
	var errs manifests.Errors
	built := map[string]bool{}
	for _, name := range names {
		rel := strings.TrimPrefix(name, prefix)
		if hidden(rel) {
			continue
		}
		if sub := b.kustomizedAncestor(dir, name); sub != "" {
			if !built[sub] {
				built[sub] = true
				o, e := b.kustomize(sub)
				objs, errs = append(objs, o...), append(errs, e...)
			}
			continue
		}
		if ext := path.Ext(name); ext != ".yaml" && ext != ".yml" {
			continue
		}
		o, e := b.objectsOf(name)
		objs, errs = append(objs, o...), append(errs, e...)
	}
	return objs, errs
}

// kustomizedAncestor returns the topmost directory strictly below dir, on the way to file, that
// holds a kustomization.
func (b *builder) kustomizedAncestor(dir, file string) string {
	rel := strings.TrimPrefix(file, dir)
	rel = strings.TrimPrefix(rel, "/")
	parts := strings.Split(rel, "/")
	cur := dir
	for _, p := range parts[:len(parts)-1] {
		cur = path.Join(cur, p)
		if b.kustomization(cur) != "" {
			return cur
		}
	}
	return ""
}

func hidden(rel string) bool {
	for _, p := range strings.Split(rel, "/") {
		if strings.HasPrefix(p, ".") {
			return true
		}
	}
	return false
}

// parse splits a file into its YAML documents (root nodes), caching the result. It is the one
// place the parent process reads YAML: within the byte caps, without following aliases past
// the node cap, and refusing duplicate keys, which YAML readers resolve differently.
func (b *builder) parse(name string) ([]*yaml.Node, *manifests.Error) {
	if d, ok := b.docs[name]; ok {
		return d, nil
	}
	data, err := b.repo.read(name, b.limits.FileBytes)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, &manifests.Error{File: name, Message: fmt.Sprintf("the file is larger than the %s a build reads from one file", confined.Size(b.limits.FileBytes))}
	case err != nil:
		return nil, &manifests.Error{File: name, Message: "cannot read the file: " + err.Error()}
	}
	if b.read += int64(len(data)); b.read > b.limits.ReadBytes {
		return nil, &manifests.Error{File: name, Message: fmt.Sprintf("reading it takes the build past the %s a revision may hold", confined.Size(b.limits.ReadBytes))}
	}
	if e := confined.CheckAliases(name, data, b.limits.AliasNodes); e != nil {
		return nil, &manifests.Error{File: name, Line: e.Line, Column: 1, Message: e.Message}
	}
	docs, perr := decodeAll(name, data)
	if perr != nil {
		return nil, perr
	}
	b.docs[name] = docs
	return docs, nil
}

// decodeAll returns the non-empty documents of a file, each checked by checkNodes.
func decodeAll(name string, data []byte) ([]*yaml.Node, *manifests.Error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, manifests.SyntaxError(name, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null" {
			continue
		}
		if e := manifests.Strict(name, n.Content[0]); e != nil {
			return nil, e
		}
		docs = append(docs, n.Content[0])
	}
}

// objectsOf converts the documents of a plain YAML file. Documents that are not Kubernetes
// objects (neither apiVersion nor kind) are skipped, as Flux skips them.
func (b *builder) objectsOf(name string) ([]*Object, manifests.Errors) {
	docs, perr := b.parse(name)
	if perr != nil {
		return nil, manifests.Errors{perr}
	}
	var objs []*Object
	var errs manifests.Errors
	for _, d := range listItems(docs) {
		src := Source{File: name, Line: d.Line, Column: d.Column, doc: d}
		if d.Kind != yaml.MappingNode {
			continue
		}
		apiVersion, kind := manifests.StringField(d, "apiVersion"), manifests.StringField(d, "kind")
		if apiVersion == "" && kind == "" {
			continue
		}
		if apiVersion == "" || kind == "" {
			errs = append(errs, &manifests.Error{File: name, Line: d.Line, Column: d.Column, Message: "a Kubernetes object needs both apiVersion and kind"})
			continue
		}
		u, err := toUnstructured(d)
		if err != nil {
			errs = append(errs, &manifests.Error{File: name, Line: d.Line, Column: d.Column, Message: err.Error()})
			continue
		}
		objs = append(objs, &Object{Object: u, Source: src})
	}
	return objs, errs
}

// listItems replaces each List (kind List, or any kind ending in List, with items) by its items,
// as kustomize and kubectl read them; each item keeps its own position in the file.
func listItems(docs []*yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	for _, d := range docs {
		items := manifests.Field(d, "items")
		if d.Kind != yaml.MappingNode || !strings.HasSuffix(manifests.StringField(d, "kind"), "List") || items == nil || items.Kind != yaml.SequenceNode {
			out = append(out, d)
			continue
		}
		for _, item := range items.Content {
			budget := maxInlined
			out = append(out, inlineAliases(item, &budget))
		}
	}
	return out
}

// maxInlined bounds the nodes inlineAliases copies for one item, so that nested aliases (a
// "billion laughs" document) cannot blow up memory: past it, aliases stay, and reading the item
// fails with YAML's own error.
const maxInlined = 100_000

// inlineAliases copies n with each alias replaced by a copy of the node it names: an item of a
// List is read on its own, away from anchors set in earlier items.
func inlineAliases(n *yaml.Node, budget *int) *yaml.Node {
	*budget--
	if n.Kind == yaml.AliasNode && n.Alias != nil && *budget > 0 {
		return inlineAliases(n.Alias, budget)
	}
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		c.Content[i] = inlineAliases(ch, budget)
	}
	return &c
}

func toUnstructured(n *yaml.Node) (*unstructured.Unstructured, error) {
	data, err := yaml.Marshal(n)
	if err != nil {
		return nil, err
	}
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, err
	}
	return u, nil
}

// unnamed reports objects without a name. YAML 1.1, which Kubernetes' YAML reader follows, reads
// some unquoted names (y, n, yes, no, on, off) as booleans, which leaves the name empty.
func unnamed(objs []*Object) manifests.Errors {
	var errs manifests.Errors
	for _, o := range objs {
		if o.Object.GetName() != "" {
			continue
		}
		line, col := o.Source.Locate("metadata.name")
		msg := "metadata.name is missing"
		if _, found, _ := unstructured.NestedFieldNoCopy(o.Object.Object, "metadata", "name"); found {
			msg = "metadata.name is not a string: quote it (YAML reads y, n, yes, no, on and off as booleans)"
		}
		errs = append(errs, &manifests.Error{File: o.Source.File, Line: line, Column: col, Message: o.Object.GetKind() + " " + msg})
	}
	return errs
}

// duplicates reports objects defined more than once, which would fight over the same object.
func duplicates(objs []*Object) manifests.Errors {
	first := map[string]*Object{}
	var errs manifests.Errors
	for _, o := range objs {
		gvk := o.Object.GroupVersionKind()
		key := gvk.Group + "/" + o.ID()
		if prev, ok := first[key]; ok {
			errs = append(errs, &manifests.Error{File: o.Source.File, Line: o.Source.Line, Column: o.Source.Column,
				Message: fmt.Sprintf("%s is defined twice; the first definition is at %s", o.ID(), prev.Source)})
			continue
		}
		first[key] = o
	}
	return errs
}
