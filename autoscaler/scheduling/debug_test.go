package scheduling_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/testbed/schedulingcheck"
)

func TestDebugSeeds(t *testing.T) {
	if os.Getenv("DEBUG_SEEDS") == "" {
		t.Skip()
	}
	n, _ := strconv.Atoi(os.Getenv("DEBUG_SEEDS"))
	from, _ := strconv.Atoi(os.Getenv("DEBUG_FROM"))
	for seed := int64(from) + 1; seed <= int64(n); seed++ {
		in := randomInput(seed)
		res := scheduling.Solve(in)
		if err := schedulingcheck.Check(in, res); err != nil {
			t.Logf("seed %d: %s", seed, strings.SplitN(err.Error(), "\n", 2)[0])
		}
	}
}

func TestDebugOne(t *testing.T) {
	s := os.Getenv("DEBUG_SEED")
	if s == "" {
		t.Skip()
	}
	seed, _ := strconv.ParseInt(s, 10, 64)
	in := randomInput(seed)
	for _, p := range in.Pools {
		t.Logf("pool %s weight=%v reqs=%+v labels=%v taints=%v limits=%v", p.NodePool.Name, p.NodePool.Spec.Weight, p.NodePool.Spec.Template.Spec.Requirements, p.NodePool.Spec.Template.Labels, p.NodePool.Spec.Template.Spec.Taints, p.NodePool.Spec.Limits)
	}
	for _, n := range in.Nodes {
		t.Logf("node %s zone=%s pool=%s unsched=%v taints=%v pods=%d", n.Node.Name, n.Node.Labels["topology.kubernetes.io/zone"], n.Node.Labels["karpenter.sh/nodepool"], n.Node.Spec.Unschedulable, n.Node.Spec.Taints, len(n.Pods))
		for _, p := range n.Pods {
			t.Logf("   bound %s %v", p.Name, p.Labels)
		}
	}
	seen := map[string]bool{}
	for _, p := range in.Pods {
		app := p.Labels["app"]
		if seen[app] {
			continue
		}
		seen[app] = true
		t.Logf("deploy %s labels=%v req=%v sel=%v aff=%+v tol=%v tsc=%+v ports=%v init=%v podres=%v vols=%d", app, p.Labels, p.Spec.Containers[0].Resources.Requests, p.Spec.NodeSelector, p.Spec.Affinity, p.Spec.Tolerations, p.Spec.TopologySpreadConstraints, p.Spec.Containers[0].Ports, p.Spec.InitContainers, p.Spec.Resources, len(p.Spec.Volumes))
	}
	for _, ds := range in.DaemonSets {
		t.Logf("daemonset %s ports=%v podres=%v", ds.Name, ds.Spec.Template.Spec.Containers[0].Ports, ds.Spec.Template.Spec.Resources)
	}
	for _, c := range in.PersistentVolumeClaims {
		t.Logf("claim %s/%s volume=%q class=%v", c.Namespace, c.Name, c.Spec.VolumeName, ptrString(c.Spec.StorageClassName))
	}
	for _, v := range in.PersistentVolumes {
		t.Logf("volume %s affinity=%v", v.Name, v.Spec.NodeAffinity)
	}
	for _, sc := range in.StorageClasses {
		t.Logf("storage class %s allowed=%v", sc.Name, sc.AllowedTopologies)
	}
	res := scheduling.Solve(in)
	for _, b := range res.Bindings {
		t.Logf("bind %s -> %s", b.Pod.Name, b.Node)
	}
	for _, nc := range res.NodeClaims {
		it, o := nc.Cheapest()
		if it == nil { // a broken plan: the checker says so below
			t.Logf("claim %s without instance types, pods %d", nc.Name, len(nc.Pods))
			continue
		}
		t.Logf("claim %s %s %s/%s zones=%v types=%d", nc.Name, it.Name, o.Zone, o.CapacityType, nc.Zones, len(nc.InstanceTypes))
	}
	for _, u := range res.Unschedulable {
		t.Logf("unsched %s: %s", u.Pod.Name, u.Reason)
	}
	if err := schedulingcheck.Check(in, res); err != nil {
		t.Log(err)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
