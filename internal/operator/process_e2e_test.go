package operator_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/testbed/metricsdoc"
)

// TestInstalledController installs karpool as a user would (the kustomize base and the Helm
// chart, applied server-side) and runs `karpool controller` as a process with the chart's
// ServiceAccount token, so it has only the chart's permissions: it elects itself leader, its
// probes answer, seed 003's scale-out gets its node with nothing forbidden in the log, its
// metrics endpoint counts one NodeClaim through every lifecycle step, five pods bound and
// started, the node's resources, the pool's usage and its cost at the m5.large list price, the
// engine's and the cloud's calls and the NodeClaim's conditions, every metric it serves is in
// docs/metrics.md with that type and those labels, and `karpool nodes --once` shows the
// m5.large at its list price with the fleet's totals.
func TestInstalledController(t *testing.T) {
	h := newHarness(t)
	ns := "karpool-helm"
	kubeconfig := h.install(ns)
	// Debug: failures the controller only reports at debug level (a lost hint) count too. The
	// ReplicaSet controller creates the five pods in slow-start steps, and on a loaded host the
	// kube-scheduler marks them unschedulable seconds apart: a 5 s idle window keeps them in one
	// batch, so the scale-out is one m5.large, as the assertions below expect.
	proc := h.startProcess("--kubeconfig", kubeconfig, "--namespace", ns, "--leader-elect=true", "--log-level=debug",
		"--batch-idle-duration=5s")
	h.eventually("probes answer 200", time.Minute, func() error {
		if err := proc.probe("/healthz"); err != nil {
			return err
		}
		return proc.probe("/readyz")
	})

	h.eventually("the controller leads", time.Minute, func() error {
		if !proc.logs("acting as leader") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	podNS := h.namespace("metrics")
	h.workshopScaleOut(podNS, 5)
	nodes := h.karpenterNodes()
	if len(nodes) != 1 {
		t.Fatalf("want one node, got %d", len(nodes))
	}
	zone := nodes[0].Labels[corev1.LabelTopologyZone]
	nodeName := nodes[0].Name
	allocatableCPU := nodes[0].Status.Allocatable.Cpu().AsApproximateFloat64()
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	// The test's class sets no block devices: the default root volume is part of the price.
	opts, err := catalog.NodeClassOptionsFor(nil)
	if err != nil {
		t.Fatal(err)
	}
	it, ok := cat.InstanceType("m5.large", opts)
	if !ok {
		t.Fatal("m5.large missing from the catalog")
	}
	wantPrice := -1.0
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == karpv1.CapacityTypeOnDemand {
			wantPrice = o.PricePerHour
		}
	}

	pool := map[string]string{"nodepool": "default"}
	node := func(resource string) map[string]string {
		return map[string]string{"node_name": nodeName, "nodepool": "default", "zone": zone, "instance_type": "m5.large", "managed": "true", "resource_type": resource}
	}
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"karpenter_nodeclaims_created_total", pool, 1},
		{"karpool_nodeclaims_launched_total", pool, 1},
		{"karpool_nodeclaims_registered_total", pool, 1},
		{"karpool_nodeclaims_initialized_total", pool, 1},
		{"karpenter_nodes_created_total", map[string]string{"nodepool": "default", "zone": zone}, 1},
		{"karpenter_nodes_allocatable", node("cpu"), allocatableCPU},
		{"karpenter_nodes_total_pod_requests", node("memory"), 5 << 30},
		{"karpool_pods_pending_to_bound_seconds", nil, 5},
		{"karpenter_pods_bound_duration_seconds", nil, 5},
		{"karpenter_pods_startup_duration_seconds", nil, 5},
		{"karpenter_pods_state", map[string]string{"namespace": podNS, "node": nodeName, "nodepool": "default", "phase": "Running", "ready": "true"}, 5},
		{"karpenter_nodepools_usage", map[string]string{"nodepool": "default", "resource_type": "cpu"}, 2},
		{"karpenter_nodepools_usage", map[string]string{"nodepool": "default", "resource_type": "nodes"}, 1},
		{"karpenter_nodepools_limit", map[string]string{"nodepool": "default", "resource_type": "cpu"}, 1000},
		{"karpenter_nodepools_cost_total", pool, wantPrice},
		{"karpenter_scheduler_unschedulable_pods_count", map[string]string{"controller": "provisioner"}, 0},
		{"karpenter_cloudprovider_duration_seconds", map[string]string{"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "aws"}, 1},
		{"operator_nodeclaim_status_condition_count", map[string]string{"type": "Initialized", "status": "True", "karpenter_sh_nodepool": "default"}, 1},
		{"operator_nodeclaim_status_condition_transitions_total", map[string]string{"type": "Initialized", "status": "True", "karpenter_sh_nodepool": "default"}, 1},
		{"operator_nodepool_status_condition_count", map[string]string{"name": "default", "type": "Ready", "status": "True"}, 1},
	}
	// The status controller and the pod watcher update their metrics a moment after the pods
	// run, so poll until every value holds.
	h.eventually("metrics", time.Minute, func() error {
		families, err := proc.scrape()
		if err != nil {
			return err
		}
		var wrong []string
		for _, w := range want {
			got, found := metricValue(families, w.name, w.labels)
			if !found || got != w.value {
				wrong = append(wrong, fmt.Sprintf("%s%v = %v (found %t), want %v", w.name, w.labels, got, found, w.value))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%s", strings.Join(wrong, "; "))
		}
		return nil
	})
	families, err := proc.scrape()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := metricValue(families, "karpenter_scheduler_scheduling_duration_seconds", map[string]string{"controller": "provisioner"}); n < 1 {
		t.Errorf("no provisioning round timed in karpenter_scheduler_scheduling_duration_seconds")
	}
	checkMetricsDocumented(t, families)
	out, err := exec.Command(proc.cmd.Path, "nodes", "--once", "--kubeconfig", h.env.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("karpool nodes --once: %v\n%s", err, out)
	}
	listPrice := fmt.Sprintf("$%.4f", wantPrice-it.Offerings[0].VolumesPerHour)
	for _, want := range []string{"m5.large", "on-demand", zone, listPrice, "5/", fmt.Sprintf("1 node  $%.4f/h  $%.2f/month (730 h)", wantPrice, wantPrice*730)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("karpool nodes --once lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(proc.log(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("the chart's RBAC lacks a permission: %s", line)
		}
	}
}

// TestLeaderElectionFailover runs two `karpool controller` replicas with leader election: only
// the one holding the Lease provisions; when it stops (SIGTERM releases the Lease) the other
// takes over and provisions the next pods, and no pod gets two NodeClaims.
func TestLeaderElectionFailover(t *testing.T) {
	h := newHarness(t)
	leaseNS := h.namespace("leader-election")
	args := []string{"--leader-elect", "--namespace", leaseNS}
	first := h.startProcess(args...)
	h.eventually("first replica leads", time.Minute, func() error {
		if !first.logs("acting as leader") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	second := h.startProcess(args...)
	h.eventually("second replica ready", time.Minute, func() error { return second.probe("/readyz") })
	holder := h.leaseHolder(leaseNS)

	ns := h.namespace("failover")
	h.workshopScaleOut(ns, 5)
	if !first.logs("created nodeclaim") {
		t.Errorf("the leader did not create the NodeClaim")
	}
	if second.logs("created nodeclaim") || second.logs("acting as leader") {
		t.Fatalf("the standby replica acted while the leader held the Lease:\n%s", tail(second.log(), 20))
	}

	first.signal(syscall.SIGTERM)
	h.eventually("second replica leads", time.Minute, func() error {
		if !second.logs("acting as leader") {
			return fmt.Errorf("not yet")
		}
		if now := h.leaseHolder(leaseNS); now == holder {
			return fmt.Errorf("lease still held by %s", holder)
		}
		return nil
	})
	// Five more 1Gi pods do not fit on the m5.large: the new leader provisions for them.
	h.scale(ns, "inflate", 10)
	h.runningPods(ns, "inflate", 10, 3*time.Minute)
	if !second.logs("created nodeclaim") {
		t.Errorf("the new leader did not create a NodeClaim")
	}
	if claims := h.nodeClaims(); len(claims) != 2 {
		t.Errorf("want 2 NodeClaims (one per replica's turn), got %d", len(claims))
	}
}

// leaseHolder returns the holder identity of karpool's leader-election Lease in ns ("" when
// there is none yet).
func (h *harness) leaseHolder(ns string) string {
	h.t.Helper()
	var lease coordinationv1.Lease
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "karpool-leader-election"}, &lease); err != nil {
		h.t.Fatalf("leader-election lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// checkMetricsDocumented compares every karpenter_*, operator_* and karpool_* family the process
// serves with docs/metrics.md: documented, of that type, and with no label the table lacks (the
// text format drops empty labels, so a served family may show fewer).
func checkMetricsDocumented(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	path := repoFile("docs", "metrics.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	documented, err := metricsdoc.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, f := range families {
		if !strings.HasPrefix(name, "karpenter_") && !strings.HasPrefix(name, "operator_") && !strings.HasPrefix(name, "karpool_") {
			continue
		}
		checked++
		doc, ok := documented[name]
		if !ok {
			t.Errorf("the controller serves %s, which docs/metrics.md does not list", name)
			continue
		}
		if served := strings.ToLower(f.GetType().String()); served != doc.Type {
			t.Errorf("%s is served as a %s, documented as a %s", name, served, doc.Type)
		}
		undocumented := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(doc.Labels, l.GetName()) {
					undocumented[l.GetName()] = true
				}
			}
		}
		if len(undocumented) > 0 {
			t.Errorf("%s is served with labels %v, documented with %v", name, slices.Sorted(maps.Keys(undocumented)), doc.Labels)
		}
	}
	if checked < 30 {
		t.Errorf("only %d karpenter_/operator_/karpool_ families served", checked)
	}
}
