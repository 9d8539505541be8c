package review

import (
	"fmt"
	"strings"

	"github.com/karpool/karpool/internal/mdsafe"
)

// CommitStatus is the plan's commit status (forge.Status's state and a description): failure
// when the head does not validate or a blocking guardrail fails without the override label,
// error when the policy cannot be read (no rule was checked), success otherwise.
func (p *Plan) CommitStatus() (state, description string) {
	headline := p.Headline()
	switch {
	case p.Failed():
		return "failure", headline
	case p.Blocked():
		v := p.Failing()[0]
		return "failure", fmt.Sprintf("blocked by guardrail %s: %s (%s)", v.Rule, v.Actual, v.Check)
	case p.Guardrails != nil && p.Guardrails.Error != "":
		return "error", "the review policy cannot be read: " + p.Guardrails.Error
	case len(p.Failing()) > 0:
		return "success", fmt.Sprintf("guardrails overridden by label %s; %s", p.Guardrails.OverrideLabel, headline)
	}
	return "success", headline
}

// mark is a verdict's result in the comment.
func (v Verdict) mark() string {
	switch {
	case v.Passed:
		return "✅ pass"
	case v.Blocking:
		return "❌ fail"
	}
	return "⚠️ fail (warning)"
}

// guardrailsSection is the policy's table, with the override and what blocks the merge.
func (p *Plan) guardrailsSection(pg *page) {
	g := p.Guardrails
	if g == nil {
		return
	}
	pg.blockf("#### Guardrails (%s)\n\n", mdsafe.Code(g.Source))
	if g.Error != "" {
		pg.blockf("The policy cannot be read, so no rule was checked: %s\n\n", mdsafe.Code(g.Error))
		return
	}
	if len(g.Verdicts) > 0 {
		pg.block("| Rule | Passes when | This change | Result |\n| --- | --- | --- | --- |\n")
		for _, v := range g.Verdicts {
			pg.blockf("| %s | %s | %s | %s |\n", mdsafe.Text(v.Rule), mdsafe.Text(v.Check), mdsafe.Text(v.Actual), v.mark())
		}
		pg.block("\n")
	}
	switch failing := len(p.Failing()); {
	case failing > 0 && g.Overridden:
		pg.blockf("**Overridden** by the label %s: the failing rules do not block the merge.\n\n", mdsafe.Code(g.OverrideLabel))
	case failing > 0 && g.OverrideLabel != "":
		pg.blockf("**Blocked:** %d blocking %s. A maintainer may accept the cost with the label %s.\n\n", failing, rulesFail(failing), mdsafe.Code(g.OverrideLabel))
	case failing > 0:
		pg.blockf("**Blocked:** %d blocking %s.\n\n", failing, rulesFail(failing))
	}
	if g.Edited {
		pg.block("This change edits the policy: the new rules apply once it is merged.\n\n")
	}
}

// guardrailsText is the policy's verdicts for a terminal.
func (p *Plan) guardrailsText(b *strings.Builder) {
	g := p.Guardrails
	if g == nil {
		return
	}
	fmt.Fprintf(b, "\nGuardrails (%s):\n", g.Source)
	if g.Error != "" {
		fmt.Fprintf(b, "  the policy cannot be read, no rule was checked: %s\n", g.Error)
		return
	}
	for _, v := range g.Verdicts {
		fmt.Fprintf(b, "  %-10s %s: %s (passes when %s)\n", strings.Fields(v.mark())[1], v.Rule, v.Actual, v.Check)
	}
	if n := len(p.Failing()); n > 0 && g.Overridden {
		fmt.Fprintf(b, "  overridden by the label %s\n", g.OverrideLabel)
	} else if n > 0 {
		fmt.Fprintf(b, "  blocked: %d blocking %s\n", n, rulesFail(n))
	}
}

func rulesFail(n int) string {
	if n == 1 {
		return "rule fails"
	}
	return "rules fail"
}
