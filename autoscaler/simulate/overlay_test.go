package simulate

import (
	"context"
	"strings"
	"testing"
)

const pricedPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: priced}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large]}
`

const cheapM5 = `---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: savings-plan}
spec:
  weight: 10
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
  price: "0.01"
`

const onePod = `apiVersion: v1
kind: Pod
metadata: {name: api}
spec:
  containers:
    - name: api
      resources: {requests: {cpu: 1500m}}
`

func planOverlaid(t *testing.T, pools string, ignore string) *Report {
	t.Helper()
	dir := t.TempDir()
	ps, err := LoadPools(context.Background(), write(t, dir, "pools.yaml", pools))
	if err != nil {
		t.Fatal(err)
	}
	if ignore != "" {
		ps.IgnoreOverlays(ignore)
	}
	w, _, err := LoadWorkload(context.Background(), write(t, dir, "workload.yaml", onePod), 0)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Solve(ps, w, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.NodeClaims) != 1 {
		t.Fatalf("nodeclaims %+v, want one", rep.NodeClaims)
	}
	return rep
}

// TestOverlaysInPoolFilesChangeThePlan: a NodeOverlay beside the pools prices the plan, as the
// controller with the NodeOverlay gate does; plans for a cluster with the gate off ignore it
// and say so.
func TestOverlaysInPoolFilesChangeThePlan(t *testing.T) {
	if got := planOverlaid(t, pricedPool, "").NodeClaims[0].InstanceType; got != "c5.large" {
		t.Fatalf("without an overlay: %s, want c5.large (the cheaper by list price)", got)
	}
	rep := planOverlaid(t, pricedPool+cheapM5, "")
	if nc := rep.NodeClaims[0]; nc.InstanceType != "m5.large" || nc.PricePerHour > 0.01+0.02 {
		t.Errorf("with the overlay: %s at $%.4f/h, want m5.large at the overlay's $0.01/h plus its volume", nc.InstanceType, nc.PricePerHour)
	}
	off := planOverlaid(t, pricedPool+cheapM5, "the gate is off")
	if got := off.NodeClaims[0].InstanceType; got != "c5.large" {
		t.Errorf("with the overlay ignored: %s, want c5.large", got)
	}
	if !strings.Contains(strings.Join(off.Warnings(), "\n"), "1 NodeOverlays not applied: the gate is off") {
		t.Errorf("warnings %q do not say the overlay was ignored", off.Warnings())
	}
}

// TestConflictingOverlayIsNamedInTheWarnings: an overlay that conflicts with another of the
// same weight is applied nowhere, and the warning gives its file and the reason.
func TestConflictingOverlayIsNamedInTheWarnings(t *testing.T) {
	other := strings.ReplaceAll(strings.ReplaceAll(cheapM5, "savings-plan", "another"), `"0.01"`, `"0.02"`)
	rep := planOverlaid(t, pricedPool+cheapM5+other, "")
	ws := strings.Join(rep.Warnings(), "\n")
	if !strings.Contains(ws, `pools.yaml:`) || !strings.Contains(ws, `NodeOverlay "another" is not applied (Conflict)`) {
		t.Errorf("warnings %q, want the conflicting overlay named at its file", ws)
	}
	if nc := rep.NodeClaims[0]; nc.InstanceType != "m5.large" || nc.PricePerHour > 0.01+0.02 {
		t.Errorf("%s at $%.4f/h, want the winning overlay's m5.large at $0.01/h", nc.InstanceType, nc.PricePerHour)
	}
}
