package schema_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterv1alpha1 "github.com/karpool/karpool/api/karpenter/v1alpha1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/config/crd"
	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
)

// validDocument is one document of testdata/valid that the schema checks.
type validDocument struct {
	name       string // file#index
	apiVersion string
	kind       string
	data       []byte // the document as JSON, as written
	unified    []byte // the document unified with the schema (defaults filled in), as JSON
}

func loadValidCorpus(t *testing.T, s *schema.Schema) []validDocument {
	t.Helper()
	var files []string
	for _, pattern := range []string{"testdata/valid/*.yaml", "testdata/valid/*/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	var docs []validDocument
	for _, f := range files {
		data := mustRead(t, f)
		res, err := s.ValidateFile(f, data, manifests.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range res.Findings {
			// Warnings (seed 002's placeholder instance profile) do not reject a document.
			if fd.Severity == schema.Error {
				t.Errorf("valid document rejected: %s", fd)
			}
		}
		for _, d := range res.Documents {
			if !schema.Known(d.APIVersion, d.Kind) || !res.CheckedDocs[d.Index] {
				continue
			}
			v, err := s.Unified(d, manifests.DefaultLimits)
			if err != nil {
				t.Fatalf("%s#%d: %v", f, d.Index, err)
			}
			unified, err := v.MarshalJSON()
			if err != nil {
				t.Fatalf("%s#%d: %v", f, d.Index, err)
			}
			obj, err := d.Object(manifests.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("%s#%d: %v", f, d.Index, err)
			}
			docs = append(docs, validDocument{fmt.Sprintf("%s#%d", f, d.Index), d.APIVersion, d.Kind, raw, unified})
		}
	}
	return docs
}

// TestValidCorpusAgrees decodes every document of testdata/valid (the workshop example and the v1
// seed 002 among them) three ways and compares:
//
//   - the CUE schema accepts it, and `cue export` of the document unified with the schema (the
//     schema's defaults filled in) equals the document defaulted the way the API server does it,
//     from our generated CRD's structural schema;
//   - the Go types of api/ decode it strictly (no unknown fields), and encoding the Go value
//     again keeps every value of the document.
func TestValidCorpusAgrees(t *testing.T) {
	s, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	structural := crdSchemas(t)
	docs := loadValidCorpus(t, s)
	kinds := map[string]int{}
	for _, d := range docs {
		kinds[d.kind]++
		t.Run(d.name, func(t *testing.T) {
			// CUE defaults = CRD defaults.
			var want map[string]any
			if err := json.Unmarshal(d.data, &want); err != nil {
				t.Fatal(err)
			}
			ss, ok := structural[d.apiVersion+"|"+d.kind]
			if !ok {
				t.Fatalf("no CRD for %s %s", d.apiVersion, d.kind)
			}
			defaulting.Default(want, ss)
			want = normalize(t, want) // the defaulter writes int64, JSON decoding float64
			var got map[string]any
			if err := json.Unmarshal(d.unified, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cue export differs from the API server's defaulting:\n cue: %s\n crd: %s", mustJSON(got), mustJSON(want))
			}

			// Go types: strict decoding, and no value lost on the way back.
			typed, err := newTyped(d.kind)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(d.data, typed); err != nil {
				t.Fatalf("Go types reject a document the schema accepts: %v", err)
			}
			back, err := json.Marshal(typed)
			if err != nil {
				t.Fatal(err)
			}
			var orig, round any
			_ = json.Unmarshal(d.data, &orig)
			_ = json.Unmarshal(back, &round)
			for _, diff := range lostValues("", orig, round) {
				t.Errorf("the Go types lose %s", diff)
			}
		})
	}
	for _, k := range []string{"NodePool", "EC2NodeClass", "NodeClaim", "NodeOverlay", "PoolSync"} {
		if kinds[k] == 0 {
			t.Errorf("the valid corpus has no %s", k)
		}
	}
}

func newTyped(kind string) (any, error) {
	switch kind {
	case "NodePool":
		return &karpenterv1.NodePool{}, nil
	case "NodeClaim":
		return &karpenterv1.NodeClaim{}, nil
	case "NodeOverlay":
		return &karpenterv1alpha1.NodeOverlay{}, nil
	case "EC2NodeClass":
		return &karpenterawsv1.EC2NodeClass{}, nil
	case "PoolSync":
		return &karpoolv1alpha1.PoolSync{}, nil
	}
	return nil, fmt.Errorf("no Go type for %s", kind)
}

// crdSchemas returns the structural schema of each CRD in config/crd/bases, by apiVersion|kind.
func crdSchemas(t *testing.T) map[string]*structuralschema.Structural {
	t.Helper()
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*structuralschema.Structural{}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			internal := &apiextensionsinternal.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				t.Fatal(err)
			}
			ss, err := structuralschema.NewStructural(internal)
			if err != nil {
				t.Fatal(err)
			}
			out[c.Spec.Group+"/"+v.Name+"|"+c.Spec.Names.Kind] = ss
		}
	}
	return out
}

// lostValues lists the leaves of orig that round does not hold with an equal value. Quantities
// and durations may be re-spelled by the Go types (1000 -> 1k, 1m -> 1m0s); they compare by value.
func lostValues(path string, orig, round any) []string {
	switch o := orig.(type) {
	case map[string]any:
		r, _ := round.(map[string]any)
		var out []string
		for k, v := range o {
			out = append(out, lostValues(path+"."+k, v, r[k])...)
		}
		return out
	case []any:
		r, _ := round.([]any)
		if len(r) != len(o) {
			return []string{fmt.Sprintf("%s: %d items became %d", path, len(o), len(r))}
		}
		var out []string
		for i := range o {
			out = append(out, lostValues(fmt.Sprintf("%s[%d]", path, i), o[i], r[i])...)
		}
		return out
	}
	if sameValue(orig, round) {
		return nil
	}
	return []string{fmt.Sprintf("%s: %v became %v", path, orig, round)}
}

func sameValue(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	as, bs := fmt.Sprint(a), fmt.Sprint(b)
	if b == nil {
		// omitempty drops zero values (false, 0, "") that carry no information.
		return a == false || a == float64(0) || a == ""
	}
	if qa, err := resource.ParseQuantity(as); err == nil {
		if qb, err := resource.ParseQuantity(bs); err == nil {
			return qa.Cmp(qb) == 0
		}
	}
	if da, err := time.ParseDuration(as); err == nil {
		if db, err := time.ParseDuration(bs); err == nil {
			return da == db
		}
	}
	if ta, err := time.Parse(time.RFC3339, as); err == nil {
		if tb, err := time.Parse(time.RFC3339, bs); err == nil {
			return ta.Equal(tb)
		}
	}
	return strings.EqualFold(as, bs) && as == bs
}

func normalize(t *testing.T, v map[string]any) map[string]any {
	var out map[string]any
	if err := json.Unmarshal([]byte(mustJSON(v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
