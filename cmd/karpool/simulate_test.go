package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulateWorkshopExample(t *testing.T) {
	dir := t.TempDir()
	wl, err := os.ReadFile("../../examples/workshop/inflate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scaled := filepath.Join(dir, "inflate.yaml")
	if err := os.WriteFile(scaled, []byte(strings.Replace(string(wl), "replicas: 0", "replicas: 5", 1)), 0o644); err != nil {
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
