package validate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: %s
          values: ["amd64"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  %s
`

func objects(t *testing.T, files map[string]string) []*build.Object {
	t.Helper()
	m := map[string][]byte{}
	for k, v := range files {
		m[k] = []byte(v)
	}
	objs, err := build.Build(context.Background(), m, "")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func strs(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

func poolWith(name, operator, extra string) string {
	return fmt.Sprintf(pool, name, operator, extra)
}

func TestTypesRejectsUnknownFieldsAndOldVersions(t *testing.T) {
	objs := objects(t, map[string]string{
		"pools/a.yaml":   poolWith("a", "In", "limitz:\n    cpu: 10"),
		"pools/old.yaml": "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: old\n",
		"pools/b.yaml":   poolWith("b", "In", "weight: heavy"),
		"apps/d.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nfoo: bar\n",
	})
	fs, err := All(context.Background(), objs, Types{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strs(fs), "\n")
	want := strings.Join([]string{
		`pools/a.yaml:16:3: NodePool/a spec.limitz: unknown field: check its spelling against the Karpenter v1 API`,
		`pools/b.yaml:16:11: NodePool/b spec.weight: expected a number, found string`,
		`pools/old.yaml:1:13: NodePool/old apiVersion: karpenter.sh/v1beta1 is not served by Karpenter v1: write karpenter.sh/v1 (karpool migrate converts older manifests)`,
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSchemaLocatesTheBadOperator(t *testing.T) {
	objs := objects(t, map[string]string{"pools/a.yaml": poolWith("a", "Inn", "")})
	fs, err := NewSchema().Validate(context.Background(), objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) == 0 || !strings.HasPrefix(fs[0].String(), "pools/a.yaml:10:21: NodePool/a spec.template.spec.requirements[0].operator: ") {
		t.Fatalf("got %q", strs(fs))
	}
	// The workshop example is valid.
	fs, err = NewSchema().Validate(context.Background(), objects(t, map[string]string{"a.yaml": poolWith("a", "In", "")}))
	if err != nil || len(fs) > 0 {
		t.Fatalf("valid pool: %v %v", strs(fs), err)
	}
}

func TestDryRunAsksTheAPIServer(t *testing.T) {
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, map[string]string{
		"pools/a.yaml":   poolWith("a", "Inn", ""),
		"pools/b.yaml":   poolWith("b", "In", "limits:\n    cpu: 10"),
		"pools/c.yaml":   poolWith("c", "In", "limitz:\n    cpu: 10"),
		"apps/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: nowhere\n",
		"apps/new.yaml":  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: brand-new\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-y\n  namespace: brand-new\n",
		"apps/x.yaml":    "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
		"apps/nons.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: z\n",
	})
	fs, err := DryRun{Client: c, FieldManager: "karpool-test"}.Validate(context.Background(), objs)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strs(fs), "\n")
	for _, want := range []string{
		`apps/cm.yaml:5:14: ConfigMap/nowhere/x metadata.namespace: namespace "nowhere" does not exist`,
		`apps/x.yaml:1:13: Widget/w apiVersion: the cluster does not serve kind Widget in example.com/v1`,
		`apps/nons.yaml:3:1: ConfigMap/z metadata: a ConfigMap is namespaced: set metadata.namespace`,
		`pools/a.yaml:10:21: NodePool/a spec.template.spec.requirements[0].operator: Unsupported value: "Inn"`,
		`pools/c.yaml:16:3: NodePool/c spec.limitz: field not declared in the schema`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "pools/b.yaml") || strings.Contains(got, "brand-new") {
		t.Errorf("valid objects reported (the ConfigMap in a Namespace of the same set is left to the apply):\n%s", got)
	}
}

func TestSchemaBatchesAndRemembers(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 250; i++ {
		op := "In"
		if i == 170 {
			op = "Inn"
		}
		files[fmt.Sprintf("pools/p%03d.yaml", i)] = poolWith(fmt.Sprintf("p%03d", i), op, "")
	}
	objs := objects(t, files)
	s := NewSchema()
	for round := 0; round < 2; round++ {
		fs, err := s.Validate(context.Background(), objs)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 || !strings.HasPrefix(fs[0].String(), "pools/p170.yaml:10:21: NodePool/p170 spec.template.spec.requirements[0].operator: ") {
			t.Fatalf("round %d: %q", round, strs(fs))
		}
	}
	if len(s.seen) != 250 {
		t.Fatalf("%d outcomes remembered, want 250", len(s.seen))
	}
}

// TestSchemaRejectsAnUnreadableBudgetSchedule: the API server accepts any five fields, Karpenter
// cannot read this one; PoolSync validation rejects it through the schema's Go rules, as
// `karpool vet` does.
func TestSchemaRejectsAnUnreadableBudgetSchedule(t *testing.T) {
	budget := "disruption:\n    consolidateAfter: 5m\n    budgets:\n      - nodes: \"0\"\n        schedule: \"99 99 * * funday\"\n        duration: 8h"
	fs, err := NewSchema().Validate(context.Background(), objects(t, map[string]string{"pools/a.yaml": poolWith("a", "In", budget)}))
	if err != nil {
		t.Fatal(err)
	}
	want := `pools/a.yaml:20:19: NodePool/a spec.disruption.budgets[0].schedule: schedule is not a cron expression Karpenter can read: end of range (99) above maximum (59): 99 (got "99 99 * * funday"); five fields`
	if len(fs) != 1 || !strings.HasPrefix(fs[0].String(), want) {
		t.Fatalf("got %q\nwant %s…", strs(fs), want)
	}
}
