package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// workshopPools is the v1 workshop example (seed 003): the NodePool limited to c5.large,
// m5.large, r5.large and m5.xlarge on-demand, and its EC2NodeClass.
const workshopPools = "../../examples/workshop"

// workshopPool returns the workshop NodePool and EC2NodeClass as one file's text, for cases
// that edit it.
func workshopPool(t *testing.T) string {
	t.Helper()
	var docs []string
	for _, f := range []string{"nodepool.yaml", "ec2nodeclass.yaml"} {
		data, err := os.ReadFile(filepath.Join(workshopPools, f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	return strings.Join(docs, "---\n")
}

const inflate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
  namespace: other
spec:
  replicas: 5
  selector:
    matchLabels:
      app: inflate
  template:
    metadata:
      labels:
        app: inflate
    spec:
      nodeSelector:
        type: karpenter
      containers:
        - name: inflate
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.2
          resources:
            requests:
              memory: 1Gi
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorkshopFromFiles(t *testing.T) {
	dir := t.TempDir()
	pools := workshopPools
	wl := write(t, dir, "inflate.yaml", inflate)
	rep, err := Run(context.Background(), Options{PoolsPath: pools, WorkloadPath: wl})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.NodeClaims) != 1 || rep.NodeClaims[0].InstanceType != "m5.large" || rep.NodeClaims[0].CapacityType != "on-demand" {
		t.Fatalf("nodeclaims %+v, want one m5.large on-demand", rep.NodeClaims)
	}
	if len(rep.NodeClaims[0].Pods) != 5 || rep.NodeClaims[0].Pods[0] != "other/inflate-0" {
		t.Errorf("pods %v", rep.NodeClaims[0].Pods)
	}
	// m5.large's list price plus its default 20 GiB gp3 root volume.
	if rep.TotalPerHour != 0.096+20*0.08/730 || rep.LowerBoundPerHour <= 0 || rep.LowerBoundPerHour > rep.TotalPerHour {
		t.Errorf("total %v, bound %v", rep.TotalPerHour, rep.LowerBoundPerHour)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 ×  m5.large  on-demand", "$0.0982/h ($71.68/month)", "memory: 5Gi requested", "lower bound", "Unschedulable pods: 0"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// The JSON form is a contract: exactly these fields, arrays never null.
func TestJSONContract(t *testing.T) {
	rep, err := Run(context.Background(), Options{PoolsPath: workshopPools, Generate: "lognormal:50"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(top), []string{"lowerBoundPerHour", "nodeClaims", "placements", "solveSeconds", "totalPerHour", "unschedulable", "wholePodBoundPerHour"}; !reflect.DeepEqual(got, want) {
		t.Errorf("top-level fields %v, want %v", got, want)
	}
	for _, k := range []string{"nodeClaims", "placements", "unschedulable"} {
		if string(top[k]) == "null" {
			t.Errorf("%s is null, want an array", k)
		}
	}
	var ncs []map[string]json.RawMessage
	if err := json.Unmarshal(top["nodeClaims"], &ncs); err != nil || len(ncs) == 0 {
		t.Fatalf("nodeClaims: %v %s", err, top["nodeClaims"])
	}
	if got, want := keys(ncs[0]), []string{"capacityType", "instanceType", "instanceTypes", "pods", "pool", "pricePerHour", "zone"}; !reflect.DeepEqual(got, want) {
		t.Errorf("nodeClaim fields %v, want %v", got, want)
	}
	var unsched []map[string]json.RawMessage
	if err := json.Unmarshal(top["unschedulable"], &unsched); err != nil {
		t.Fatal(err)
	}
	for _, u := range unsched {
		if got := keys(u); !reflect.DeepEqual(got, []string{"pod", "reason"}) {
			t.Errorf("unschedulable fields %v", got)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestCSVWorkload(t *testing.T) {
	dir := t.TempDir()
	csvFile := write(t, dir, "shapes.csv", "# shapes\nname,replicas,cpu,memory,namespace,node-selector\nweb,3,500m,1Gi,shop,type=karpenter\nbatch,2,1,2Gi,,type=karpenter\n")
	rep, err := Run(context.Background(), Options{PoolsPath: workshopPools, WorkloadPath: csvFile})
	if err != nil {
		t.Fatal(err)
	}
	var pods []string
	for _, nc := range rep.NodeClaims {
		pods = append(pods, nc.Pods...)
	}
	sort.Strings(pods)
	want := []string{"default/batch-0", "default/batch-1", "shop/web-0", "shop/web-1", "shop/web-2"}
	if !reflect.DeepEqual(pods, want) || len(rep.Unschedulable) != 0 {
		t.Errorf("pods %v (unschedulable %v), want %v", pods, rep.Unschedulable, want)
	}
}

func TestInputErrors(t *testing.T) {
	dir := t.TempDir()
	pool := workshopPools
	typo := strings.Replace(workshopPool(t), "requirements:", "requirement:", 1)
	typoLine := 1 + strings.Count(typo[:strings.Index(typo, "requirement:")], "\n")
	legacy := write(t, dir, "legacy.yaml", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: old\nspec: {}\n")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"legacy pool", Options{PoolsPath: legacy, Generate: "lognormal:1"}, "legacy.yaml:1:13: NodePool/old apiVersion: karpenter.sh/v1beta1 is not served by Karpenter v1: write karpenter.sh/v1 (karpool migrate"},
		{"no pools", Options{PoolsPath: write(t, dir, "empty.yaml", "# nothing\n"), Generate: "lognormal:1"}, "no karpenter.sh/v1 NodePool"},
		{"bad csv column", Options{PoolsPath: pool, WorkloadPath: write(t, dir, "bad.csv", "name,replicas,cpu,memory,colour\nx,1,1,1Gi,red\n")}, "bad.csv:1: unknown column \"colour\""},
		{"bad csv quantity", Options{PoolsPath: pool, WorkloadPath: write(t, dir, "q.csv", "name,replicas,cpu,memory\nx,1,lots,1Gi\n")}, "q.csv:2: cpu \"lots\""},
		{"bad profile", Options{PoolsPath: pool, Generate: "poisson:10"}, "unknown profile \"poisson\""},
		{"bad count", Options{PoolsPath: pool, Generate: "lognormal"}, "want PROFILE:N"},
		{"bad region", Options{PoolsPath: pool, Generate: "lognormal:1", Region: "mars-1"}, "region \"mars-1\""},
		// The error names the line of the misspelt field.
		{"strict pool", Options{PoolsPath: write(t, dir, "typo.yaml", typo), Generate: "lognormal:1"}, fmt.Sprintf("typo.yaml:%d:7: NodePool/default spec.template.spec.requirement: unknown field", typoLine)},
	} {
		_, err := Run(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestDeterministicJSON(t *testing.T) {
	dir := t.TempDir()
	pool := write(t, dir, "pool.yaml", strings.Replace(workshopPool(t), `values: ["c5.large", "m5.large", "r5.large", "m5.xlarge"]`, `values: ["c5.large", "m5.large", "r5.large", "m5.xlarge", "c5.xlarge", "m5.2xlarge"]`, 1))
	var outs []string
	for i := 0; i < 3; i++ {
		rep, err := Run(context.Background(), Options{PoolsPath: pool, Generate: "karpenter-bench:300"})
		if err != nil {
			t.Fatal(err)
		}
		rep.SolveSeconds = 0
		var buf bytes.Buffer
		rep.WriteJSON(&buf)
		outs = append(outs, buf.String())
	}
	if outs[0] != outs[1] || outs[1] != outs[2] {
		t.Error("the JSON output differs between identical runs")
	}
}

// TestBoundsNeverAboveCost: both lower bounds of every pool stay at or below the cost of what
// the engine launches, on the examples, on generated workloads and on pools that allow
// burstable types (which the engine picks for small workloads: a bound that left them out
// printed cost/bound 0.45).
func TestBoundsNeverAboveCost(t *testing.T) {
	if testing.Short() {
		t.Skip("solves a dozen workloads against the full catalog")
	}
	dir := t.TempDir()
	instanceTypes := `- key: node.kubernetes.io/instance-type
          operator: In
          values: ["c5.large", "m5.large", "r5.large", "m5.xlarge"]`
	pool := func(name, requirement string) string {
		text := workshopPool(t)
		if !strings.Contains(text, instanceTypes) {
			t.Fatalf("the workshop NodePool no longer lists its instance types as %q", instanceTypes)
		}
		return write(t, dir, name, strings.Replace(text, instanceTypes, requirement, 1))
	}
	burstable := pool("burstable.yaml", `- key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["t", "m"]`)
	anything := pool("anything.yaml", `- key: karpenter.sh/nodepool
          operator: Exists`)
	wl := write(t, dir, "inflate.yaml", inflate)
	small := write(t, dir, "small.csv", "name,replicas,cpu,memory,node-selector\nweb,3,250m,512Mi,type=karpenter\napi,2,500m,1Gi,type=karpenter\n")
	for _, tc := range []struct {
		name string
		opts Options
		// burstable says the engine is expected to launch a burstable type.
		burstable bool
	}{
		{"workshop, inflate", Options{PoolsPath: workshopPools, WorkloadPath: wl}, false},
		{"workshop, karpenter-bench", Options{PoolsPath: workshopPools, Generate: "karpenter-bench:300"}, false},
		{"workshop, lognormal", Options{PoolsPath: workshopPools, Generate: "lognormal:500"}, false},
		{"workshop, smalldeploys", Options{PoolsPath: workshopPools, Generate: "smalldeploys:500"}, false},
		{"seed 002, t3.small only", Options{PoolsPath: "../../examples/seeds/002-hpa-terraform", Generate: "smalldeploys:20"}, true},
		{"t and m, inflate", Options{PoolsPath: burstable, WorkloadPath: wl}, true},
		{"t and m, small shapes", Options{PoolsPath: burstable, WorkloadPath: small}, true},
		{"t and m, smalldeploys", Options{PoolsPath: burstable, Generate: "smalldeploys:300"}, false},
		{"every type, small shapes", Options{PoolsPath: anything, WorkloadPath: small}, true},
		{"every type, lognormal", Options{PoolsPath: anything, Generate: "lognormal:1000"}, false},
		{"every type, smalldeploys", Options{PoolsPath: anything, Generate: "smalldeploys:1000"}, false},
		{"every type, karpenter-bench", Options{PoolsPath: anything, Generate: "karpenter-bench:300"}, false},
	} {
		rep, err := Run(context.Background(), tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(rep.NodeClaims) == 0 {
			t.Fatalf("%s: no NodeClaims (unschedulable: %v)", tc.name, rep.Unschedulable)
		}
		if tc.burstable && !launchesBurstable(rep) {
			t.Errorf("%s: no burstable type launched, so the case does not test what it should", tc.name)
		}
		for _, p := range rep.pools {
			if p.BoundErr != "" {
				t.Errorf("%s: pool %s: no bound: %s", tc.name, p.Name, p.BoundErr)
			}
			if p.Nodes > 0 && p.Bound <= 0 {
				t.Errorf("%s: pool %s: bound %v for %d nodes", tc.name, p.Name, p.Bound, p.Nodes)
			}
			if p.Bound > p.PerHour*(1+1e-9) || p.WholePods > p.PerHour*(1+1e-9) {
				t.Errorf("%s: pool %s costs %v/h, below its bounds %v (lower) and %v (whole-pod)", tc.name, p.Name, p.PerHour, p.Bound, p.WholePods)
			}
		}
		if rep.LowerBoundPerHour > rep.TotalPerHour*(1+1e-9) || rep.WholePodBoundPerHour > rep.TotalPerHour*(1+1e-9) {
			t.Errorf("%s: total %v/h below the bounds %v and %v", tc.name, rep.TotalPerHour, rep.LowerBoundPerHour, rep.WholePodBoundPerHour)
		}
		t.Logf("%s: $%.4f/h, cost/bound %.3f, cost/whole-pod bound %.3f", tc.name, rep.TotalPerHour, rep.TotalPerHour/rep.LowerBoundPerHour, rep.TotalPerHour/rep.WholePodBoundPerHour)
	}
}

func launchesBurstable(rep *Report) bool {
	for _, nc := range rep.NodeClaims {
		if strings.HasPrefix(nc.InstanceType, "t") {
			return true
		}
	}
	return false
}
