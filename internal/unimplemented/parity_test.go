package unimplemented

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

const (
	repoRoot  = "../.."
	parityDoc = repoRoot + "/docs/parity.md"
)

// parityCRDs are the kinds docs/parity.md has a table for, with the CRD that serves each.
var parityCRDs = map[string]string{
	"NodePool":     "config/crd/bases/karpenter.sh_nodepools.yaml",
	"NodeClaim":    "config/crd/bases/karpenter.sh_nodeclaims.yaml",
	"EC2NodeClass": "config/crd/bases/karpenter.k8s.aws_ec2nodeclasses.yaml",
	"NodeOverlay":  "config/crd/bases/karpenter.sh_nodeoverlays.yaml",
}

// TestParityTableCoversTheCRDs holds docs/parity.md to the CRDs karpool serves and to this
// package's lists. The rules, which the page follows:
//
//   - A heading "## <Kind>" (NodePool, NodeClaim, EC2NodeClass) starts that kind's table;
//     "## Feature gates" starts the gates' table. Rows are the table lines after the header.
//   - A row's first cell names fields as backticked paths from the object's root, with "[]"
//     after a list of objects: `spec.disruption.budgets[].nodes`. A path may end in {a,b,c},
//     which stands for the paths ending in a, b and c.
//   - The fields of a kind are the leaves of its CRD's spec: every property that has no
//     properties of its own (a string, number, boolean, map, or list of scalars); objects and
//     lists of objects are walked through. A leaf is covered by a row that names it or one of
//     its ancestors below spec (`spec.template.spec.taints` covers `...taints[].effect`). Every
//     leaf must be covered, and every path a row names must exist in the CRD.
//   - The second cell is "as Karpenter", "refused (not implemented)" or "partial: <why>",
//     optionally followed by more words. The row naming a Gaps entry's field says "refused"; a
//     row that says "refused" names a Gaps entry. A Gates entry's row does not say "as
//     Karpenter"; a gate row that says "refused" is a Gates entry.
//   - The third cell of every table on the page names tests as `TestName` (folder), where
//     folder is relative to the repository root and holds a _test.go file declaring
//     func TestName(; or it says "no test yet".
func TestParityTableCoversTheCRDs(t *testing.T) {
	tables := parityTables(t)
	for _, kind := range slices.Sorted(maps.Keys(parityCRDs)) {
		rows, ok := tables[kind]
		if !ok {
			t.Errorf("docs/parity.md has no section \"## %s\"", kind)
			continue
		}
		leaves, inner := crdFields(t, kind)
		named := map[string]parityRow{}
		for _, r := range rows {
			if len(r.fields) == 0 {
				t.Errorf("%s row %q names no backticked field", kind, r.line)
			}
			for _, f := range r.fields {
				if !leaves[f] && !inner[f] {
					t.Errorf("%s row names %s, which the CRD does not have", kind, f)
				}
				if _, dup := named[f]; dup {
					t.Errorf("%s: %s has two rows", kind, f)
				}
				named[f] = r
			}
			if !statusRE.MatchString(r.status) {
				t.Errorf("%s row for %s: status %q is not \"as Karpenter\", \"refused (not implemented)\" or \"partial: <why>\"", kind, strings.Join(r.fields, ", "), r.status)
			}
		}
		var missing []string
		for _, leaf := range slices.Sorted(maps.Keys(leaves)) {
			if _, ok := coveringRow(named, leaf); !ok {
				missing = append(missing, leaf)
			}
		}
		if len(missing) > 0 {
			t.Errorf("docs/parity.md has no %s row for:\n  %s", kind, strings.Join(missing, "\n  "))
		}
		gaps := map[string]bool{}
		for _, g := range Gaps {
			if g.Kind != kind {
				continue
			}
			gaps[g.Field()] = true
			r, ok := named[g.Field()]
			if !ok {
				t.Errorf("%s: the unimplemented field %s has no row of its own", kind, g.Field())
			} else if !strings.HasPrefix(r.status, "refused") {
				t.Errorf("%s: %s is in Gaps, but its row says %q; want \"refused (not implemented)\"", kind, g.Field(), r.status)
			}
		}
		for _, r := range rows {
			if !strings.HasPrefix(r.status, "refused") {
				continue
			}
			for _, f := range r.fields {
				if !gaps[f] {
					t.Errorf("%s: the row for %s says refused, but Gaps does not list it", kind, f)
				}
			}
		}
	}

	gates, ok := tables["Feature gates"]
	if !ok {
		t.Error("docs/parity.md has no section \"## Feature gates\"")
	}
	gateRows := map[string]parityRow{}
	for _, r := range gates {
		for _, f := range r.fields {
			gateRows[f] = r
		}
		if !statusRE.MatchString(r.status) {
			t.Errorf("gate row %q: status %q is not \"as Karpenter\", \"refused ...\" or \"partial: ...\"", r.line, r.status)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(Gates)) {
		r, ok := gateRows[name]
		switch {
		case !ok:
			t.Errorf("docs/parity.md has no row for the feature gate %s", name)
		case strings.HasPrefix(r.status, "as Karpenter"):
			t.Errorf("gate %s is in Gates, but its row says %q", name, r.status)
		}
	}
	for name, r := range gateRows {
		if _, ok := Gates[name]; strings.HasPrefix(r.status, "refused") && !ok {
			t.Errorf("the row for gate %s says refused, but Gates does not list it", name)
		}
	}

	// Every test cell on the page, in every table.
	for section, rows := range tables {
		for _, r := range rows {
			refs := testRefRE.FindAllStringSubmatch(r.shownBy, -1)
			if len(refs) == 0 && !strings.Contains(r.shownBy, "no test yet") {
				t.Errorf("%s row %q: the last cell names no `TestName` (folder) and does not say \"no test yet\"", section, r.line)
			}
			for _, ref := range refs {
				if !testExists(t, ref[1], ref[2]) {
					t.Errorf("%s row %q names %s in %s, which has no func %s( in its _test.go files", section, r.line, ref[1], ref[2], ref[1])
				}
			}
		}
	}
}

// TestParityGapsAreReported: each field of Gaps, set to a value built from its CRD schema, is
// reported False by the FieldsHonored condition of the typed object, so the Go type carries the
// field and the status names it. The refused rows of docs/parity.md cite this test.
func TestParityGapsAreReported(t *testing.T) {
	for _, g := range Gaps {
		schema := crdSpecSchema(t, g.Kind)
		node := schema
		for _, k := range g.Path[1:] {
			props, _ := node["properties"].(map[string]any)
			next, ok := props[k].(map[string]any)
			if !ok {
				t.Fatalf("%s: the CRD has no %s", g.Kind, g.Field())
			}
			node = next
		}
		obj := map[string]any{"metadata": map[string]any{"name": "x"}}
		cur := obj
		for i, k := range g.Path {
			if i == len(g.Path)-1 {
				cur[k] = sampleValue(node)
				if g.Value != "" {
					cur[k] = g.Value
				}
				break
			}
			m := map[string]any{}
			cur[k] = m
			cur = m
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var typed runtime.Object
		switch g.Kind {
		case "NodePool":
			typed = &karpv1.NodePool{}
		case "EC2NodeClass":
			typed = &awsv1.EC2NodeClass{}
		case "NodeOverlay":
			typed = &v1alpha1.NodeOverlay{}
		default:
			t.Fatalf("Gaps names kind %s; this test knows NodePool, EC2NodeClass and NodeOverlay", g.Kind)
		}
		if err := json.Unmarshal(raw, typed); err != nil {
			t.Fatalf("%s %s = %s: %v", g.Kind, g.Field(), raw, err)
		}
		c := Condition(g.Kind, typed, 1)
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, g.Subject()+" is not implemented") {
			t.Errorf("%s with %s: FieldsHonored %+v, want False naming %s", g.Kind, raw, c, g.Field())
		}
	}
}

type parityRow struct {
	line            string
	fields          []string
	status, shownBy string
}

var (
	statusRE  = regexp.MustCompile(`^(as Karpenter|refused \(not implemented\)|partial: \S)`)
	testRefRE = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)\\w+)` \\(([\\w./-]+)\\)")
	fieldRE   = regexp.MustCompile("`([^`]+)`")
)

// parityTables reads docs/parity.md's tables by section heading. A test cell naming several
// tests before one folder ("`TestA`, `TestB` (dir)") is expanded to one reference per test.
func parityTables(t *testing.T) map[string][]parityRow {
	t.Helper()
	data, err := os.ReadFile(parityDoc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]parityRow{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = strings.TrimSpace(h)
			continue
		}
		if section == "" || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 {
			t.Errorf("docs/parity.md, %s: row %q has %d cells, want 3", section, line, len(cells))
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") || !strings.Contains(cells[0], "`") {
			continue // the header and its rule
		}
		r := parityRow{line: line, status: cells[1], shownBy: expandTestRefs(cells[2])}
		for _, m := range fieldRE.FindAllStringSubmatch(cells[0], -1) {
			r.fields = append(r.fields, expandBraces(m[1])...)
		}
		out[section] = append(out[section], r)
	}
	return out
}

// expandTestRefs rewrites "`TestA`, `TestB` (dir)" as "`TestA` (dir), `TestB` (dir)".
func expandTestRefs(cell string) string {
	group := regexp.MustCompile("((?:`\\w+`, )+)`(\\w+)` \\(([\\w./-]+)\\)")
	return group.ReplaceAllStringFunc(cell, func(s string) string {
		m := group.FindStringSubmatch(s)
		var parts []string
		for _, n := range fieldRE.FindAllStringSubmatch(m[1], -1) {
			parts = append(parts, fmt.Sprintf("`%s` (%s)", n[1], m[3]))
		}
		parts = append(parts, fmt.Sprintf("`%s` (%s)", m[2], m[3]))
		return strings.Join(parts, ", ")
	})
}

// expandBraces turns "a.b.{c,d}" into "a.b.c" and "a.b.d".
func expandBraces(p string) []string {
	i := strings.Index(p, "{")
	if i < 0 || !strings.HasSuffix(p, "}") {
		return []string{p}
	}
	var out []string
	for _, name := range strings.Split(p[i+1:len(p)-1], ",") {
		out = append(out, p[:i]+strings.TrimSpace(name))
	}
	return out
}

// coveringRow is the row naming the field or its nearest ancestor below spec.
func coveringRow(named map[string]parityRow, field string) (parityRow, bool) {
	for p := field; p != "spec" && p != ""; p = parent(p) {
		if r, ok := named[p]; ok {
			return r, true
		}
	}
	return parityRow{}, false
}

// parent drops a path's last step: "a.b[].c" → "a.b", "a.b" → "a".
func parent(p string) string {
	i := strings.LastIndex(p, ".")
	if i < 0 {
		return ""
	}
	return strings.TrimSuffix(p[:i], "[]")
}

// crdSpecSchema is the openAPIV3Schema of the kind's spec, in its served version.
func crdSpecSchema(t *testing.T, kind string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, parityCRDs[kind]))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name    string `json:"name"`
				Served  bool   `json:"served"`
				Storage bool   `json:"storage"`
				Schema  struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", parityCRDs[kind], err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || !v.Storage {
			continue
		}
		props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
		if spec, ok := props["spec"].(map[string]any); ok {
			return spec
		}
	}
	t.Fatalf("%s: no served storage version with a spec", parityCRDs[kind])
	return nil
}

// crdFields walks the kind's spec: leaves (fields a row must cover) and inner nodes (objects
// and lists of objects a row may name for all their leaves).
func crdFields(t *testing.T, kind string) (leaves, inner map[string]bool) {
	leaves, inner = map[string]bool{}, map[string]bool{}
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if s["type"] == "array" {
			if items, ok := s["items"].(map[string]any); ok {
				if props, ok := items["properties"].(map[string]any); ok && len(props) > 0 {
					inner[path] = true
					for k, c := range props {
						walk(path+"[]."+k, c.(map[string]any))
					}
					return
				}
			}
		}
		if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
			inner[path] = true
			for k, c := range props {
				walk(path+"."+k, c.(map[string]any))
			}
			return
		}
		leaves[path] = true
	}
	walk("spec", crdSpecSchema(t, kind))
	delete(inner, "spec")
	return leaves, inner
}

// sampleValue is a small value the schema describes: an object's first property (sorted),
// a list of one sample item, a map of one entry, an enum's first value, an integer's minimum.
func sampleValue(s map[string]any) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch s["type"] {
	case "object":
		if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
			keys := slices.Sorted(maps.Keys(props))
			if req, ok := s["required"].([]any); ok && len(req) > 0 {
				keys = nil
				for _, r := range req {
					keys = append(keys, r.(string))
				}
				sort.Strings(keys)
			} else {
				keys = keys[:1]
			}
			out := map[string]any{}
			for _, k := range keys {
				out[k] = sampleValue(props[k].(map[string]any))
			}
			return out
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			return map[string]any{"k": sampleValue(ap)}
		}
		return map[string]any{"k": "v"}
	case "array":
		items, _ := s["items"].(map[string]any)
		return []any{sampleValue(items)}
	case "integer", "number":
		if m, ok := s["minimum"].(float64); ok && m > 0 {
			return m
		}
		return 1
	case "boolean":
		return true
	}
	return "1m" // reads as a string, a duration and a quantity
}

var testFuncs = map[string]map[string]bool{}

// testExists reports whether a _test.go file of dir (from the repository root) declares name.
func testExists(t *testing.T, name, dir string) bool {
	t.Helper()
	funcs, ok := testFuncs[dir]
	if !ok {
		funcs = map[string]bool{}
		files, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*_test.go"))
		decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range decl.FindAllStringSubmatch(string(data), -1) {
				funcs[m[1]] = true
			}
		}
		testFuncs[dir] = funcs
	}
	return funcs[name]
}
