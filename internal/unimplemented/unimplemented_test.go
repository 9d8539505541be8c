package unimplemented

import (
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// TestConditionNamesEachField: a class or pool that sets a field of the list gets a False
// condition naming it and what Karpenter would do; one that does not, or sets it empty, True.
func TestConditionNamesEachField(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	if c := Condition("EC2NodeClass", nc, 1); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 1 {
		t.Fatalf("a plain class: %+v, want True at generation 1", c)
	}
	nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{}
	if c := Condition("EC2NodeClass", nc, 1); c.Status != metav1.ConditionTrue {
		t.Fatalf("an empty list selects nothing: %+v, want True", c)
	}
	nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr.To("disabled")}
	if c := Condition("EC2NodeClass", nc, 1); c.Status != metav1.ConditionTrue {
		t.Fatalf("nested virtualization disabled: %+v, want True", c)
	}
	nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr.To("enabled")}
	nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelectorTerm{Name: "ml"}
	c := Condition("EC2NodeClass", nc, 2)
	if c.Status != metav1.ConditionFalse || c.Reason != "NotImplemented" {
		t.Fatalf("%+v, want False NotImplemented", c)
	}
	for _, want := range []string{"spec.cpuOptions.nestedVirtualization: enabled is not implemented", "only instance types that support it", "spec.placementGroupSelector is not implemented"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not say %q", c.Message, want)
		}
	}

	np := &karpv1.NodePool{}
	np.Spec.Disruption.ConsolidationPolicy = "Balanced"
	if c := Condition("NodePool", np, 1); c.Status != metav1.ConditionTrue {
		t.Fatalf("a Balanced pool: %+v, want True", c)
	}
}

// TestValueGaps: a gap on one value of a field applies to that value only.
func TestValueGaps(t *testing.T) {
	for value, want := range map[string]int{"enabled": 1, "disabled": 0} {
		obj := map[string]any{"spec": map[string]any{"cpuOptions": map[string]any{"nestedVirtualization": value}}}
		if got := In("EC2NodeClass", obj); len(got) != want {
			t.Errorf("nestedVirtualization %s: gaps %v, want %d", value, got, want)
		} else if want == 1 && got[0].String() != "spec.cpuOptions.nestedVirtualization: enabled is not implemented by karpool: Karpenter "+got[0].Karpenter {
			t.Errorf("enabled: %q", got[0])
		}
	}
}

// TestInFollowsTheKind: a path is a gap only for its own kind, and null values are not set.
func TestInFollowsTheKind(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"placementGroupSelector": map[string]any{"name": "ml"}, "cpuOptions": nil}}
	if got := In("NodePool", obj); len(got) != 0 {
		t.Errorf("NodePool with placementGroupSelector and a null cpuOptions: %v, want nothing", got)
	}
	if got := In("EC2NodeClass", obj); len(got) != 1 || got[0].Field() != "spec.placementGroupSelector" {
		t.Errorf("EC2NodeClass with placementGroupSelector and a null cpuOptions: %v, want spec.placementGroupSelector", got)
	}
}

// TestDocsListEveryGap: docs/migrate-from-karpenter.md's table is this package's list, row for
// row, so the page users read before they move says exactly what karpool does not do.
func TestDocsListEveryGap(t *testing.T) {
	data, err := os.ReadFile("../../docs/migrate-from-karpenter.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, g := range Gaps {
		rows = append(rows, fmt.Sprintf("| %s | `%s` | %s |", g.Kind, g.Subject(), g.Karpenter))
	}
	table := strings.Join(rows, "\n")
	var inDoc []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "| NodePool |") || strings.HasPrefix(l, "| EC2NodeClass |") || strings.HasPrefix(l, "| NodeOverlay |") {
			inDoc = append(inDoc, l)
		}
	}
	if strings.Join(inDoc, "\n") != table {
		t.Errorf("docs/migrate-from-karpenter.md does not hold the table of unimplemented fields; it should read:\n%s", table)
	}
}
