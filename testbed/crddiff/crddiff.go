// Package crddiff compares two CustomResourceDefinitions by what the API server enforces: names,
// scope, versions, printer columns and the OpenAPI schema with its defaults, enums, patterns,
// bounds and CEL rules. Descriptions and annotations are ignored, since they do not change which
// objects are accepted.
package crddiff

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Files loads two CRD manifests and returns their differences, sorted by path.
func Files(ours, reference string) ([]string, error) {
	a, err := load(ours)
	if err != nil {
		return nil, err
	}
	b, err := load(reference)
	if err != nil {
		return nil, err
	}
	return Compare(a, b), nil
}

func load(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// Compare returns "+ path = value" for leaves only in ours and "- path = value" for leaves only in
// the reference. Both documents are flattened to leaf paths first, so a moved rule shows as one
// removal and one addition at the exact place.
func Compare(ours, reference map[string]any) []string {
	a := flatten(enforced(ours))
	b := flatten(enforced(reference))
	var out []string
	for k, v := range b {
		if w, ok := a[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("- %s = %s", k, v))
		}
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("+ %s = %s", k, v))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][2:] == out[j][2:] {
			return out[i] < out[j]
		}
		return out[i][2:] < out[j][2:]
	})
	return out
}

// enforced keeps only spec, which holds everything the API server acts on.
func enforced(doc map[string]any) any {
	return doc["spec"]
}

func flatten(v any) map[string]string {
	out := map[string]string{}
	walk("", v, out)
	return out
}

func walk(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if k == "description" {
				continue
			}
			walk(path+"."+k, c, out)
		}
	case []any:
		// Lists of named things (versions, columns, validation rules) are keyed by name or rule
		// so that reordering is not reported as a change of every element.
		for i, c := range t {
			walk(path+"["+elementKey(i, c)+"]", c, out)
		}
	default:
		out[path] = fmt.Sprint(t)
	}
}

func elementKey(i int, v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	for _, k := range []string{"name", "rule", "jsonPath"} {
		if s, ok := m[k].(string); ok {
			return k + "=" + strings.ReplaceAll(s, "\n", " ")
		}
	}
	return fmt.Sprint(i)
}
