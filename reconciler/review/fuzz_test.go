package review

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzMake: whatever a pull request puts in its files, a review either explains what is wrong
// or plans it; it never panics, and its comment stays under the cap.
func FuzzMake(f *testing.F) {
	f.Add(pool("t3.medium", "40", "web"), app(3))
	f.Add(strings.Replace(pool("t3.small", "20", "web"), "requirements:", "requirement:", 1), app(1))
	f.Add("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: {requirements: []}}}\n", "kind: List\nitems: [&a {}, *a]\n")
	f.Add("{", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec: {replicas: 1000000000}\n")
	f.Fuzz(func(t *testing.T, nodePool, workload string) {
		head := with(map[string]string{"pools/nodepool.yaml": nodePool, "pools/app.yaml": workload})
		p, err := Make(context.Background(), Input{
			Base: tree("base", base), Head: tree("head", head), Path: "pools", MaxPods: 2000,
			Now: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC),
		})
		if err != nil {
			t.Fatalf("a revision's content gave an error instead of a plan: %v", err)
		}
		if md := p.Markdown("fuzz"); len(md) > MaxComment || !strings.HasPrefix(md, Marker("pools")) {
			t.Fatalf("comment of %d characters, marker missing: %.200s", len(md), md)
		}
		if !p.Failed() && !p.Head.Planned() {
			t.Fatal("the head neither failed nor was planned")
		}
	})
}
