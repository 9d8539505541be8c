package review

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/internal/fleet"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/schema"
)

// Guardrails is the verdict of the repository's ReviewPolicy on a change.
type Guardrails struct {
	// Source names the policy: its path and the base revision it was read from (a change is
	// held to the rules of the branch it goes to, never to its own).
	Source string `json:"source"`
	// Error says why the policy could not be read, with file:line:col; no rule was checked.
	Error    string    `json:"error,omitempty"`
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// OverrideLabel is the policy's override label; Overridden says the pull request has it.
	OverrideLabel string `json:"overrideLabel,omitempty"`
	Overridden    bool   `json:"overridden,omitempty"`
	// Edited says the change edits the policy, which applies once it is merged.
	Edited bool `json:"edited,omitempty"`
}

// Verdict is one rule checked against the change.
type Verdict struct {
	Rule     string `json:"rule"`
	Check    string `json:"check"`  // what passes: "monthly increase at most $500.00"
	Actual   string `json:"actual"` // what the change does: "+$612.40 per month"
	Passed   bool   `json:"passed"`
	Blocking bool   `json:"blocking"`
}

// Blocked says whether a blocking rule fails and the pull request has no override.
func (p *Plan) Blocked() bool {
	return len(p.Failing()) > 0 && !p.Guardrails.Overridden
}

// Failing are the blocking rules the change fails, overridden or not.
func (p *Plan) Failing() []Verdict {
	if p.Guardrails == nil {
		return nil
	}
	var out []Verdict
	for _, v := range p.Guardrails.Verdicts {
		if !v.Passed && v.Blocking {
			out = append(out, v)
		}
	}
	return out
}

// guardrails checks the plan against the base revision's ReviewPolicy; nil when the base has
// none. labels are the pull request's.
func guardrails(in Input, p *Plan) *Guardrails {
	data, ok := in.Base.Files[v1alpha1.ReviewPolicyPath]
	if !ok {
		return nil
	}
	g := &Guardrails{Source: v1alpha1.ReviewPolicyPath + " at " + in.Base.Revision,
		Edited: string(in.Head.Files[v1alpha1.ReviewPolicyPath]) != string(data)}
	policy, err := readPolicy(data)
	if err != nil {
		g.Error = err.Error()
		return g
	}
	g.OverrideLabel = policy.Spec.OverrideLabel
	g.Overridden = g.OverrideLabel != "" && slices.Contains(in.Labels, g.OverrideLabel)
	if !p.Head.Planned() {
		return g // the head does not validate: that fails the plan already
	}
	for _, r := range policy.Spec.Rules {
		v := check(r, p)
		v.Rule, v.Blocking = r.Name, r.Enforcement != v1alpha1.EnforcementWarn
		g.Verdicts = append(g.Verdicts, v)
	}
	return g
}

// readPolicy validates the policy file with the schema (errors at file:line:col) and reads it.
func readPolicy(data []byte) (*v1alpha1.ReviewPolicy, error) {
	fs, err := schema.ValidateDocuments(v1alpha1.ReviewPolicyPath, data)
	if err != nil {
		return nil, err
	}
	if fs.Errors() > 0 {
		var msgs []string
		for _, f := range fs {
			if f.Severity == schema.Error {
				msgs = append(msgs, f.String())
			}
		}
		return nil, fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	var policy v1alpha1.ReviewPolicy
	if err := sigsyaml.UnmarshalStrict(data, &policy); err != nil {
		return nil, fmt.Errorf("%s: %w", v1alpha1.ReviewPolicyPath, err)
	}
	if policy.Kind != v1alpha1.ReviewPolicyKind {
		return nil, fmt.Errorf("%s: kind %q, want %s (apiVersion karpool.dev/v1alpha1)", v1alpha1.ReviewPolicyPath, policy.Kind, v1alpha1.ReviewPolicyKind)
	}
	return &policy, nil
}

// check evaluates the one threshold a rule sets (the schema makes sure there is one).
func check(r v1alpha1.GuardrailRule, p *Plan) Verdict {
	delta := (p.Head.PerHour - p.Base.PerHour) * fleet.HoursPerMonth
	switch {
	case r.MonthlyIncreaseAbove != nil:
		limit := threshold(*r.MonthlyIncreaseAbove)
		return Verdict{Check: "monthly increase at most " + fleet.Dollars(limit), Actual: fleet.Signed(delta) + " per month", Passed: delta <= limit+0.005}
	case r.MonthlyIncreasePercentAbove != nil:
		limit := threshold(*r.MonthlyIncreasePercentAbove)
		pct := math.Inf(1)
		if p.Base.PerHour > 0 {
			pct = 100 * (p.Head.PerHour - p.Base.PerHour) / p.Base.PerHour
		} else if delta <= 0 {
			pct = 0
		}
		return Verdict{Check: fmt.Sprintf("monthly increase at most %s %%", *r.MonthlyIncreasePercentAbove), Actual: fmt.Sprintf("%+.1f %%", pct), Passed: pct <= limit}
	case r.CostOverBoundAbove != nil:
		return overBound(threshold(*r.CostOverBoundAbove), *r.CostOverBoundAbove, p)
	case r.UnschedulablePodsAbove != nil:
		n := len(p.Unschedulable)
		return Verdict{Check: fmt.Sprintf("at most %d pods no longer fit", *r.UnschedulablePodsAbove), Actual: fmt.Sprintf("%d pods", n), Passed: n <= int(*r.UnschedulablePodsAbove)}
	case r.NodesReplacedAbove != nil:
		n := 0
		for _, rp := range p.Replaced {
			n += rp.Nodes
		}
		return Verdict{Check: fmt.Sprintf("drift replaces at most %d nodes", *r.NodesReplacedAbove), Actual: fmt.Sprintf("%d nodes", n), Passed: n <= int(*r.NodesReplacedAbove)}
	default: // limitRemoved
		removed := limitsRemoved(p.Base.objs, p.Head.objs)
		actual := "none removed"
		if len(removed) > 0 {
			actual = strings.Join(removed, ", ")
		}
		return Verdict{Check: "no NodePool loses a limit", Actual: actual, Passed: len(removed) == 0}
	}
}

// threshold reads a value the schema checked (a decimal number).
func threshold(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// overBound checks every NodePool of the head against its pods' cost lower bound.
func overBound(limit float64, written string, p *Plan) Verdict {
	worst, at := 0.0, ""
	for _, pc := range p.Pools {
		if pc.Head == nil || pc.Head.Bound <= 0 {
			continue
		}
		if r := pc.Head.PerHour / pc.Head.Bound; r > worst {
			worst, at = r, pc.Name
		}
	}
	v := Verdict{Check: "every NodePool at most " + written + " × its pods' cost lower bound", Actual: "no pool with a bound", Passed: worst <= limit+1e-9}
	if at != "" {
		v.Actual = fmt.Sprintf("%s at %.2f ×", at, worst)
	}
	return v
}

// limitsRemoved lists, for the NodePools of both revisions, the limits the head drops
// ("general: cpu").
func limitsRemoved(base, head []*build.Object) []string {
	headLimits := map[string]map[string]bool{}
	for _, o := range head {
		if name, ls, ok := poolLimits(o); ok {
			headLimits[name] = ls
		}
	}
	var out []string
	for _, o := range base {
		name, ls, ok := poolLimits(o)
		hl, kept := headLimits[name]
		if !ok || !kept {
			continue
		}
		for _, l := range slices.Sorted(maps.Keys(ls)) {
			if !hl[l] {
				out = append(out, name+": "+l)
			}
		}
	}
	return out
}

// poolLimits names a NodePool's limits: its spec.limits and its cost limit annotation.
func poolLimits(o *build.Object) (string, map[string]bool, bool) {
	if o.Object.GetKind() != "NodePool" || o.Object.GetAPIVersion() != karpv1.GroupVersion.String() {
		return "", nil, false
	}
	ls := map[string]bool{}
	limits, _ := o.Object.Object["spec"].(map[string]any)["limits"].(map[string]any)
	for k := range limits {
		ls[k] = true
	}
	if _, ok := o.Object.GetAnnotations()[v1alpha1.AnnotationLimitPerHour]; ok {
		ls[v1alpha1.AnnotationLimitPerHour] = true
	}
	return o.Object.GetName(), ls, true
}
