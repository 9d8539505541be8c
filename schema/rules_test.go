package schema_test

import (
	"fmt"
	"strings"
	"testing"

	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/schema"
)

// budgetPool is a valid NodePool with one budget whose schedule is %s, on line 14.
const budgetPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: a
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
  disruption:
    consolidateAfter: 5m
    budgets:
      - nodes: "0"
        schedule: %s
        duration: 8h
`

// TestBudgetScheduleIsCron: a schedule passes only if Karpenter's cron parser reads it, and the
// finding is located on the schedule's value with a hint. The CUE pattern (the CRD's) accepts
// every one of these inputs, so the rejections come from the Go rule.
func TestBudgetScheduleIsCron(t *testing.T) {
	for _, c := range []struct {
		schedule string
		want     string // "" when valid
	}{
		{`"0 9 * * mon-fri"`, ""},
		{`"*/15 0-6 1,15 jan-mar ?"`, ""},
		{`"@daily"`, ""},
		{`"@midnight"`, ""},
		{`"99 99 * * funday"`, "above maximum (59)"},
		{`"0 9 * * funday"`, `failed to parse int from funday`},
		{`"0 25 * * *"`, "above maximum (23)"},
		// Karpenter prefixes TZ=UTC itself; a second time zone makes six fields.
		{`"TZ=Europe/Paris 0 9 * * *"`, "expected exactly 5 fields, found 6"},
		{`"0 9 * * * *"`, "expected exactly 5 fields, found 6"},
	} {
		t.Run(c.schedule, func(t *testing.T) {
			fs, err := schema.ValidateDocuments("pool.yaml", fmt.Appendf(nil, budgetPool, c.schedule))
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if len(fs) != 0 {
					t.Fatalf("valid schedule rejected: %v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one finding, got %v", fs)
			}
			f := fs[0]
			if f.Rule != "cron" || f.Line != 14 || f.Column != 19 || f.Path != "spec.disruption.budgets[0].schedule" ||
				!strings.Contains(f.Message, c.want) || !strings.Contains(f.Hint, `"0 9 * * mon-fri"`) {
				t.Fatalf("got %s (rule %s, hint %q), want rule cron at 14:19 mentioning %q", f, f.Rule, f.Hint, c.want)
			}
		})
	}
}

// TestBudgetScheduleOnceWhenThePatternFails: a schedule that breaks the CUE pattern too is
// reported once, by the schema.
func TestBudgetScheduleOnceWhenThePatternFails(t *testing.T) {
	fs, err := schema.ValidateDocuments("pool.yaml", fmt.Appendf(nil, budgetPool, `"daily"`))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Rule != "schema" {
		t.Fatalf("want one schema finding, got %v", fs)
	}
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"0 9 * * mon-fri", "@daily", "99 99 * * funday", "TZ=", "@every", "*/0 * * * *", "1-0 * * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = schema.ParseSchedule(s) // must not panic
	})
}

// TestPoolSyncSemverRange: spec.ref.semver takes the ranges Flux takes, and an invalid one is
// located on its value.
func TestPoolSyncSemverRange(t *testing.T) {
	const ps = "apiVersion: karpool.dev/v1alpha1\nkind: PoolSync\nmetadata:\n  name: p\nspec:\n  url: https://example.com/pools.git\n  interval: 1m\n  ref:\n    semver: %q\n"
	for _, rng := range []string{"^1.2", "~1.2.3", ">=1.0.0 <2.0.0", "1.x", "1.0.0 - 1.4.0"} {
		fs, err := schema.ValidateDocuments("ps.yaml", fmt.Appendf(nil, ps, rng))
		if err != nil || len(fs) != 0 {
			t.Errorf("%s rejected: %v %v", rng, fs, err)
		}
	}
	fs, err := schema.ValidateDocuments("ps.yaml", fmt.Appendf(nil, ps, "^1.x.y"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Rule != "semver" || fs[0].Location() != "ps.yaml:9:13" || !strings.Contains(fs[0].Hint, `"~1.2.3"`) {
		t.Fatalf("got %v", fs)
	}
}

// nestedClass is a valid EC2NodeClass with cpuOptions.nestedVirtualization enabled on line 11
// and %s as its metadata's extra.
const nestedClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: nested%s
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  cpuOptions:
    nestedVirtualization: enabled
`

// TestUnimplementedFieldsRefused: a field karpool does not act on is an error at its line that
// says what Karpenter would do; the opt-out annotation makes it a warning; another value of
// the annotation changes nothing.
func TestUnimplementedFieldsRefused(t *testing.T) {
	for _, c := range []struct {
		extra string
		sev   schema.Severity
	}{
		{"", schema.Error},
		{"\n  annotations: {karpool.dev/unimplemented-fields: ignore}", schema.Warning},
		{"\n  annotations: {karpool.dev/unimplemented-fields: \"yes\"}", schema.Error},
	} {
		fs, err := schema.ValidateDocuments("class.yaml", fmt.Appendf(nil, nestedClass, c.extra))
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 {
			t.Fatalf("%q: %d findings %v, want one", c.extra, len(fs), fs)
		}
		f := fs[0]
		line := 11 + strings.Count(c.extra, "\n")
		if f.Severity != c.sev || f.Rule != "unimplemented" || f.Path != "spec.cpuOptions.nestedVirtualization" || f.Line != line ||
			!strings.Contains(f.Message, "the value enabled is not implemented") || !strings.Contains(f.Hint, "karpool.dev/unimplemented-fields") {
			t.Errorf("%q: %s (hint %q), want a %s at class.yaml:%d naming the value, what Karpenter does and the annotation", c.extra, f, f.Hint, c.sev, line)
		}
	}
}

// TestCostLimitAnnotation: the schema accepts exactly the karpool.dev/limit-per-hour values the
// engine reads (api/karpool/v1alpha1.ParseLimitPerHour), and points at the value.
func TestCostLimitAnnotation(t *testing.T) {
	const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: a
  annotations:
    karpool.dev/limit-per-hour: %q
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`
	for _, v := range []string{"25", "25.50", "$25.50/h", "0", "$0.000001/h", "25 dollars", "-1", "1e3", "25/hour", "1234567890", "0.1234567", "$", ""} {
		fs, err := schema.ValidateDocuments("pool.yaml", fmt.Appendf(nil, pool, v))
		if err != nil {
			t.Fatal(err)
		}
		_, parseErr := karpoolv1alpha1.ParseLimitPerHour(v)
		if (parseErr == nil) != (len(fs) == 0) {
			t.Errorf("%q: the engine says %v, the schema %v", v, parseErr, fs)
			continue
		}
		if len(fs) > 0 && (fs[0].Line != 6 || fs[0].Path != `metadata.annotations["karpool.dev/limit-per-hour"]` || !strings.Contains(fs[0].Message, "USD per hour")) {
			t.Errorf("%q: %s at %d (%s), want line 6 on the annotation saying USD per hour", v, fs[0], fs[0].Line, fs[0].Path)
		}
	}
}

// TestReviewPolicy: the guardrails file validates with the schema; a rule with two thresholds,
// or none, is refused at the rule, and an unknown field at the field.
func TestReviewPolicy(t *testing.T) {
	const doc = `apiVersion: karpool.dev/v1alpha1
kind: ReviewPolicy
metadata: {name: pools}
spec:
  overrideLabel: karpool/approve-cost
  rules:
%s`
	for _, c := range []struct{ rules, want string }{
		{"    - {name: budget, monthlyIncreaseAbove: \"500\"}\n    - {name: drift, nodesReplacedAbove: 10, enforcement: Warn}\n    - {name: limits, limitRemoved: true}\n", ""},
		{"    - {name: two, monthlyIncreaseAbove: \"500\", nodesReplacedAbove: 3}\n", "exactly one of"},
		{"    - {name: none, limitRemoved: false}\n", "exactly one of"},
		{"    - {name: typo, monthlyIncreaseAbov: \"500\"}\n", "monthlyIncreaseAbov"},
		{"    - {name: dollars, monthlyIncreaseAbove: \"$500\"}\n", "monthlyIncreaseAbove"},
		{"    - {name: strict, unschedulablePodsAbove: 0, enforcement: Deny}\n", "enforcement"},
	} {
		fs, err := schema.ValidateDocuments("policy.yaml", fmt.Appendf(nil, doc, c.rules))
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			if len(fs) != 0 {
				t.Errorf("valid policy refused: %v", fs)
			}
			continue
		}
		if len(fs) == 0 || fs[0].Line != 7 || !strings.Contains(fs[0].String(), c.want) {
			t.Errorf("%q: findings %v, want one at line 7 mentioning %q", c.rules, fs, c.want)
		}
	}
}

// TestFleet: the fleet file validates; duplicate cluster names, a workload from two places and
// poolSync without statusBranch are refused.
func TestFleet(t *testing.T) {
	const doc = "apiVersion: karpool.dev/v1alpha1\nkind: Fleet\nmetadata: {name: shop}\nspec:\n  clusters:\n%s"
	for _, c := range []struct{ clusters, want string }{
		{"    - {name: prod-eu, path: clusters/prod-eu, region: us-east-1, workload: prod.yaml}\n    - {name: staging, path: clusters/staging, statusBranch: karpool-status, poolSync: staging}\n", ""},
		{"    - {name: a, path: x}\n    - {name: a, path: y}\n", "unique names"},
		{"    - {name: a, path: x, workload: w.yaml, statusBranch: s}\n", "not both"},
		{"    - {name: a, path: x, poolSync: p}\n", "set statusBranch too"},
		{"    - {name: A_B, path: x}\n", "DNS subdomain"},
	} {
		fs, err := schema.ValidateDocuments("fleet.yaml", fmt.Appendf(nil, doc, c.clusters))
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			if len(fs) != 0 {
				t.Errorf("valid fleet refused: %v", fs)
			}
			continue
		}
		if len(fs) == 0 || !strings.Contains(fs[0].String(), c.want) {
			t.Errorf("%q: findings %v, want one mentioning %q", c.clusters, fs, c.want)
		}
	}
}
