// Package schema holds karpool's CUE schema for Karpenter v1 NodePools, NodeClaims and
// EC2NodeClasses and for karpool's PoolSync, and validates manifests against it.
//
// The .cue files next to this one are a CUE module (cue.mod/module.cue), so the stock cue CLI
// uses them straight from a clone:
//
//	cue vet -c -d '#Resource' ./schema manifests/*.yaml
//
// The same files are embedded in the binary. A [Schema] compiles them once into one cue.Context
// and validates one document at a time against the definition its apiVersion and kind select,
// reporting every error of the document with its position in the user's file. A [Pool] runs
// several Schemas in parallel.
//
// A Schema is not safe for concurrent use (a cue.Context is not); a Pool and
// [ValidateDocuments] are.
package schema

import (
	"embed"
	"fmt"
	"runtime"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/ast/astutil"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"

	"github.com/karpool/karpool/manifests"
)

// Sources are the schema's CUE files and its module file, as `cue vet` reads them.
//
//go:embed *.cue cue.mod/module.cue
var Sources embed.FS

// ModulePath is the CUE module path of the schema (cue.mod/module.cue).
const ModulePath = "karpool.dev/schema@v0"

// Kinds karpool validates, by apiVersion and kind, with the definition that checks each.
var definitions = []struct{ APIVersion, Kind, Definition string }{
	{"karpenter.sh/v1", "NodePool", "#NodePool"},
	{"karpenter.sh/v1", "NodeClaim", "#NodeClaim"},
	{"karpenter.sh/v1alpha1", "NodeOverlay", "#NodeOverlay"},
	{"karpenter.k8s.aws/v1", "EC2NodeClass", "#EC2NodeClass"},
	{"karpool.dev/v1alpha1", "PoolSync", "#PoolSync"},
	{"karpool.dev/v1alpha1", "ReviewPolicy", "#ReviewPolicy"},
	{"karpool.dev/v1alpha1", "Fleet", "#Fleet"},
}

// Retired maps API versions that Karpenter v1 no longer serves to the version replacing them.
var Retired = map[string]string{
	"karpenter.sh/v1beta1":       "karpenter.sh/v1",
	"karpenter.sh/v1alpha5":      "karpenter.sh/v1",
	"karpenter.k8s.aws/v1beta1":  "karpenter.k8s.aws/v1",
	"karpenter.k8s.aws/v1alpha1": "karpenter.k8s.aws/v1",
}

// Groups maps the API groups karpool validates to their served version.
var Groups = map[string]string{
	"karpenter.sh":      "karpenter.sh/v1",
	"karpenter.k8s.aws": "karpenter.k8s.aws/v1",
	"karpool.dev":       "karpool.dev/v1alpha1",
}

// Schema is the compiled schema. Compile it once and validate many documents with it.
type Schema struct {
	// Memoize validates the elements of some lists (requirements, taints, budgets) on their own
	// and remembers the outcome by content; on by default. Off, every document is validated
	// whole against its definition. Both give the same findings.
	Memoize bool

	ctx    *cue.Context
	root   cue.Value
	defs   map[string]cue.Value // by apiVersion|kind
	hollow map[string]cue.Value // the same, with the memoized list elements left open
	elems  map[string]cue.Value // the memoized element definitions, by name
	memo   *memoCache
}

// Compile builds the embedded schema.
func Compile() (*Schema, error) {
	return compile(newMemoCache())
}

func compile(memo *memoCache) (*Schema, error) {
	ctx := cuecontext.New()
	root, err := build(ctx, nil)
	if err != nil {
		return nil, err
	}
	hollowRoot, err := build(ctx, openMemoizedElements)
	if err != nil {
		return nil, err
	}
	s := &Schema{Memoize: true, ctx: ctx, root: root, defs: map[string]cue.Value{}, hollow: map[string]cue.Value{}, elems: map[string]cue.Value{}, memo: memo}
	for _, d := range definitions {
		key := d.APIVersion + "|" + d.Kind
		if s.defs[key], err = lookup(root, d.Definition); err != nil {
			return nil, err
		}
		if s.hollow[key], err = lookup(hollowRoot, d.Definition); err != nil {
			return nil, err
		}
	}
	for _, mps := range memoPoints {
		for _, mp := range mps {
			if s.elems[mp.def], err = lookup(root, mp.def); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func lookup(root cue.Value, def string) (cue.Value, error) {
	v := root.LookupPath(cue.ParsePath(def))
	if !v.Exists() {
		return v, fmt.Errorf("schema: %s is not defined", def)
	}
	// A definition on its own is incomplete (its required fields are missing); it must not be
	// wrong.
	if err := v.Validate(); err != nil {
		return v, fmt.Errorf("schema: %s: %s", def, errors.Details(err, nil))
	}
	return v, nil
}

// build loads the embedded CUE module, lets rewrite change its files, and compiles it.
func build(ctx *cue.Context, rewrite func(*ast.File)) (cue.Value, error) {
	insts := load.Instances([]string{"."}, &load.Config{FS: Sources, Dir: "/"})
	if len(insts) != 1 {
		return cue.Value{}, fmt.Errorf("schema: loaded %d CUE instances, want 1", len(insts))
	}
	if err := insts[0].Err; err != nil {
		return cue.Value{}, fmt.Errorf("schema: loading the embedded CUE files: %s", errors.Details(err, nil))
	}
	if rewrite != nil {
		for _, f := range insts[0].Files {
			rewrite(f)
		}
	}
	root := ctx.BuildInstance(insts[0])
	if err := root.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("schema: compiling the embedded CUE files: %s", errors.Details(err, nil))
	}
	return root, nil
}

// openMemoizedElements turns [...#NodePoolRequirement] into [..._] and nodeClassRef!:
// #NodeClassReference into nodeClassRef!: _ (and so for every memoized definition): the schema the
// rest of a document is checked against while those values are checked on their own.
func openMemoizedElements(f *ast.File) {
	names := map[string]bool{}
	for _, mps := range memoPoints {
		for _, mp := range mps {
			names[mp.def] = true
		}
	}
	astutil.Apply(f, func(c astutil.Cursor) bool {
		switch n := c.Node().(type) {
		case *ast.Ellipsis: // requirements!: [...#NodePoolRequirement]
			if id, ok := n.Type.(*ast.Ident); ok && names[id.Name] {
				n.Type = ast.NewIdent("_")
			}
		case *ast.Field: // nodeClassRef!: #NodeClassReference
			if id, ok := n.Value.(*ast.Ident); ok && names[id.Name] {
				n.Value = ast.NewIdent("_")
			}
		}
		return true
	}, nil)
}

// Definition returns the schema definition (such as #NodePool) that checks apiVersion/kind, and
// whether there is one.
func Definition(apiVersion, kind string) (string, bool) {
	for _, d := range definitions {
		if d.APIVersion == apiVersion && d.Kind == kind {
			return d.Definition, true
		}
	}
	return "", false
}

// Known reports whether karpool validates documents of this apiVersion and kind.
func Known(apiVersion, kind string) bool {
	_, ok := Definition(apiVersion, kind)
	return ok
}

// Value returns the compiled definition for apiVersion/kind, for callers that want to work with
// CUE values directly.
func (s *Schema) Value(apiVersion, kind string) (cue.Value, bool) {
	v, ok := s.defs[apiVersion+"|"+kind]
	return v, ok
}

// Context returns the cue.Context the schema was compiled into.
func (s *Schema) Context() *cue.Context { return s.ctx }

// Unified returns the document unified with its definition: what `cue export` shows, the
// schema's defaults filled in.
func (s *Schema) Unified(d *manifests.Document, lim manifests.Limits) (cue.Value, error) {
	def, ok := s.defs[d.APIVersion+"|"+d.Kind]
	if !ok {
		return cue.Value{}, fmt.Errorf("no definition for %s %s", d.APIVersion, d.Kind)
	}
	obj, err := d.Object(lim)
	if err != nil {
		return cue.Value{}, err
	}
	return def.Unify(s.ctx.Encode(obj)), nil
}

// memoCache remembers element validations, shared by the Schemas of a Pool.
type memoCache struct {
	mu sync.Mutex
	m  map[string][]rawError
}

// maxMemo bounds the cache: element contents are short, so this is a few MB at most.
const maxMemo = 20_000

func newMemoCache() *memoCache { return &memoCache{m: map[string][]rawError{}} }

func (c *memoCache) get(k string) ([]rawError, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	return r, ok
}

func (c *memoCache) put(k string, r []rawError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxMemo {
		clear(c.m)
	}
	c.m[k] = r
}

// Pool validates with several Schemas in parallel, one per worker.
type Pool struct {
	schemas chan *Schema
	workers int
}

// NewPool compiles the schema for workers workers (GOMAXPROCS when workers < 1).
func NewPool(workers int) (*Pool, error) {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	memo := newMemoCache()
	p := &Pool{schemas: make(chan *Schema, workers), workers: workers}
	for i := 0; i < workers; i++ {
		s, err := compile(memo)
		if err != nil {
			return nil, err
		}
		p.schemas <- s
	}
	return p, nil
}

// Workers returns the number of schemas the pool validates with.
func (p *Pool) Workers() int { return p.workers }

// With runs f with one of the pool's schemas, for callers that need a Schema directly.
func (p *Pool) With(f func(*Schema)) {
	s := <-p.schemas
	defer func() { p.schemas <- s }()
	f(s)
}

// ValidateFile is [Schema.ValidateFile], with the documents of the file parsed and validated in
// parallel. The documents of the result are released (see [manifests.Document.Release]): a stream of
// thousands of documents is validated in flat memory.
func (p *Pool) ValidateFile(filename string, data []byte, lim manifests.Limits) (*Result, error) {
	return p.ValidateFileWith(filename, data, lim, nil)
}

// Inspect is called on each document validated (checked tells whether karpool validates its
// kind), before the document is released, to keep what the caller needs of it.
type Inspect func(d *manifests.Document, fs Findings, checked bool) any

// ValidateFileWith is ValidateFile that keeps, in Result.Facts, what inspect returns for each
// document.
func (p *Pool) ValidateFileWith(filename string, data []byte, lim manifests.Limits, inspect Inspect) (*Result, error) {
	res := &Result{CheckedDocs: map[int]bool{}, Facts: map[int]any{}}
	chunks, err := manifests.Split(filename, data, lim)
	if err != nil {
		res.Findings = append(res.Findings, errorFinding(err.(*manifests.Error)))
		return res, nil
	}
	out := make([]chunkResult, len(chunks))
	p.parallel(len(chunks), func(s *Schema, i int) {
		r := s.validateChunk(filename, chunks[i], lim)
		if r.doc != nil {
			if inspect != nil {
				r.fact = inspect(r.doc, r.fs, r.checked)
			}
			r.doc.Release()
		}
		out[i] = r
	})
	for _, r := range out {
		res.addChunk(r)
	}
	return res, nil
}

// ValidateDocuments validates parsed documents in parallel, calls inspect (if not nil) on each,
// releases it, and calls add for each, in the order of docs.
func (p *Pool) ValidateDocuments(docs []*manifests.Document, lim manifests.Limits, inspect Inspect, add func(d *manifests.Document, fs Findings, checked bool, fact any)) {
	out := make([]chunkResult, len(docs))
	p.parallel(len(docs), func(s *Schema, i int) {
		fs, checked := s.ValidateDocument(docs[i], lim)
		r := chunkResult{doc: docs[i], fs: fs, checked: checked}
		if inspect != nil {
			r.fact = inspect(docs[i], fs, checked)
		}
		docs[i].Release()
		out[i] = r
	})
	for _, r := range out {
		add(r.doc, r.fs, r.checked, r.fact)
	}
}

// parallel calls f for 0..n-1 on the pool's workers.
func (p *Pool) parallel(n int, f func(s *Schema, i int)) {
	if n < 2 || p.workers == 1 {
		s := <-p.schemas
		defer func() { p.schemas <- s }()
		for i := 0; i < n; i++ {
			f(s, i)
		}
		return
	}
	next := make(chan int, 64)
	var wg sync.WaitGroup
	for w := 0; w < min(p.workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := <-p.schemas
			defer func() { p.schemas <- s }()
			for i := range next {
				f(s, i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

var (
	sharedOnce sync.Once
	shared     *Pool
	sharedErr  error
)

// ValidateDocuments checks every document of one YAML file (or stream) against the schema and
// returns one Finding per problem, all of them, each located in the file. Documents of other
// kinds are skipped. YAML that cannot be read, and input beyond [manifests.DefaultLimits], is reported as
// an error finding too; the error result is for failures of the validator itself.
//
// It compiles the schema on first use and is safe for concurrent use.
func ValidateDocuments(filename string, data []byte) (Findings, error) {
	sharedOnce.Do(func() { shared, sharedErr = NewPool(0) })
	if sharedErr != nil {
		return nil, sharedErr
	}
	res, err := shared.ValidateFile(filename, data, manifests.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return res.Findings, nil
}
