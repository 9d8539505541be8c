package schema_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpool/karpool/schema"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

// TestInvalidCorpusRejectedByAPIServer sends every document of testdata/invalid to the real API
// server with our CRDs (server-side dry run, strict field validation as kubectl applies), and
// expects a rejection naming the field, with the rule's message. The CUE side of the same files
// is TestInvalidCorpusRejectedBySchema; together they show the schema and the CRDs agree.
//
// The valid corpus goes first: if the server rejected those, the rejections below could be for
// the wrong reason.
func TestInvalidCorpusRejectedByAPIServer(t *testing.T) {
	c, err := localenvtest.Env(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	create := func(data []byte) error {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatal(err)
		}
		return c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
	}

	s, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range loadValidCorpus(t, s) {
		if err := create(d.data); err != nil {
			t.Errorf("valid %s rejected by the API server: %v", d.name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	cases := loadInvalidCorpus(t)
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(tc.File, "testdata/invalid/"), ".yaml"), func(t *testing.T) {
			err := create(tc.Data)
			if err == nil {
				t.Fatalf("accepted; want a rejection of %s with %q", tc.Field, tc.wantAPIServer())
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantAPIServer()) {
				t.Errorf("rejected with\n  %v\nwant a message containing\n  %q", msg, tc.wantAPIServer())
			}
			if !strings.Contains(msg, tc.Field) {
				t.Errorf("rejected with\n  %v\nwhich does not name the field %s", msg, tc.Field)
			}
		})
	}
}
