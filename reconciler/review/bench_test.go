package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/manifests/build"
)

// families are the instance types the benchmark's pools choose from, one per pool.
var families = []string{"m5.large, m5.xlarge, m5.2xlarge", "c5.large, c5.xlarge, c5.2xlarge", "r5.large, r5.xlarge, r5.2xlarge", "m6i.large, m6i.xlarge", "c6i.large, c6i.xlarge"}

// bigRepo is a pools repository of n NodePools, each for the pods labelled with its team.
func bigRepo(n int, changed string) map[string]string {
	files := map[string]string{"pools/nodeclass.yaml": nodeClass}
	var pools strings.Builder
	for i := 0; i < n; i++ {
		types := families[i%len(families)]
		if i == 0 && changed != "" {
			types = changed
		}
		fmt.Fprintf(&pools, "---\n%s", strings.Replace(strings.Replace(pool(types, "1000", fmt.Sprintf("t%d", i)), "name: default\nspec:", fmt.Sprintf("name: pool-%d\nspec:", i), 1),
			"      nodeClassRef:", fmt.Sprintf("      taints: [{key: team, value: t%d, effect: NoSchedule}]\n      nodeClassRef:", i), 1))
	}
	files["pools/nodepools.yaml"] = pools.String()
	return files
}

// bigWorkload is pods Deployments of 20 replicas spread over the teams, as a status snapshot
// holds them.
func bigWorkload(b *testing.B, pods, teams int) *simulate.Workload {
	var w strings.Builder
	for i := 0; i < pods/20; i++ {
		fmt.Fprintf(&w, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-%d, namespace: ns-%d}
spec:
  replicas: 20
  selector: {matchLabels: {app: app-%d}}
  template:
    metadata: {labels: {app: app-%d}}
    spec:
      nodeSelector: {team: t%d}
      tolerations: [{key: team, operator: Equal, value: t%d, effect: NoSchedule}]
      containers: [{name: c0, resources: {requests: {cpu: %dm, memory: %dMi}}}]
`, i, i%50, i, i, i%teams, i%teams, 100+(i*37)%900, 256+(i*101)%3800)
	}
	objs, err := build.LoadFile(context.Background(), "workload.yaml", []byte(w.String()))
	if err != nil {
		b.Fatal(err)
	}
	wl, err := simulate.WorkloadOf(objs, 0)
	if err != nil {
		b.Fatal(err)
	}
	return wl
}

// BenchmarkPlan200Pools10kPods: `karpool plan` of a change to one of 200 NodePools against a
// 10,000-pod snapshot (issue target: under 5 s on this machine).
func BenchmarkPlan200Pools10kPods(b *testing.B) {
	w := bigWorkload(b, 10_000, 200)
	base, head := tree("base", bigRepo(200, "")), tree("head", bigRepo(200, "c5.large, c5.xlarge"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := Make(context.Background(), Input{Base: base, Head: head, Path: "pools", Workload: w, Now: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		if p.Failed() || p.Head.Pods != 10_000 || len(p.Pools) != 200 {
			b.Fatalf("failed %v, %d pods, %d pools, %d unschedulable: %s", p.Failed(), p.Head.Pods, len(p.Pools), len(p.Unschedulable), p.Head.Error+fmt.Sprint(p.Head.Findings))
		}
	}
}

// manyClasses is bigRepo's pools spread over k EC2NodeClasses.
func manyClasses(files map[string]string, k int) map[string]string {
	var classes strings.Builder
	for i := 0; i < k; i++ {
		fmt.Fprintf(&classes, "---\n%s", strings.Replace(nodeClass, "name: default", fmt.Sprintf("name: class-%d", i), 1))
	}
	files["pools/nodeclass.yaml"] = classes.String()
	var pools strings.Builder
	for i, doc := range strings.Split(files["pools/nodepools.yaml"], "---\n")[1:] {
		fmt.Fprintf(&pools, "---\n%s", strings.Replace(doc, "        name: default", fmt.Sprintf("        name: class-%d", i%k), 1))
	}
	files["pools/nodepools.yaml"] = pools.String()
	return files
}

// BenchmarkPlan1000Pools500Classes: `karpool plan` of a change to one of 1,000 NodePools on 500
// EC2NodeClasses against a 10,000-pod snapshot (target: under 10 s and 1 GB).
func BenchmarkPlan1000Pools500Classes(b *testing.B) {
	w := bigWorkload(b, 10_000, 1000)
	base := tree("base", manyClasses(bigRepo(1000, ""), 500))
	head := tree("head", manyClasses(bigRepo(1000, "c5.large, c5.xlarge"), 500))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := Make(context.Background(), Input{Base: base, Head: head, Path: "pools", Workload: w, Now: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		if p.Failed() || p.Head.Pods != 10_000 || len(p.Pools) != 1000 {
			b.Fatalf("failed %v, %d pods, %d pools: %s", p.Failed(), p.Head.Pods, len(p.Pools), p.Head.Error+fmt.Sprint(p.Head.Findings))
		}
	}
}

// BenchmarkFleet20Clusters: `karpool plan --fleet` of a change to the shared base of 20
// clusters (overlays of one base of 50 NodePools), each with its own snapshot of 1,000 to
// 10,000 pods, into one comment (issue target: under 30 s and 2 GB).
func BenchmarkFleet20Clusters(b *testing.B) {
	fleetFiles := func(changed string) map[string]string {
		files := bigRepo(50, changed)
		files["pools/kustomization.yaml"] = "resources: [nodeclass.yaml, nodepools.yaml]\n"
		for i := 0; i < 20; i++ {
			files[fmt.Sprintf("clusters/c%02d/kustomization.yaml", i)] = "resources: [../../pools]\n"
		}
		return files
	}
	base, head := tree("base", fleetFiles("")), tree("head", fleetFiles("c5.large, c5.xlarge"))
	in := FleetInput{Base: base, Head: head, Now: time.Now()}
	for i := 0; i < 20; i++ {
		pods := 1000 + i*9000/19
		in.Clusters = append(in.Clusters, Cluster{Name: fmt.Sprintf("c%02d", i), Path: fmt.Sprintf("clusters/c%02d", i), Workload: bigWorkload(b, pods, 50)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fp := MakeFleet(context.Background(), in)
		md := fp.Markdown("bench", "bench")
		if fp.Failed() || fp.Changed() != 20 || len(md) > MaxComment {
			b.Fatalf("failed %v, %d changed, comment of %d characters", fp.Failed(), fp.Changed(), len(md))
		}
	}
}
