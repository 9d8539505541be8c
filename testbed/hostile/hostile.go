// Package hostile is a corpus of hostile pools repositories and the trap they reach for, for
// the tests that prove a branch or a fork's pull request can make karpool run nothing, fetch
// nothing, read nothing outside its repository and exhaust nothing (SECURITY.md).
//
// Each case is a directory of corpus/: its repository's files, and case.yaml saying what it
// attacks and which error (file, line, message) karpool must answer with. Files may name the
// trap: {{ADDR}} (a 127.0.0.1 listener that counts connections and never answers), {{GITREPO}}
// (a local Git repository) and {{SCRIPT}} (a program that leaves a marker when run, for git's
// --upload-pack), and {{OUTSIDE}} (a secret file outside every repository, watched for opens).
// Cases get the files of corpus/_base where they have none of their own.
package hostile

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

//go:embed all:corpus
var corpus embed.FS

// Case is one hostile repository.
type Case struct {
	// Name is the case's directory; Class what it attacks (exec, ssrf, outside, dos, markdown,
	// iam, yaml), About how.
	Name, Class, About string
	// Path is the directory a PoolSync, vet and plan build (spec.path).
	Path string
	// Files are the repository's files with the trap's addresses filled in; Symlinks are links
	// to create (path → target).
	Files    map[string][]byte
	Symlinks map[string]string
	// Want is the error karpool must answer with.
	Want Want
	// VetAccepts: `karpool vet` rightly accepts the repository (what is wrong is in a workload,
	// which only simulate and plan read).
	VetAccepts bool
}

// Want is an error at a file (relative to the repository's root) and line, whose message
// holds Message.
type Want struct {
	File    string `yaml:"file"`
	Line    int    `yaml:"line"`
	Message string `yaml:"message"`
}

// Where is the error's position as karpool prints it: file:line, or file.
func (w Want) Where() string {
	if w.Line == 0 {
		return w.File
	}
	return fmt.Sprintf("%s:%d:", w.File, w.Line)
}

type caseFile struct {
	Class    string            `yaml:"class"`
	About    string            `yaml:"about"`
	Path     string            `yaml:"path"`
	Want     Want              `yaml:"want"`
	Vet      string            `yaml:"vet"`
	Symlinks map[string]string `yaml:"symlinks"`
	// Rename gives files names a Go module may not hold (<, >, :...).
	Rename   map[string]string `yaml:"rename"`
	Generate *struct {
		File  string `yaml:"file"`
		Bytes int    `yaml:"bytes"`
		Pools int    `yaml:"pools"`
	} `yaml:"generate"`
}

// Cases reads the corpus with the trap's addresses filled in.
func Cases(t *Trap) ([]Case, error) {
	base, err := files("corpus/_base", nil)
	if err != nil {
		return nil, err
	}
	entries, err := corpus.ReadDir("corpus")
	if err != nil {
		return nil, err
	}
	var out []Case
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		c, err := readCase(e.Name(), base, t.fill)
		if err != nil {
			return nil, fmt.Errorf("corpus/%s: %w", e.Name(), err)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func readCase(name string, base map[string][]byte, fill func(string) string) (Case, error) {
	dir := "corpus/" + name
	data, err := corpus.ReadFile(dir + "/case.yaml")
	if err != nil {
		return Case{}, err
	}
	var cf caseFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		return Case{}, fmt.Errorf("case.yaml: %w", err)
	}
	own, err := files(dir, fill)
	if err != nil {
		return Case{}, err
	}
	delete(own, "case.yaml")
	for p, d := range base {
		if _, ok := own[p]; !ok {
			own[p] = d
		}
	}
	c := Case{Name: name, Class: cf.Class, About: cf.About, Path: cf.Path, Files: own, Want: cf.Want,
		VetAccepts: cf.Vet == "accepts", Symlinks: map[string]string{}}
	for p, target := range cf.Symlinks {
		c.Symlinks[p] = fill(target)
	}
	for from, to := range cf.Rename {
		c.Files[to] = c.Files[from]
		delete(c.Files, from)
	}
	if g := cf.Generate; g != nil {
		c.Files[g.File] = generated(g.Bytes, g.Pools)
	}
	return c, nil
}

// files reads a directory of the corpus, by path relative to it.
func files(dir string, fill func(string) string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(corpus, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := corpus.ReadFile(p)
		if err != nil {
			return err
		}
		if fill != nil {
			data = []byte(fill(string(data)))
		}
		out[strings.TrimPrefix(p, dir+"/")] = data
		return nil
	})
	return out, err
}

// generated is a file too large to keep in the corpus: bytes of YAML comments, or that many
// NodePools.
func generated(bytes, pools int) []byte {
	var b strings.Builder
	for i := 0; i < pools; i++ {
		fmt.Fprintf(&b, "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: pool-%d}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]\n", i)
	}
	line := "# " + strings.Repeat("x", 61) + "\n"
	for b.Len() < bytes {
		b.WriteString(line)
	}
	return []byte(b.String())
}

// Names lists the case names, for messages.
func Names(cs []Case) string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}

// clean is a relative slash path without .. for writing a case's file.
func clean(p string) (string, error) {
	c := path.Clean(p)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%s leaves the case's directory", p)
	}
	return c, nil
}
