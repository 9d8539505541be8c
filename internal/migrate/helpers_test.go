package migrate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var seedDir = filepath.Join("..", "..", "examples", "seeds")

// migrateFiles runs Files over named inputs and fails the test on error diagnostics.
func migrateFiles(t *testing.T, inputs ...Input) *Result {
	t.Helper()
	r := Files(inputs)
	for _, d := range r.Diagnostics {
		if d.Severity == SeverityError {
			t.Errorf("unexpected error diagnostic: %s", d)
		}
	}
	return r
}

// migrateString migrates one file given as text.
func migrateString(t *testing.T, src string) (string, []Diagnostic) {
	t.Helper()
	r := migrateFiles(t, Input{Name: "in.yaml", Data: []byte(src)})
	return string(r.Outputs[0].Data), r.Diagnostics
}

func readFile(t testing.TB, path string) Input {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Name: path, Data: data}
}

// docs splits YAML into documents decoded as generic maps (empty documents skipped).
func docs(t testing.TB, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range rawDocs(t, data) {
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, raw)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func rawDocs(t testing.TB, data []byte) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("splitting output: %v", err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
}

// find returns the document with this kind and name.
func find(t testing.TB, ds []map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, d := range ds {
		if d["kind"] == kind && field(d, "metadata.name") == name {
			return d
		}
	}
	t.Fatalf("no %s %q in output", kind, name)
	return nil
}

// field follows a dotted path; [n] indexes lists. Keys containing dots are written in
// parentheses: metadata.labels.(karpenter.sh/discovery).
func field(obj any, path string) any {
	cur := obj
	for _, tok := range tokens(path) {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || idx >= len(c) {
				return nil
			}
			cur = c[idx]
		default:
			return nil
		}
	}
	return cur
}

func tokens(path string) []string {
	var out []string
	for path != "" {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '(':
			j := strings.IndexByte(path, ')')
			out = append(out, path[1:j])
			path = path[j+1:]
		case path[0] == '[':
			j := strings.IndexByte(path, ']')
			out = append(out, path[1:j])
			path = path[j+1:]
		default:
			j := strings.IndexAny(path, ".[")
			if j < 0 {
				j = len(path)
			}
			out = append(out, path[:j])
			path = path[j:]
		}
	}
	return out
}

// wantField checks one field value, comparing the YAML rendering of both sides.
func wantField(t *testing.T, obj map[string]any, path string, want any) {
	t.Helper()
	got := field(obj, path)
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s %v: %s = %s, want %s", obj["kind"], field(obj, "metadata.name"), path, strings.TrimSpace(string(g)), strings.TrimSpace(string(w)))
	}
}

// wantDiag checks that a diagnostic of this severity at file:line mentions every fragment.
func wantDiag(t *testing.T, diags []Diagnostic, sev Severity, file string, line int, fragments ...string) {
	t.Helper()
	for _, d := range diags {
		if d.Severity != sev || d.Line != line || (file != "" && d.File != file) {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(d.Message, f)
		}
		if ok {
			return
		}
	}
	var all []string
	for _, d := range diags {
		all = append(all, d.String())
	}
	t.Errorf("no %s at %s:%d mentioning %q; diagnostics:\n%s", sev, file, line, fragments, strings.Join(all, "\n"))
}

// errorsOf returns the error diagnostics.
func errorsOf(diags []Diagnostic) []Diagnostic {
	var out []Diagnostic
	for _, d := range diags {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}
