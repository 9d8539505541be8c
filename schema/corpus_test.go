package schema_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
)

// invalidCase is one file of testdata/invalid: a single document that breaks one rule, with the
// expectations in its leading comments:
//
//	# field: the field path the error must name (Kubernetes style; a finding may be more precise)
//	# want: text both the CUE schema and the API server must report
//	# want-cue: / # want-apiserver: text for one of them, when their wording differs
type invalidCase struct {
	File, Field, Want, WantCUE, WantAPIServer string
	// Also lists other fields the document is rightly reported on (# also:), as when the API
	// server reports the same document on several rules.
	Also []string
	Data []byte
}

func (c invalidCase) wantCUE() string {
	if c.WantCUE != "" {
		return c.WantCUE
	}
	return c.Want
}

func (c invalidCase) wantAPIServer() string {
	if c.WantAPIServer != "" {
		return c.WantAPIServer
	}
	return c.Want
}

func loadInvalidCorpus(t testing.TB) []invalidCase {
	t.Helper()
	files, err := filepath.Glob("testdata/invalid/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var cases []invalidCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := invalidCase{File: f, Data: data}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") {
				break
			}
			k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ": ")
			if !ok {
				continue
			}
			switch k {
			case "field":
				c.Field = v
			case "want":
				c.Want = v
			case "want-cue":
				c.WantCUE = v
			case "want-apiserver":
				c.WantAPIServer = v
			case "also":
				c.Also = append(c.Also, v)
			}
		}
		if c.Field == "" || c.wantCUE() == "" || c.wantAPIServer() == "" {
			t.Fatalf("%s: needs # field: and # want: (or # want-cue: and # want-apiserver:) comments", f)
		}
		cases = append(cases, c)
	}
	return cases
}

// underField reports whether path is field or a field inside it.
func underField(path, field string) bool {
	return path == field || strings.HasPrefix(path, field+".") || strings.HasPrefix(path, field+"[")
}

// TestInvalidCorpusRejectedBySchema: every document of testdata/invalid is rejected by the CUE
// schema with the rule's message, on the field the rule is about. The same files go to the API
// server in TestInvalidCorpusRejectedByAPIServer.
func TestInvalidCorpusRejectedBySchema(t *testing.T) {
	cases := loadInvalidCorpus(t)
	if len(cases) < 60 {
		t.Fatalf("only %d invalid documents", len(cases))
	}
	s, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(c.File, "testdata/invalid/"), ".yaml"), func(t *testing.T) {
			res, err := s.ValidateFile(c.File, c.Data, manifests.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != 1 {
				t.Fatalf("checked %d documents, want 1", res.Checked)
			}
			// Nothing else: a finding elsewhere would be a false alarm of one rule set off by another.
			for _, f := range res.Findings {
				if !underField(f.Path, c.Field) && !slices.ContainsFunc(c.Also, func(a string) bool { return underField(f.Path, a) }) {
					t.Errorf("unexpected finding %s", f)
				}
			}
			for _, f := range res.Findings {
				if f.Severity == schema.Error && underField(f.Path, c.Field) && strings.Contains(f.Message, c.wantCUE()) {
					if f.Line == 0 {
						t.Errorf("finding has no line: %v", f)
					}
					if strings.Contains(f.Message, "out of bound") || strings.Contains(f.Message, "must match the pattern") {
						t.Errorf("message not put in words: %v", f)
					}
					return
				}
			}
			var got []string
			for _, f := range res.Findings {
				got = append(got, f.String())
			}
			t.Errorf("want an error on %s containing %q; got:\n  %s", c.Field, c.wantCUE(), strings.Join(got, "\n  "))
		})
	}
}

func mustRead(t testing.TB, f string) []byte {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
