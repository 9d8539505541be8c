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

// TestLayers: the top-level folders import downwards only. The manifest pipeline (manifests/,
// schema/) sits below both halves and imports neither; the autoscaler never imports the
// reconciler (the reconciler uses the engine for plans and status, one way).
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	below := map[string][]string{ // folder: the folders it may not import
		"manifests":  {"autoscaler", "reconciler", "cmd", "testbed", "internal/operator"},
		"schema":     {"autoscaler", "reconciler", "cmd", "testbed", "internal/operator"},
		"autoscaler": {"reconciler", "cmd", "internal/operator"},
		"api":        {"autoscaler", "reconciler", "manifests", "schema", "cmd", "testbed", "internal"},
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok {
			continue
		}
		for folder, banned := range below {
			if pkg != folder && !strings.HasPrefix(pkg, folder+"/") {
				continue
			}
			for _, imp := range fields[1:] {
				imp, ok := strings.CutPrefix(imp, module+"/")
				if !ok {
					continue
				}
				for _, b := range banned {
					if imp == b || strings.HasPrefix(imp, b+"/") {
						t.Errorf("%s imports %s: %s/ sits below %s/", pkg, imp, folder, b)
					}
				}
			}
		}
	}
}
