package review

import (
	"sort"

	"github.com/pmezard/go-difflib/difflib"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/karpool/karpool/manifests/build"
)

// ObjectChange is one rendered object that the change adds, removes or changes.
type ObjectChange struct {
	// ID is Kind/name or Kind/namespace/name.
	ID string `json:"id"`
	// Change is "add", "remove" or "change".
	Change string `json:"change"`
	// Diff is a unified diff of the object's YAML as it would be applied.
	Diff string `json:"diff"`
}

// diffObjects compares two builds object by object (group, kind, namespace and name), in ID
// order.
func diffObjects(base, head []*build.Object) []ObjectChange {
	before, after := rendered(base), rendered(head)
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	var out []ObjectChange
	for k := range keys {
		b, a := before[k], after[k]
		if b.yaml == a.yaml {
			continue
		}
		c := ObjectChange{ID: a.id, Change: "change"}
		switch {
		case b.id == "":
			c.Change = "add"
		case a.id == "":
			c.ID, c.Change = b.id, "remove"
		}
		c.Diff, _ = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(b.yaml), B: difflib.SplitLines(a.yaml),
			FromFile: "base/" + c.ID, ToFile: "head/" + c.ID, Context: 3,
		})
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

type renderedObject struct{ id, yaml string }

func rendered(objs []*build.Object) map[string]renderedObject {
	out := make(map[string]renderedObject, len(objs))
	for _, o := range objs {
		data, err := sigsyaml.Marshal(o.Object.Object)
		if err != nil {
			continue // built objects came from YAML; they render
		}
		out[o.Object.GroupVersionKind().Group+"/"+o.ID()] = renderedObject{id: o.ID(), yaml: string(data)}
	}
	return out
}
