package v1

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const workshopNodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        team: workshop
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["c5.large", "m5.large", "r5.large", "m5.xlarge"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "1000"
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
`

func decodePool(t *testing.T, data []byte) *NodePool {
	t.Helper()
	var np NodePool
	if err := yaml.UnmarshalStrict(data, &np); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return &np
}

func checkWorkshopPool(t *testing.T, np *NodePool) {
	t.Helper()
	if np.APIVersion != "karpenter.sh/v1" || np.Kind != "NodePool" || np.Name != "default" {
		t.Errorf("type/object meta = %s %s %q", np.APIVersion, np.Kind, np.Name)
	}
	tmpl := np.Spec.Template
	if got := tmpl.Labels["team"]; got != "workshop" {
		t.Errorf("template label team = %q, want workshop", got)
	}
	reqs := tmpl.Spec.Requirements
	if len(reqs) != 2 {
		t.Fatalf("got %d requirements, want 2", len(reqs))
	}
	if reqs[0].Key != corev1.LabelInstanceTypeStable || reqs[0].Operator != corev1.NodeSelectorOpIn ||
		!slices.Equal(reqs[0].Values, []string{"c5.large", "m5.large", "r5.large", "m5.xlarge"}) {
		t.Errorf("instance-type requirement = %+v", reqs[0])
	}
	if reqs[1].Key != LabelCapacityType || reqs[1].Operator != corev1.NodeSelectorOpIn ||
		!slices.Equal(reqs[1].Values, []string{CapacityTypeOnDemand}) || reqs[1].MinValues != nil {
		t.Errorf("capacity-type requirement = %+v", reqs[1])
	}
	ref := tmpl.Spec.NodeClassRef
	if ref == nil || *ref != (NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}) {
		t.Errorf("nodeClassRef = %+v", ref)
	}
	if tmpl.Spec.ExpireAfter != nil {
		t.Errorf("expireAfter was not in the manifest but decoded as %+v", tmpl.Spec.ExpireAfter)
	}
	cpu, ok := np.Spec.Limits[corev1.ResourceCPU]
	if !ok || cpu.Cmp(resource.MustParse("1000")) != 0 {
		t.Errorf("limits.cpu = %v (present %v), want 1000", cpu.String(), ok)
	}
	d := np.Spec.Disruption
	if d.ConsolidationPolicy != ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("consolidationPolicy = %q", d.ConsolidationPolicy)
	}
	if d.ConsolidateAfter.Duration == nil || *d.ConsolidateAfter.Duration != time.Minute {
		t.Errorf("consolidateAfter = %v, want 1m", d.ConsolidateAfter.Duration)
	}
	if d.Budgets != nil || np.Spec.Weight != nil || np.Spec.Replicas != nil {
		t.Errorf("unset fields got values: budgets=%v weight=%v replicas=%v", d.Budgets, np.Spec.Weight, np.Spec.Replicas)
	}
}

func TestNodePoolYAMLRoundTrip(t *testing.T) {
	np := decodePool(t, []byte(workshopNodePool))
	checkWorkshopPool(t, np)

	out, err := yaml.Marshal(np)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	again := decodePool(t, out)
	checkWorkshopPool(t, again)

	// Fields the manifest left out must stay out, so that the API server still defaults them.
	var generic map[string]any
	if err := yaml.Unmarshal(out, &generic); err != nil {
		t.Fatal(err)
	}
	spec := generic["spec"].(map[string]any)
	tmplSpec := spec["template"].(map[string]any)["spec"].(map[string]any)
	for _, k := range []string{"expireAfter", "terminationGracePeriod", "taints", "startupTaints"} {
		if v, ok := tmplSpec[k]; ok {
			t.Errorf("template.spec.%s = %v appeared after round trip", k, v)
		}
	}
	if got := spec["disruption"].(map[string]any)["consolidateAfter"]; got != "1m" {
		t.Errorf("consolidateAfter encoded as %v, want 1m", got)
	}
}

func TestNillableDuration(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{`"Never"`, `"Never"`},
		{`"720h"`, `"720h"`},
		{`"90m"`, `"1h30m"`},
		{`"0s"`, `"0s"`},
		{`"45s"`, `"45s"`},
	} {
		var d NillableDuration
		if err := d.UnmarshalJSON([]byte(tc.in)); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if (tc.in == `"Never"`) != (d.Duration == nil) {
			t.Errorf("%s: Duration = %v", tc.in, d.Duration)
		}
		b, err := d.MarshalJSON()
		if err != nil || string(b) != tc.out {
			t.Errorf("%s encoded as %s (%v), want %s", tc.in, b, err, tc.out)
		}
	}
	for _, bad := range []string{`"soon"`, `"-5m"`, `5`} {
		var d NillableDuration
		if err := d.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	np := decodePool(t, []byte(workshopNodePool))
	cp := np.DeepCopy()
	cp.Spec.Template.Labels["team"] = "other"
	cp.Spec.Template.Spec.Requirements[0].Values[0] = "t3.micro"
	*cp.Spec.Disruption.ConsolidateAfter.Duration = time.Hour
	checkWorkshopPool(t, np)
}

func TestSchemeRegistration(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"NodePool", "NodePoolList", "NodeClaim", "NodeClaimList"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
}

func TestConversionsToCoreTypes(t *testing.T) {
	// Taint, Condition and the two requirement types are kept layout-compatible on purpose; these
	// conversions stop compiling if that breaks.
	taint := corev1.Taint(Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule})
	if taint.Key != "k" {
		t.Errorf("taint = %+v", taint)
	}
	cond := metav1.Condition(Condition{Type: ConditionTypeLaunched, Status: metav1.ConditionTrue})
	if cond.Type != ConditionTypeLaunched {
		t.Errorf("condition = %+v", cond)
	}
	r := NodeSelectorRequirementWithMinValues(NodePoolRequirement{Key: "k", Operator: corev1.NodeSelectorOpExists})
	if r.Key != "k" {
		t.Errorf("requirement = %+v", r)
	}
}

func TestEmptyNodeClaimEncodesNoNulls(t *testing.T) {
	out, err := yaml.Marshal(&NodeClaim{Spec: NodeClaimSpec{
		NodeClassRef: &NodeClassReference{Group: "g", Kind: "K", Name: "n"},
		Requirements: []NodeSelectorRequirementWithMinValues{{Key: LabelCapacityType, Operator: corev1.NodeSelectorOpExists}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "null") || strings.Contains(s, "expireAfter") || strings.Contains(s, "resources") {
		t.Errorf("unset fields leaked into the encoding:\n%s", s)
	}
}
