package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// policy is a ReviewPolicy with the given rules (YAML list items, two-space indented).
func policy(rules string) string {
	return "apiVersion: karpool.dev/v1alpha1\nkind: ReviewPolicy\nmetadata: {name: pools}\nspec:\n  overrideLabel: karpool/approve-cost\n  rules:\n" + rules
}

// guarded plans head against base with the policy in the base (and head's own policy, if any).
func guarded(t *testing.T, rules string, head map[string]string, labels ...string) *Plan {
	t.Helper()
	b := with(map[string]string{".karpool/policy.yaml": policy(rules)})
	h := with(map[string]string{".karpool/policy.yaml": policy(rules)})
	for k, v := range head {
		h[k] = v
	}
	p, err := Make(context.Background(), Input{Base: tree("main@sha1:1111111", b), Head: tree("feature@sha1:2222222", h), Path: "pools", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func verdict(t *testing.T, p *Plan, rule string) Verdict {
	t.Helper()
	if p.Guardrails == nil {
		t.Fatal("no guardrails in the plan")
	}
	for _, v := range p.Guardrails.Verdicts {
		if v.Rule == rule {
			return v
		}
	}
	t.Fatalf("rule %s not checked: %+v", rule, p.Guardrails)
	return Verdict{}
}

// TestGuardrailsBlockACostIncrease: t3.small → m5.2xlarge raises the monthly cost; a $10 rule
// blocks it (failure status, exit 3), a $10,000 rule lets it pass, the percentage rule sees
// the same change, and a Warn rule only warns.
func TestGuardrailsBlockACostIncrease(t *testing.T) {
	bigger := map[string]string{"pools/nodepool.yaml": pool("m5.2xlarge", "40", "web")}
	rules := `    - {name: budget, monthlyIncreaseAbove: "10"}
    - {name: generous, monthlyIncreaseAbove: "10000"}
    - {name: growth, monthlyIncreasePercentAbove: "50", enforcement: Warn}
`
	p := guarded(t, rules, bigger)
	delta := (p.Head.PerHour - p.Base.PerHour) * 730
	if delta <= 10 {
		t.Fatalf("the change adds $%.2f/month: the test needs more than $10", delta)
	}
	if v := verdict(t, p, "budget"); v.Passed || !v.Blocking || !strings.Contains(v.Actual, "+$") {
		t.Errorf("budget: %+v, want a blocking failure with the increase", v)
	}
	if v := verdict(t, p, "generous"); !v.Passed {
		t.Errorf("generous: %+v, want a pass", v)
	}
	growth := verdict(t, p, "growth")
	if pct := 100 * (p.Head.PerHour - p.Base.PerHour) / p.Base.PerHour; growth.Passed != (pct <= 50) || growth.Blocking {
		t.Errorf("growth at %+.1f %%: %+v", pct, growth)
	}
	if state, why := p.CommitStatus(); state != "failure" || !strings.Contains(why, "guardrail budget") || !p.Blocked() {
		t.Errorf("status %s %q, blocked %v: want a failure naming the rule", state, why, p.Blocked())
	}
	md := p.Markdown("test")
	for _, want := range []string{"#### Guardrails (`.karpool/policy.yaml at main@sha1:1111111`)", `| budget | monthly increase at most \$10.00 |`, "❌ fail", "**Blocked:** 1 blocking rule fails", "`karpool/approve-cost`"} {
		if !strings.Contains(md, want) {
			t.Errorf("comment lacks %q:\n%s", want, md)
		}
	}
	// The override label turns it green, and the comment records it.
	p = guarded(t, rules, bigger, "karpool/approve-cost")
	if state, why := p.CommitStatus(); state != "success" || p.Blocked() || !strings.Contains(why, "overridden by label karpool/approve-cost") {
		t.Errorf("with the label: status %s %q, blocked %v", state, why, p.Blocked())
	}
	if md := p.Markdown("test"); !strings.Contains(md, "**Overridden** by the label `karpool/approve-cost`") {
		t.Errorf("override not recorded:\n%s", md)
	}
	// A change within the rules passes.
	if p := guarded(t, rules, map[string]string{"pools/app.yaml": app(2)}); p.Blocked() || len(p.Failing()) != 0 {
		t.Errorf("a cheaper change fails: %+v", p.Guardrails)
	}
}

// TestGuardrailsComeFromTheBase: a change that loosens the policy is still held to the base's.
func TestGuardrailsComeFromTheBase(t *testing.T) {
	strict := `    - {name: budget, monthlyIncreaseAbove: "10"}
`
	head := map[string]string{"pools/nodepool.yaml": pool("m5.2xlarge", "40", "web"),
		".karpool/policy.yaml": policy(`    - {name: budget, monthlyIncreaseAbove: "100000"}
`)}
	p := guarded(t, strict, head)
	if !p.Blocked() || !p.Guardrails.Edited {
		t.Fatalf("a head that loosens the policy passes: %+v", p.Guardrails)
	}
	if md := p.Markdown("test"); !strings.Contains(md, "the new rules apply once it is merged") {
		t.Errorf("the edit is not said:\n%s", md)
	}
}

// TestGuardrailsOnPodsNodesBoundAndLimits: the other rules, each failing on a change made for it.
func TestGuardrailsOnPodsNodesBoundAndLimits(t *testing.T) {
	rules := `    - {name: stranded, unschedulablePodsAbove: 0}
    - {name: churn, nodesReplacedAbove: 0}
    - {name: limits, limitRemoved: true}
    - {name: packing, costOverBoundAbove: "100"}
`
	// A 4-cpu limit strands pods; a label change replaces every node; dropping spec.limits
	// removes two limits.
	stranded := guarded(t, rules, map[string]string{"pools/nodepool.yaml": pool("t3.small", "4", "web")})
	if v := verdict(t, stranded, "stranded"); v.Passed || v.Actual != fmt.Sprintf("%d pods", len(stranded.Unschedulable)) {
		t.Errorf("stranded: %+v", v)
	}
	drift := guarded(t, rules, map[string]string{"pools/nodepool.yaml": pool("t3.small", "20", "shop")})
	if v := verdict(t, drift, "churn"); v.Passed || !strings.HasSuffix(v.Actual, " nodes") {
		t.Errorf("churn: %+v", v)
	}
	noLimits := strings.Replace(pool("t3.small", "20", "web"), "  limits:\n    cpu: \"20\"\n    memory: 40Gi\n", "", 1)
	open := guarded(t, rules, map[string]string{"pools/nodepool.yaml": noLimits})
	if v := verdict(t, open, "limits"); v.Passed || v.Actual != "default: cpu, default: memory" {
		t.Errorf("limits: %+v", v)
	}
	for _, p := range []*Plan{stranded, drift, open} {
		if v := verdict(t, p, "packing"); !v.Passed || !strings.Contains(v.Actual, "default at") {
			t.Errorf("packing within 100 × the bound: %+v", v)
		}
	}
	if v := verdict(t, drift, "limits"); !v.Passed || v.Actual != "none removed" {
		t.Errorf("limits kept: %+v", v)
	}
}

// TestGuardrailsPolicyErrors: a policy that does not validate checks nothing, says where, and
// makes the status an error (not a silent pass).
func TestGuardrailsPolicyErrors(t *testing.T) {
	p := guarded(t, `    - {name: two, monthlyIncreaseAbove: "10", nodesReplacedAbove: 3}
`, base)
	g := p.Guardrails
	if g == nil || g.Error == "" || len(g.Verdicts) != 0 || !strings.Contains(g.Error, ".karpool/policy.yaml:7:") || !strings.Contains(g.Error, "exactly one") {
		t.Fatalf("guardrails %+v, want a located error saying a rule sets exactly one threshold", g)
	}
	if state, _ := p.CommitStatus(); state != "error" {
		t.Errorf("status %s, want error", state)
	}
	// Without a policy in the base, nothing is said.
	if p := plan(t, base); p.Guardrails != nil {
		t.Errorf("guardrails without a policy: %+v", p.Guardrails)
	}
}
