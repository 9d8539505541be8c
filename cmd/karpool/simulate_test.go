package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestSimulateWorkshopExample(t *testing.T) {
	dir := t.TempDir()
	wl, err := os.ReadFile("../../examples/workshop/workload/inflate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scaled := filepath.Join(dir, "inflate.yaml")
	if err := os.WriteFile(scaled, []byte(strings.Replace(string(wl), "\n  replicas: 0\n", "\n  replicas: 5\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run("simulate", "--pools", "../../examples/workshop", "--workload", scaled, "--output", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		NodeClaims []struct {
			InstanceType string   `json:"instanceType"`
			CapacityType string   `json:"capacityType"`
			Pods         []string `json:"pods"`
		} `json:"nodeClaims"`
		Unschedulable []any   `json:"unschedulable"`
		TotalPerHour  float64 `json:"totalPerHour"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.NodeClaims) != 1 || rep.NodeClaims[0].InstanceType != "m5.large" || rep.NodeClaims[0].CapacityType != "on-demand" || len(rep.NodeClaims[0].Pods) != 5 {
		t.Errorf("got %+v, want one m5.large on-demand with 5 pods", rep.NodeClaims)
	}
}

func TestSimulateUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--generate", "lognormal:10"},
		{"simulate", "--pools", "x"},
		{"simulate", "--pools", "x", "--generate", "lognormal:1", "--output", "yaml"},
		{"simulate", "--pools", "x", "--generate", "lognormal:1", "--region", "mars-1"},
	} {
		_, err := run(args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: error %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	_, err := run("simulate", "--pools", "no-such-dir", "--generate", "lognormal:1")
	if err == nil || exitCode(err) != 1 {
		t.Errorf("missing pools dir: error %v, want exit 1", err)
	}
}

// TestSimulateBoundsBelowCost: with a pool that allows burstable types, which the engine
// launches for small pods, the printed bounds stay below the printed cost.
func TestSimulateBoundsBelowCost(t *testing.T) {
	dir := t.TempDir()
	var docs []string
	for _, f := range []string{"nodepool.yaml", "ec2nodeclass.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/workshop", f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	types := `values: ["c5.large", "m5.large", "r5.large", "m5.xlarge"]`
	pools := strings.Join(docs, "---\n")
	if !strings.Contains(pools, types) {
		t.Fatalf("the workshop NodePool no longer lists %s", types)
	}
	pools = strings.Replace(strings.Replace(pools, types, `values: ["t", "m"]`, 1), "key: node.kubernetes.io/instance-type", "key: karpenter.k8s.aws/instance-category", 1)
	poolFile := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(poolFile, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	shapes := filepath.Join(dir, "shapes.csv")
	if err := os.WriteFile(shapes, []byte("name,replicas,cpu,memory,node-selector\nweb,3,250m,512Mi,type=karpenter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run("simulate", "--pools", poolFile, "--workload", shapes)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	total := regexp.MustCompile(`Total: \$([0-9.]+)/h .*; lower bound \$([0-9.]+)/h, cost/bound [0-9.]+; whole-pod bound \$([0-9.]+)/h`).FindStringSubmatch(out)
	if total == nil || !regexp.MustCompile(`× +t\d`).MatchString(out) {
		t.Fatalf("want burstable nodes and the cost with both bounds in:\n%s", out)
	}
	cost, _ := strconv.ParseFloat(total[1], 64)
	for _, b := range total[2:] {
		if v, _ := strconv.ParseFloat(b, 64); v > cost {
			t.Errorf("bound $%v/h above the cost $%v/h:\n%s", v, cost, out)
		}
	}
}

func TestSimulateGenerateSmallDeployments(t *testing.T) {
	out, err := run("simulate", "--pools", "../../examples/workshop", "--generate", "smalldeploys:200", "--output", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		NodeClaims []struct {
			Pods []string `json:"pods"`
		} `json:"nodeClaims"`
		Unschedulable        []any   `json:"unschedulable"`
		TotalPerHour         float64 `json:"totalPerHour"`
		WholePodBoundPerHour float64 `json:"wholePodBoundPerHour"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pods := 0
	for _, nc := range rep.NodeClaims {
		pods += len(nc.Pods)
	}
	if pods+len(rep.Unschedulable) != 200 || rep.WholePodBoundPerHour <= 0 || rep.WholePodBoundPerHour > rep.TotalPerHour {
		t.Errorf("%d pods placed, %d unschedulable, $%v/h, whole-pod bound $%v/h; want 200 pods and 0 < bound ≤ cost", pods, len(rep.Unschedulable), rep.TotalPerHour, rep.WholePodBoundPerHour)
	}
}
