// Package vet is `karpool vet`: it validates the NodePools, EC2NodeClasses, NodeClaims and
// PoolSyncs of files, directories, kustomizations and stdin against the schema, checks them
// against each other (references, duplicates, overlapping pools) and lints them, and reports
// every problem at once with its position in the user's files.
package vet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
)

// Options configure a run.
type Options struct {
	// AllowExternalRefs accepts nodeClassRefs to EC2NodeClasses that are not among the inputs
	// (applied from elsewhere).
	AllowExternalRefs bool
	// Strict turns warnings (the lints) into errors.
	Strict bool
	// Limits bound the input; zero fields take manifests.DefaultLimits.
	Limits manifests.Limits
	// Workers is the number of documents validated in parallel; 0 means one per CPU.
	Workers int
	// Stdin is read for the path "-".
	Stdin io.Reader
	// Pool validates; nil compiles one (with Workers schemas).
	Pool *schema.Pool
}

func (o Options) limits() manifests.Limits {
	l := o.Limits
	d := manifests.DefaultLimits
	if l.MaxBytes == 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxNodes == 0 {
		l.MaxNodes = d.MaxNodes
	}
	if l.MaxDocuments == 0 {
		l.MaxDocuments = d.MaxDocuments
	}
	return l
}

// Report is the outcome of a run.
type Report struct {
	Findings schema.Findings `json:"findings"`
	// Files counts the files read (kustomization trees count their sources).
	Files int `json:"files"`
	// Checked counts the documents validated; Skipped those of other kinds.
	Checked int `json:"checked"`
	Skipped int `json:"skipped"`
}

// Errors counts error findings.
func (r *Report) Errors() int { return r.Findings.Errors() }

// Warnings counts warning findings.
func (r *Report) Warnings() int { return r.Findings.Warnings() }

// InputError is a problem with the invocation or the file system (a missing path, an unreadable
// file), as opposed to a problem found in the input; `karpool vet` exits 2 for it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// unit is a set of documents checked against each other: one kustomize build, or all plain files
// and stdin of a run.
type unit struct {
	docs []*doc
}

// doc is one document of a unit, with where to report its findings.
type doc struct {
	*manifests.Document
	// relocate maps a finding on the document to the source file (for kustomize output).
	relocate func(schema.Finding) schema.Finding
	facts    *facts
}

// at returns a finding location at path of the document, in its source file.
func (d *doc) at(path []string) schema.Finding {
	f := schema.At(d.Document, path, schema.Error, "", "", "")
	if d.relocate != nil {
		f = d.relocate(f)
	}
	return f
}

// Run vets paths: files, directories (their *.yaml and *.yml files, recursively, and every
// kustomization in them built), and "-" for stdin.
func Run(ctx context.Context, paths []string, opts Options) (*Report, error) {
	if len(paths) == 0 {
		return nil, &InputError{errors.New("no input: give files, directories, or - for stdin")}
	}
	pool := opts.Pool
	if pool == nil {
		var err error
		if pool, err = schema.NewPool(opts.Workers); err != nil {
			return nil, err
		}
	}
	r := &runner{ctx: ctx, opts: opts, lim: opts.limits(), pool: pool, report: &Report{}, plain: &unit{}}
	for _, p := range paths {
		if err := r.input(p); err != nil {
			return nil, err
		}
	}
	r.finish()
	return r.report, nil
}

// CheckBytes vets one YAML stream (a file's content; filename is used in findings), with the
// cross-document checks among its documents. It is the entry point for tools that produce
// manifests and want them checked, such as `karpool migrate`.
func CheckBytes(filename string, data []byte, opts Options) (*Report, error) {
	pool := opts.Pool
	if pool == nil {
		var err error
		if pool, err = schema.NewPool(opts.Workers); err != nil {
			return nil, err
		}
	}
	r := &runner{ctx: context.Background(), opts: opts, lim: opts.limits(), pool: pool, report: &Report{}, plain: &unit{}}
	r.stream(filename, data, r.plain, nil)
	r.finish()
	return r.report, nil
}

type runner struct {
	ctx    context.Context
	opts   Options
	lim    manifests.Limits
	pool   *schema.Pool
	report *Report
	plain  *unit
	units  []*unit
	seen   map[string]bool // files already read, by absolute path
	stdin  bool
}

func (r *runner) input(p string) error {
	if p == "-" {
		if r.stdin {
			return &InputError{errors.New("- (stdin) given twice")}
		}
		r.stdin = true
		in := r.opts.Stdin
		if in == nil {
			in = os.Stdin
		}
		data, err := readCapped(in, r.lim.MaxBytes)
		if err != nil && !errors.Is(err, errTooBig) {
			return &InputError{fmt.Errorf("reading stdin: %w", err)}
		}
		r.stream("<stdin>", data, r.plain, err)
		return nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return &InputError{fmt.Errorf("%s: %w", p, unwrapPathError(err))}
	}
	if !info.IsDir() {
		return r.file(p)
	}
	top, err := filepath.Abs(p)
	if err != nil {
		return &InputError{err}
	}
	if k := kustomizationIn(p); k != "" {
		return r.kustomize(p, top)
	}
	return filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return &InputError{fmt.Errorf("%s: %w", path, unwrapPathError(err))}
		}
		if e.IsDir() {
			if path != p && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" || e.Name() == "vendor") {
				return filepath.SkipDir
			}
			if path != p && kustomizationIn(path) != "" {
				if err := r.kustomize(path, top); err != nil {
					return err
				}
				return filepath.SkipDir
			}
			return nil
		}
		if ext := strings.ToLower(filepath.Ext(path)); (ext == ".yaml" || ext == ".yml") && e.Type().IsRegular() {
			return r.file(path)
		}
		return nil
	})
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (r *runner) file(p string) error {
	if abs, err := filepath.Abs(p); err == nil {
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		if r.seen[abs] {
			return nil
		}
		r.seen[abs] = true
	}
	f, err := os.Open(p)
	if err != nil {
		return &InputError{fmt.Errorf("%s: %w", p, unwrapPathError(err))}
	}
	defer f.Close()
	data, err := readCapped(f, r.lim.MaxBytes)
	if err != nil && !errors.Is(err, errTooBig) {
		return &InputError{fmt.Errorf("%s: %w", p, unwrapPathError(err))}
	}
	r.stream(p, data, r.plain, err)
	return nil
}

var errTooBig = errors.New("too big")

// readCapped reads at most max+1 bytes; more than max is errTooBig (with the data cut).
func readCapped(in io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(in, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return data[:max], errTooBig
	}
	return data, nil
}

// stream validates the documents of one YAML stream and adds them to u.
func (r *runner) stream(name string, data []byte, u *unit, readErr error) {
	r.report.Files++
	if errors.Is(readErr, errTooBig) {
		r.report.Findings = append(r.report.Findings, schema.Finding{Severity: schema.Error, Rule: "limits", File: name,
			Message: fmt.Sprintf("file is larger than %d bytes; refusing to read it", r.lim.MaxBytes),
			Hint:    "raise the limit with --max-file-size if the file is meant to be this big"})
		return
	}
	res, err := r.pool.ValidateFileWith(name, data, r.lim, inspect(r.lim))
	if err != nil {
		r.report.Findings = append(r.report.Findings, schema.Finding{Severity: schema.Error, Rule: "internal", File: name, Message: err.Error()})
		return
	}
	r.report.Findings = append(r.report.Findings, res.Findings...)
	r.report.Checked += res.Checked
	r.report.Skipped += res.Skipped
	for _, d := range res.Documents {
		if f, ok := res.Facts[d.Index].(*facts); ok {
			u.docs = append(u.docs, &doc{Document: d, facts: f})
		}
	}
}

// finish runs the cross-document checks and lints, and orders the findings.
func (r *runner) finish() {
	for _, u := range append([]*unit{r.plain}, r.units...) {
		r.report.Findings = append(r.report.Findings, crossChecks(u, r.opts)...)
	}
	if r.opts.Strict {
		for i := range r.report.Findings {
			r.report.Findings[i].Severity = schema.Error
		}
	}
	r.report.Findings = dedupe(r.report.Findings)
	r.report.Findings.Sort()
}

// dedupe drops repeated findings: a base shared by two overlays is reported once.
func dedupe(fs schema.Findings) schema.Findings {
	seen := map[string]bool{}
	out := fs[:0]
	for _, f := range fs {
		k := fmt.Sprintf("%s\x00%d\x00%d\x00%s\x00%s\x00%s", f.File, f.Line, f.Column, f.Path, f.Message, f.Severity)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, f)
	}
	return out
}

// Summary is the one-line account of a report.
func (r *Report) Summary() string {
	var b bytes.Buffer
	e, w := r.Errors(), r.Warnings()
	switch {
	case e == 0 && w == 0:
		b.WriteString("no problems")
	default:
		parts := []string{}
		if e > 0 {
			parts = append(parts, plural(e, "error"))
		}
		if w > 0 {
			parts = append(parts, plural(w, "warning"))
		}
		b.WriteString(strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, " in %s: %s checked", plural(r.Files, "file"), plural(r.Checked, "document"))
	if r.Skipped > 0 {
		fmt.Fprintf(&b, ", %d of other kinds skipped", r.Skipped)
	}
	return b.String()
}

func plural(n int, s string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, s)
	}
	return fmt.Sprintf("%d %ss", n, s)
}
