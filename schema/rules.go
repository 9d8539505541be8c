package schema

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/unimplemented"
	"github.com/karpool/karpool/manifests"
)

var instanceProfilePattern = regexp.MustCompile(awsv1.InstanceProfilePattern)

// Rules that CUE cannot state are checked in Go, here, after the CUE schema: `karpool vet` and
// PoolSync validation both validate through Schema.ValidateDocument, so this is the one place
// they are decided. Stock `cue vet` does not run them.

// goRules returns the findings of the Go rules for a document that the CUE schema checked.
// reported holds the field paths the schema already reported, which are not reported twice.
func goRules(d *manifests.Document, obj any, reported map[string]bool) Findings {
	switch d.APIVersion + "|" + d.Kind {
	case "karpenter.sh/v1|NodePool":
		return slices.Concat(budgetSchedules(d, obj, reported), unimplementedFields(d, obj, reported), staticPool(d, obj, reported))
	case "karpool.dev/v1alpha1|PoolSync":
		return semverRange(d, obj, reported)
	case "karpenter.k8s.aws/v1|EC2NodeClass":
		return append(instanceProfileName(d, obj, reported), unimplementedFields(d, obj, reported)...)
	case "karpenter.sh/v1alpha1|NodeOverlay":
		return append(unimplementedFields(d, obj, reported), overlayGate(d))
	}
	return nil
}

// overlayGate reminds that a NodeOverlay changes nothing unless the controller runs with the
// NodeOverlay feature gate, off by default, as in Karpenter.
func overlayGate(d *manifests.Document) Finding {
	return At(d, []string{"kind"}, Warning, "node-overlay-gate", "a NodeOverlay is applied only when the controller runs with the NodeOverlay feature gate, off by default as in Karpenter",
		"run the controller with --feature-gates NodeOverlay=true (FEATURE_GATES), as for Karpenter")
}

// staticPool reminds that a static NodePool (spec.replicas) gets its nodes only with the
// controller's StaticCapacity feature gate, which is off by default, as in Karpenter.
func staticPool(d *manifests.Document, obj any, reported map[string]bool) Findings {
	path := []string{"spec", "replicas"}
	if els := elementsAt(obj, path, nil); len(els) == 0 || els[0].value == nil || reported[FieldPath(path)] {
		return nil
	}
	return Findings{At(d, path, Warning, "static-capacity", "a static NodePool gets its nodes only when the controller runs with the StaticCapacity feature gate, off by default as in Karpenter",
		"run the controller with --feature-gates StaticCapacity=true (FEATURE_GATES), as for Karpenter")}
}

// unimplementedFields refuses the fields Karpenter acts on and karpool does not (package
// unimplemented), naming what Karpenter would do, so that a pool moved from Karpenter does not
// silently lose a behaviour. The object's opt-out annotation makes them warnings. A field the
// schema already refused is not reported again: it must change anyway.
func unimplementedFields(d *manifests.Document, obj any, reported map[string]bool) Findings {
	m, _ := obj.(map[string]any)
	gaps := slices.DeleteFunc(unimplemented.In(d.Kind, m), func(g unimplemented.Gap) bool {
		for p := range reported {
			if p == g.Field() || strings.HasPrefix(p, g.Field()+".") || strings.HasPrefix(p, g.Field()+"[") {
				return true
			}
		}
		return false
	})
	if len(gaps) == 0 {
		return nil
	}
	sev, hint := Error, fmt.Sprintf("remove it, or accept in Git that karpool ignores it: annotate the %s with %s: %q", d.Kind, unimplemented.OptOutAnnotation, unimplemented.OptOut)
	if els := elementsAt(obj, []string{"metadata", "annotations", unimplemented.OptOutAnnotation}, nil); len(els) > 0 && els[0].value == unimplemented.OptOut {
		sev, hint = Warning, "the object accepts this with "+unimplemented.OptOutAnnotation
	}
	fs := make(Findings, 0, len(gaps))
	for _, g := range gaps {
		what := "the field"
		if g.Value != "" {
			what = "the value " + g.Value
		}
		fs = append(fs, At(d, g.Path, sev, "unimplemented", what+" "+g.Explain(), hint))
	}
	return fs
}

// instanceProfileName warns of an EC2NodeClass's spec.instanceProfile that is not an instance
// profile name: Karpenter puts it into launch templates as it is, and they fail. It warns rather
// than refuses, as the profile reaches no policy karpool renders, and manifests kept in
// Terraform heredocs hold placeholders there (${aws_iam_instance_profile.NAME.name}, seed 002).
// spec.role, which the controller policy names, is refused by the CUE schema (#IAMRole).
func instanceProfileName(d *manifests.Document, obj any, reported map[string]bool) Findings {
	path := []string{"spec", "instanceProfile"}
	els := elementsAt(obj, path, nil)
	if len(els) == 0 || reported[FieldPath(path)] {
		return nil
	}
	profile, ok := els[0].value.(string)
	if !ok || instanceProfilePattern.MatchString(profile) {
		return nil
	}
	return Findings{At(d, path, Warning, "instance-profile", "instanceProfile is not an instance profile name, so Karpenter cannot launch with it",
		"name an existing instance profile: 1 to 128 letters, digits and + = , . @ _ -, without a path; no * ? or ${")}
}

// semverRange checks a PoolSync's spec.ref.semver the way the source reads it, as Flux's
// source-controller does: a Masterminds semver constraint (^1.2, ~1.2.3, >=1.0.0 <2.0.0, 1.x).
func semverRange(d *manifests.Document, obj any, reported map[string]bool) Findings {
	path := []string{"spec", "ref", "semver"}
	els := elementsAt(obj, path, nil)
	if len(els) == 0 || reported[FieldPath(path)] {
		return nil
	}
	rng, ok := els[0].value.(string)
	if !ok {
		return nil
	}
	if _, err := semver.NewConstraint(rng); err != nil {
		return Findings{At(d, path, Error, "semver", fmt.Sprintf("semver is not a version range: %v", err),
			`write a range as Flux does, like "^1.2", "~1.2.3" or ">=1.0.0 <2.0.0"`)}
	}
	return nil
}

// budgetSchedules checks each disruption budget's schedule the way Karpenter reads it:
// robfig/cron's standard parser (five fields or a descriptor such as @daily) on the schedule
// prefixed with TZ=UTC. The CRD's pattern only counts fields, so the API server accepts
// "99 99 * * funday", and Karpenter then fails closed on the budget: it blocks every
// disruption of the pool, logging an invariant violation.
func budgetSchedules(d *manifests.Document, obj any, reported map[string]bool) Findings {
	var fs Findings
	for _, el := range elementsAt(obj, []string{"spec", "disruption", "budgets", "*", "schedule"}, nil) {
		schedule, ok := el.value.(string)
		if !ok || reported[FieldPath(el.path)] {
			continue
		}
		if err := ParseSchedule(schedule); err != nil {
			fs = append(fs, At(d, el.path, Error, "cron",
				fmt.Sprintf("schedule is not a cron expression Karpenter can read: %v", err),
				`five fields, minute (0-59) hour (0-23) day-of-month (1-31) month (1-12 or jan-dec) day-of-week (0-6 or sun-sat), like "0 9 * * mon-fri", or a macro such as @daily; it is read in UTC, without a TZ= prefix`))
		}
	}
	return fs
}

// ParseSchedule reports whether Karpenter can read a disruption budget schedule; the error
// says what is wrong with it. The disruption controller reads schedules with the same parser.
func ParseSchedule(schedule string) error {
	_, err := karpv1.ParseSchedule(schedule)
	return err
}
