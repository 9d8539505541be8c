package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	module  = "github.com/karpool/karpool"
	testbed = module + "/testbed/"
)

// TestProductImportsNoTestbed: the simulators and test harnesses under testbed/ stay out of
// the product. Every package outside testbed/, hack/ and this command imports none of them,
// directly or not; in this command only `karpool up` and `karpool awssim` (up.go, awssim.go)
// may, so the controller, the CLI's other commands and every library build without them.
func TestProductImportsNoTestbed(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var product []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, testbed) && !strings.HasPrefix(p, module+"/hack/") && p != module+"/cmd/karpool" {
			product = append(product, p)
		}
	}
	deps, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, product...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(deps)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, testbed) && !strings.HasPrefix(fields[0], testbed) {
				t.Errorf("%s imports %s", fields[0], imp)
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, testbed) && !slices.Contains([]string{"up.go", "awssim.go"}, f) {
				t.Errorf("%s imports %s: only karpool up and karpool awssim may", f, path)
			}
		}
	}
}
