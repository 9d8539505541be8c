package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/testbed/localenv"
)

const (
	clusterName = "karpool-bench"
	region      = "us-east-1"
	namespace   = "default"
)

// deployment is one Deployment of the workload: replicas of one pod shape.
type deployment struct {
	Name     string
	Replicas int
	CPUMilli int64
	MemMiB   int64
}

// workload draws n Deployments holding pods pods in all, seeded: replica counts from a random
// split (at least 5 each), cpu from common request sizes, and memory at 1, 2, 4 or 8 GiB per
// vCPU so that c, m and r types all have pods they suit.
func workload(seed uint64, deployments, pods int) []deployment {
	rng := rand.New(rand.NewPCG(seed, 0x6b6172706f6f6c))
	weights := make([]float64, deployments)
	total := 0.0
	for i := range weights {
		weights[i] = 0.2 + rng.ExpFloat64()
		total += weights[i]
	}
	cpus := []int64{100, 250, 500, 750, 1000, 1500, 2000}
	ratios := []int64{1024, 2048, 4096, 8192} // MiB per vCPU
	out := make([]deployment, deployments)
	left := pods
	for i := range out {
		n := max(5, int(math.Round(float64(pods)*weights[i]/total)))
		if i == len(out)-1 || n > left-5*(len(out)-1-i) {
			n = left - 5*(len(out)-1-i)
		}
		left -= n
		cpu := cpus[rng.IntN(len(cpus))]
		out[i] = deployment{Name: fmt.Sprintf("app-%02d", i), Replicas: n, CPUMilli: cpu,
			MemMiB: cpu * ratios[rng.IntN(len(ratios))] / 1000}
	}
	return out
}

// scaled is the workload with every Deployment at frac of its replicas (rounded up).
func scaled(ds []deployment, frac float64) []deployment {
	out := slices.Clone(ds)
	for i := range out {
		out[i].Replicas = int(math.Ceil(float64(out[i].Replicas) * frac))
	}
	return out
}

func podCount(ds []deployment) int {
	n := 0
	for _, d := range ds {
		n += d.Replicas
	}
	return n
}

// workloadYAML renders the Deployments as `karpool simulate` and kubectl read them.
func workloadYAML(ds []deployment) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  replicas: %[3]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          resources:
            requests: {cpu: %[4]dm, memory: %[5]dMi}
`, d.Name, namespace, d.Replicas, d.CPUMilli, d.MemMiB)
	}
	return b.String()
}

// poolTypes is the pool of the benchmark: c, m and r types of generations 5 to 8, the same
// set karpool's NodePool selects by requirements and Karpenter's instance-type file lists.
func poolTypes(cat *catalog.Catalog, opts catalog.NodeClassOptions) []catalog.InstanceType {
	var out []catalog.InstanceType
	for _, it := range cat.InstanceTypes(opts) {
		gen, _ := strconv.Atoi(it.Labels["karpenter.k8s.aws/instance-generation"])
		switch it.Labels["karpenter.k8s.aws/instance-category"] {
		case "c", "m", "r":
			if gen >= 5 && gen <= 8 {
				out = append(out, it)
			}
		}
	}
	return out
}

// nodePool is the NodePool both systems run: on-demand Linux nodes of the node class, with
// the extra requirements, consolidated as soon as they are empty or underused.
func nodePool(classGroup, classKind string, requirements ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: %s, kind: %s, name: default}
      requirements:
`, classGroup, classKind)
	for _, r := range append(requirements, "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
		"{key: kubernetes.io/os, operator: In, values: [linux]}") {
		fmt.Fprintf(&b, "        - %s\n", r)
	}
	b.WriteString("  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s\n")
	return b.String()
}

// karpoolPools is the EC2NodeClass and NodePool karpool runs (and `karpool simulate` reads).
var karpoolPools = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-` + clusterName + `
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: ` + clusterName + `}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: ` + clusterName + `}
---
` + nodePool("karpenter.k8s.aws", "EC2NodeClass",
	"{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}",
	`{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}`,
	`{key: karpenter.k8s.aws/instance-generation, operator: Lt, values: ["9"]}`)

// karpenterPools is the same pool for Karpenter's kwok provider: its instance-type file holds
// exactly the pool's types (poolTypes), so the pool needs no type requirements.
// Its KWOKNodeClass's nodeRegistrationDelay is the kwok provider's boot time: how long after
// the launch its Node appears.
func karpenterPools(registration time.Duration) string {
	return `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: ` + registration.String() + `
---
` + nodePool("karpenter.kwok.sh", "KWOKNodeClass")
}

// kwokType is one entry of the kwok provider's instance-type file.
type kwokType struct {
	Name             string            `json:"name"`
	Architecture     string            `json:"architecture"`
	OperatingSystems []string          `json:"operatingSystems"`
	Resources        map[string]string `json:"resources"`
	Offerings        []kwokOffering    `json:"offerings"`
}

type kwokOffering struct {
	Price        float64           `json:"Price"`
	Available    bool              `json:"Available"`
	Requirements []kwokRequirement `json:"Requirements"`
}

type kwokRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// kwokReserved is what the kwok provider takes from a type's resources for allocatable.
var kwokReserved = map[catalog.Resource]int64{catalog.CPU: 100, catalog.Memory: 10 * catalog.Mi}

// kwokTypes renders the pool's types for Karpenter: resources such that the kwok provider's
// allocatable (resources less 100m cpu and 10Mi memory) equals karpool's, in karpool's zones,
// on-demand, at the EC2 list price (what Karpenter sees on AWS: no volume prices).
func kwokTypes(cat *catalog.Catalog, types []catalog.InstanceType) []kwokType {
	out := make([]kwokType, 0, len(types))
	for _, it := range types {
		k := kwokType{Name: it.Name, Architecture: it.Labels["kubernetes.io/arch"], OperatingSystems: []string{"linux"},
			Resources: map[string]string{}}
		for _, r := range []catalog.Resource{catalog.CPU, catalog.Memory, catalog.Pods, catalog.EphemeralStorage} {
			v := it.Allocatable[r] + kwokReserved[r]
			q := resource.NewQuantity(v, resource.BinarySI)
			if r == catalog.CPU {
				q = resource.NewMilliQuantity(v, resource.DecimalSI)
			}
			k.Resources[catalog.ResourceNames[r]] = q.String()
		}
		spec, _ := cat.Spec(it.Name)
		for _, o := range it.Offerings {
			if o.CapacityType != catalog.CapacityTypeOnDemand {
				continue
			}
			k.Offerings = append(k.Offerings, kwokOffering{Price: spec.OnDemandPrice, Available: true,
				Requirements: []kwokRequirement{
					{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{o.CapacityType}},
					{Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{o.Zone}},
				}})
		}
		out = append(out, k)
	}
	return out
}

// writeFiles lays out a run's inputs in dir: pools/ for karpool, instance-types.json, workload.yaml and workload-scaled.yaml.
func writeFiles(dir string, cat *catalog.Catalog, types []catalog.InstanceType, full, down []deployment) error {
	raw, err := json.MarshalIndent(kwokTypes(cat, types), "", " ")
	if err != nil {
		return err
	}
	files := map[string]string{
		"pools/pools.yaml":     karpoolPools,
		"workload.yaml":        workloadYAML(full),
		"workload-scaled.yaml": workloadYAML(down),
		"instance-types.json":  string(raw),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// scenario is the cluster a run starts from.
type scenario struct {
	name string
	// systemNode: the cluster has the tainted system node before the autoscaler adds any.
	systemNode bool
	// registration is how long after its launch a node registers: the simulator's and the kwok
	// provider's stand-in for an EC2 instance's boot.
	registration time.Duration
}

// scenarios resolves the names of -scenarios: system-node (one tainted system node, nodes
// register at launch), empty (no node at all, as a new cluster), boot (system node, nodes
// register boot after launch).
func scenarios(names []string, boot time.Duration) ([]scenario, error) {
	known := map[string]scenario{
		"system-node": {name: "system-node", systemNode: true},
		"empty":       {name: "empty"},
		"boot":        {name: "boot", systemNode: true, registration: boot},
	}
	var out []scenario
	for _, n := range names {
		sc, ok := known[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q (system-node, empty, boot)", n)
		}
		out = append(out, sc)
	}
	return out, nil
}

// systemNodeLabel marks the node the cluster has before any autoscaler adds one; the fleet's
// counts and prices leave it out.
const systemNodeLabel = "benchvs.karpool.dev/system"

// systemNode is the node every real cluster has before the autoscaler adds any: the autoscaler
// itself runs somewhere (a managed node group, or Fargate, whose nodes are tainted too). It is
// tainted CriticalAddonsOnly, as EKS system node groups often are, so no workload pod lands on
// it, and kwok keeps it Ready. Without it the kube-scheduler fails every pending pod with "no
// nodes available", an error it retries on a backoff timer whatever happens in the cluster,
// instead of waiting for a node that could take the pod — a path no real cluster takes.
func systemNode() *corev1.Node {
	const name = "system-0"
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{systemNodeLabel: "true", corev1.LabelHostname: name,
				corev1.LabelTopologyZone: region + "a", corev1.LabelTopologyRegion: region,
				corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
			Annotations: map[string]string{localenv.KwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7134Mi"), corev1.ResourcePods: resource.MustParse("29")},
		},
	}
}
