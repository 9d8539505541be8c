package validate

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"

	karpenterv1 "github.com/karpool/karpool/api/karpenter/v1"
	karpenterv1alpha1 "github.com/karpool/karpool/api/karpenter/v1alpha1"
	karpenterawsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	karpoolv1alpha1 "github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/manifests/build"
)

// Types decodes NodePools, NodeClaims, NodeOverlays and EC2NodeClasses strictly into karpool's
// Go types, which catches misspelt fields and wrong value types without a cluster. Other kinds
// pass through.
type Types struct{}

// servedVersions are the versions of Karpenter's groups that a v1 cluster serves: v1, and
// v1alpha1 for NodeOverlay.
var servedVersions = map[string][]string{
	karpenterv1.GroupVersion.Group:    {karpenterv1.GroupVersion.Version, karpenterv1alpha1.GroupVersion.Version},
	karpenterawsv1.GroupVersion.Group: {karpenterawsv1.GroupVersion.Version},
}

// fieldRE pulls the field path out of sigs.k8s.io/json's strict errors: unknown field "spec.x".
var fieldRE = regexp.MustCompile(`^(unknown|duplicate) field "([^"]*)"$`)

// Validate implements Validator.
func (Types) Validate(_ context.Context, objs []*build.Object) ([]Finding, error) {
	var out []Finding
	for _, o := range objs {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group == karpoolv1alpha1.GroupVersion.Group && gvk.Kind == karpoolv1alpha1.ReviewPolicyKind {
			out = append(out, at(o, "kind", "types", fmt.Sprintf("a ReviewPolicy is not applied to the cluster: karpool plan reads it from %s at the repository root; move it out of the PoolSync's path", karpoolv1alpha1.ReviewPolicyPath)))
			continue
		}
		if gvk.Group == karpoolv1alpha1.GroupVersion.Group && gvk.Kind == karpoolv1alpha1.FleetKind {
			out = append(out, at(o, "kind", "types", "a Fleet is not applied to the cluster: karpool plan --fleet reads it; move it out of the PoolSync's path"))
			continue
		}
		served, ours := servedVersions[gvk.Group]
		if !ours {
			continue
		}
		if !slices.Contains(served, gvk.Version) {
			out = append(out, at(o, "apiVersion", "types", fmt.Sprintf("%s is not served by Karpenter v1: write %s/%s (karpool migrate converts older manifests)", gvk.GroupVersion(), gvk.Group, served[0])))
			continue
		}
		typed, err := scheme.Scheme.New(gvk)
		if err != nil {
			out = append(out, at(o, "kind", "types", fmt.Sprintf("%s has no kind %q", gvk.GroupVersion(), gvk.Kind)))
			continue
		}
		out = append(out, strictDecode(o, typed)...)
	}
	return out, nil
}

func strictDecode(o *build.Object, into runtime.Object) []Finding {
	data, err := o.Object.MarshalJSON()
	if err != nil {
		return []Finding{at(o, "", "types", err.Error())}
	}
	strict, err := sigsjson.UnmarshalStrict(data, into)
	var out []Finding
	if err != nil {
		if m := typeErrRE.FindStringSubmatch(err.Error()); m != nil {
			out = append(out, at(o, m[2], "types", fmt.Sprintf("expected %s, found %s", goTypeWords(m[3]), m[1])))
		} else {
			out = append(out, at(o, "", "types", err.Error()))
		}
	}
	for _, e := range strict {
		if m := fieldRE.FindStringSubmatch(e.Error()); m != nil {
			msg := "unknown field: check its spelling against the Karpenter v1 API"
			if m[1] == "duplicate" {
				msg = "field given twice"
			}
			out = append(out, at(o, m[2], "types", msg))
			continue
		}
		out = append(out, at(o, "", "types", e.Error()))
	}
	return out
}

// typeErrRE reads a type mismatch, which sigs.k8s.io/json reports only as text: "json: cannot
// unmarshal string into Go struct field Requirement.spec.template.spec.requirements.minValues of
// type int". The path has no list indexes; locating stops at the list.
var typeErrRE = regexp.MustCompile(`cannot unmarshal (\w+) into Go struct field [^.]+\.(\S+) of type (\S+)`)

// goTypeWords words a Go type the way a YAML author thinks of it.
func goTypeWords(t string) string {
	switch {
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map[") || strings.Contains(t, "."):
		return "a map"
	case t == "bool":
		return "true or false"
	default:
		return "a number"
	}
}
