package simulate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeWorkload(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkloadResourcesAreValidated: what the API server refuses on create, simulate refuses
// too, each problem at its file:line:col with what to do, all of them at once.
func TestWorkloadResourcesAreValidated(t *testing.T) {
	p := writeWorkload(t, "w.yaml", `# pods
apiVersion: v1
kind: Pod
metadata: {name: negative}
spec:
  containers:
    - name: c
      resources:
        requests:
          cpu: "-1"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  template:
    spec:
      initContainers:
        - name: init
          resources:
            requests: {memory: lots}
      containers:
        - name: c
          resources:
            requests: {cpu: "2", nvidia.com/gpu: "1", cpus: "1"}
            limits: {cpu: "1", nvidia.com/gpu: "2"}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  template:
    spec:
      resources:
        requests: {ephemeral-storage: 1Gi}
      containers:
        - name: c
          resources:
            requests: {aws.amazon.com/neuron: "0.5", example.com/fpga: "1"}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  template:
    spec:
      containers:
        - name: c
          resources:
            limits: {hugepages-2Mi: 1Gi}
`)
	_, _, err := LoadWorkload(context.Background(), p, 0)
	if err == nil {
		t.Fatal("invalid workload accepted")
	}
	got := strings.Split(err.Error(), "\n")
	want := []string{
		p + `:10:16: Pod "negative": spec.containers[0].resources.requests.cpu: -1 is negative: a quantity must be 0 or more`,
		p + `:22:32: Deployment "web": spec.template.spec.initContainers[0].resources.requests.memory: "lots" is not a quantity: write it like 250m, 2 or 1.5 for cpu, 512Mi or 4Gi for memory`,
		p + `:26:61: Deployment "web": spec.template.spec.containers[0].resources.requests.cpus: "cpus" is not a container resource: use cpu, memory, ephemeral-storage`,
		p + `:26:29: Deployment "web": spec.template.spec.containers[0].resources.requests.cpu: request 2 is above the limit 1: lower the request or raise the limit`,
		p + `:26:50: Deployment "web": spec.template.spec.containers[0].resources.requests.nvidia.com/gpu: request 1 must equal the limit 2: nvidia.com/gpu cannot be overcommitted`,
		p + `:40:47: StatefulSet "db": spec.template.spec.containers[0].resources.requests.aws.amazon.com/neuron: 0.5 is not a whole number`,
		p + `:40:72: StatefulSet "db": spec.template.spec.containers[0].resources.requests.example.com/fpga: example.com/fpga is requested without a limit`,
		p + `:36:39: StatefulSet "db": spec.template.spec.resources.requests.ephemeral-storage: "ephemeral-storage" is not supported at pod level`,
		p + `:51:37: DaemonSet "agent": spec.template.spec.containers[0].resources: hugepages-2Mi needs a cpu or memory request or limit as well`,
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), err)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("missing\n  %s\nin\n  %s", w, strings.Join(got, "\n  "))
		}
	}
}

// TestValidWorkloadResourcesPass: requests at or below limits, extended resources whole and
// equal to their limits, pod-level cpu and memory, hugepages next to memory: all accepted.
func TestValidWorkloadResourcesPass(t *testing.T) {
	p := writeWorkload(t, "ok.yaml", `apiVersion: v1
kind: Pod
metadata: {name: ok}
spec:
  resources:
    requests: {cpu: 500m, memory: 1Gi}
    limits: {cpu: "1"}
  containers:
    - name: c
      resources:
        requests: {cpu: 250m, memory: 512Mi, nvidia.com/gpu: 1, hugepages-2Mi: 64Mi, ephemeral-storage: "0"}
        limits: {cpu: 250m, nvidia.com/gpu: 1, hugepages-2Mi: 64Mi}
`)
	w, _, err := LoadWorkload(context.Background(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.pods) != 1 {
		t.Fatalf("%d pods, want 1", len(w.pods))
	}
}

// TestListItemsAreValidatedAtTheirLines: items of a List are read as objects of their own, as
// kustomize reads them, each problem at its field.
func TestListItemsAreValidatedAtTheirLines(t *testing.T) {
	p := writeWorkload(t, "list.yaml", `
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: a}
    spec:
      containers: [{name: c, resources: {requests: {memory: "-1Gi"}}}]
`)
	_, _, err := LoadWorkload(context.Background(), p, 0)
	if err == nil || !strings.HasPrefix(err.Error(), p+`:9:61: Pod "a": spec.containers[0].resources.requests.memory: -1Gi is negative`) {
		t.Fatalf("got %v", err)
	}
}

func TestCSVNegativeRequest(t *testing.T) {
	p := writeWorkload(t, "w.csv", "name,replicas,cpu,memory\nweb,2,-1,1Gi\n")
	_, _, err := LoadWorkload(context.Background(), p, 0)
	if err == nil || !strings.Contains(err.Error(), p+":2: cpu -1 is negative") {
		t.Fatalf("got %v", err)
	}
}

// TestReplicasAreCapped: a replica count past the cap is refused at its line before any pod is
// made, so the error comes at once and memory stays small; CSV rows and --generate likewise.
func TestReplicasAreCapped(t *testing.T) {
	p := writeWorkload(t, "huge.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: huge}
spec:
  replicas: 100000000
  template:
    spec:
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]
`)
	_, _, err := LoadWorkload(context.Background(), p, 0)
	want := p + `:5:13: Deployment "huge": spec.replicas asks for 100000000 pods, which makes the workload 100000000 pods, more than the 100000 karpool plans at most`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %s", err, want)
	}
	csv := writeWorkload(t, "w.csv", "name,replicas,cpu,memory\na,6,1,1Gi\nb,5,1,1Gi\n")
	if _, _, err := LoadWorkload(context.Background(), csv, 10); err == nil || !strings.Contains(err.Error(), csv+":3: replicas asks for 5 pods, which makes the workload 11 pods, more than the 10") {
		t.Fatalf("csv: got %v", err)
	}
	if w, _, err := LoadWorkload(context.Background(), csv, 11); err != nil || w.Pods() != 11 {
		t.Fatalf("csv at the cap: %v", err)
	}
	if _, err := Generate("lognormal:11", 10); err == nil || !strings.Contains(err.Error(), "more than the 10") {
		t.Fatalf("generate: got %v", err)
	}
}

// TestAtMax: an HPA scales its target's replicas to maxReplicas, other pods keep their place,
// and the cap still holds.
func TestAtMax(t *testing.T) {
	p := writeWorkload(t, "w.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  template:
    spec:
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  containers: [{name: c}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {kind: Deployment, name: web}
  maxReplicas: 5
`)
	w, _, err := LoadWorkload(context.Background(), p, 6)
	if err != nil {
		t.Fatal(err)
	}
	peak, err := w.AtMax()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range peak.pods {
		names = append(names, pod.Name)
	}
	if got := strings.Join(names, ","); got != "web-0,web-1,web-2,web-3,web-4,solo" || w.Pods() != 3 {
		t.Errorf("peak pods %s (workload %d pods)", got, w.Pods())
	}
	if h := w.HPAs(); len(h) != 1 || h[0].Replicas != 2 || h[0].Max != 5 || h[0].Min != 1 {
		t.Errorf("hpas %+v", h)
	}
	small, _, err := LoadWorkload(context.Background(), p, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.AtMax(); err == nil || !strings.Contains(err.Error(), "makes 6 pods, more than the 5") {
		t.Errorf("cap at the peak: %v", err)
	}
}

// TestHostileNumbersAreRefused: numbers that would read as something else — a quantity whose
// thousandths overflow (1e18 cores read as 0 and "fit" anywhere), a negative replica count
// (read as no pods), a key given twice (last one wins in some readers, first in others) — are
// errors at their file:line:col.
func TestHostileNumbersAreRefused(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: %s\n  template:\n    spec:\n      containers:\n        - name: c\n          resources:\n            requests: {cpu: %s}\n"
	for _, c := range []struct{ name, content, want string }{
		{"overflowing quantity", fmt.Sprintf(deployment, "1", "1e18"), `:11:29: Deployment "web": spec.template.spec.containers[0].resources.requests.cpu: 1000000000000000000 is too large`},
		{"quantity past int64 thousandths", fmt.Sprintf(deployment, "1", "9223372036854776"), `:11:29: Deployment "web": spec.template.spec.containers[0].resources.requests.cpu: 9223372036854776 is too large`},
		{"negative replicas", fmt.Sprintf(deployment, "-5", "1"), `:5:13: Deployment "web": spec.replicas is -5`},
		{"duplicate key", fmt.Sprintf(deployment, "1\n  replicas: 2", "1"), `:6:3: key "replicas" is given twice in this mapping (first at line 5)`},
	} {
		p := writeWorkload(t, "w.yaml", c.content)
		_, _, err := LoadWorkload(context.Background(), p, 0)
		if err == nil || !strings.Contains(err.Error(), p+c.want) {
			t.Errorf("%s: got %v, want %s%s", c.name, err, p, c.want)
		}
	}
}

// TestPoolCountsAreCapped: a revision may not hold more NodePools, or more distinct node class
// settings, than the planner is sized for; the error names the first one too many.
func TestPoolCountsAreCapped(t *testing.T) {
	pool := "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p%d}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c%d}\n      requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]\n"
	class := "---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c%d}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: r\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n  kubelet: {maxPods: %d}\n"
	var many strings.Builder
	for i := range MaxNodePools + 1 {
		fmt.Fprintf(&many, pool, i, 0)
	}
	p := writeWorkload(t, "pools.yaml", many.String())
	if _, err := LoadPools(context.Background(), p); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`NodePool "p%d" is one more than the %d NodePools`, MaxNodePools, MaxNodePools)) {
		t.Fatalf("%d pools: got %v", MaxNodePools+1, err)
	}
	many.Reset()
	for i := range MaxNodeClassSettings + 1 {
		fmt.Fprintf(&many, pool+class, i, i, i, 10+i)
	}
	p = writeWorkload(t, "pools.yaml", many.String())
	_, err := Run(context.Background(), Options{PoolsPath: p, Generate: "lognormal:10"})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d EC2NodeClasses with different kubelet", MaxNodeClassSettings)) {
		t.Fatalf("%d class settings: got %v", MaxNodeClassSettings+1, err)
	}
}
