package metrics

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// Cluster serves the gauges Karpenter keeps per node, per pod and per status condition. They are
// computed from a snapshot of the manager's cache when Prometheus scrapes, rather than kept up to
// date by controllers: the values are then as fresh as the cache, and a deleted object's series
// disappear with it. Only the leader serves them, as only Karpenter's leader does, so that a
// dashboard summing them over replicas counts each node once.
type Cluster struct {
	mu     sync.RWMutex
	source func(context.Context) (*state.Cluster, error)
	leader func() bool
	now    func() time.Time
}

func newCluster() *Cluster { return &Cluster{now: time.Now} }

// Bind makes the gauges read snapshots from source while leader() says this process leads.
// Binding again replaces both (a process that runs the autoscaler again after losing the lease).
func (c *Cluster) Bind(source func(context.Context) (*state.Cluster, error), leader func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.source, c.leader = source, leader
}

// scrapeTimeout bounds the snapshot a scrape waits for.
const scrapeTimeout = 10 * time.Second

// Describe sends every gauge's description.
func (c *Cluster) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range clusterDescs() {
		ch <- d
	}
}

// Collect sends the gauges of a fresh snapshot; nothing when unbound, not leading, or when the
// snapshot fails (a scrape must not fail because the cache is still syncing).
func (c *Cluster) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	source, leader := c.source, c.leader
	c.mu.RUnlock()
	if source == nil || (leader != nil && !leader()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	snap, err := source(ctx)
	if err != nil {
		return
	}
	for _, s := range clusterSamples(snap, c.now()) {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, s.value, s.labels...)
	}
}

// sample is one gauge value with its label values in the description's order.
type sample struct {
	desc   *prometheus.Desc
	value  float64
	labels []string
}

// clusterSamples computes every gauge of a snapshot (pure).
func clusterSamples(c *state.Cluster, now time.Time) []sample {
	out := nodeSamples(c, now)
	out = append(out, podSamples(c, now)...)
	return append(out, conditionSamples(c, now)...)
}

// nodeLabelKeys are the node labels Karpenter with the AWS provider copies onto its node metrics
// (its well-known labels), each as a metric label named after the part after the slash.
var nodeLabelKeys = append([]string{
	karpv1.LabelNodePool, corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelInstanceTypeStable,
	corev1.LabelArchStable, corev1.LabelOSStable, karpv1.LabelCapacityType, corev1.LabelWindowsBuild, awsv1.LabelTopologyZoneID,
}, awsLabelKeys()...)

// awsLabelKeys are the provider's well-known labels, less the node class (not one of them upstream).
func awsLabelKeys() []string {
	var out []string
	for _, k := range awsv1.WellKnownLabels {
		if k != awsv1.LabelNodeClass {
			out = append(out, k)
		}
	}
	return out
}

// nodeLabelNames are the node metrics' labels, in the order values are given.
var nodeLabelNames = func() []string {
	out := make([]string, 0, len(nodeLabelKeys)+3)
	for _, k := range nodeLabelKeys {
		out = append(out, snake(k[strings.LastIndex(k, "/")+1:]))
	}
	return append(out, "node_name", "phase", "managed")
}()

// snake turns a label key or resource name into a metric label or label value the way Karpenter
// does: lower case, dashes as underscores.
func snake(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }

var (
	nodeResourceLabels = append(append([]string{}, nodeLabelNames...), labelResourceType)

	nodeAllocatable = prometheus.NewDesc("karpenter_nodes_allocatable",
		"Resources allocatable by the node.", nodeResourceLabels, nil)
	nodePodRequests = prometheus.NewDesc("karpenter_nodes_total_pod_requests",
		"Resources requested by the pods bound to the node, DaemonSet pods included.", nodeResourceLabels, nil)
	nodePodLimits = prometheus.NewDesc("karpenter_nodes_total_pod_limits",
		"Resource limits of the pods bound to the node, DaemonSet pods included.", nodeResourceLabels, nil)
	nodeDaemonRequests = prometheus.NewDesc("karpenter_nodes_total_daemon_requests",
		"Resources requested by the DaemonSet pods bound to the node.", nodeResourceLabels, nil)
	nodeDaemonLimits = prometheus.NewDesc("karpenter_nodes_total_daemon_limits",
		"Resource limits of the DaemonSet pods bound to the node.", nodeResourceLabels, nil)
	nodeOverhead = prometheus.NewDesc("karpenter_nodes_system_overhead",
		"Resources the node reserves for the system: capacity minus allocatable.", nodeResourceLabels, nil)
	nodeLifetime = prometheus.NewDesc("karpenter_nodes_current_lifetime_seconds",
		"Age of the node.", nodeLabelNames, nil)
	clusterUtilization = prometheus.NewDesc("karpenter_cluster_utilization_percent",
		"Pod requests as a percentage of the nodes' allocatable resources, by resource.", []string{labelResourceType}, nil)

	podStateLabels = []string{"name", "namespace", "owner", "node", "scheduled", labelNodePool, labelZone, "arch",
		labelCapacityType, "instance_type", "phase", "ready", "managed"}
	podState = prometheus.NewDesc("karpenter_pods_state",
		"One per pod, labelled with its owner, node, the node's pool, zone, architecture, capacity type and instance type, its phase and readiness.",
		podStateLabels, nil)
	podUnbound = prometheus.NewDesc("karpenter_pods_unbound_time_seconds",
		"For each pending pod not bound yet, the time since its creation.", []string{"name", "namespace"}, nil)
	podUnstarted = prometheus.NewDesc("karpenter_pods_unstarted_time_seconds",
		"For each pending pod, the time since its creation.", []string{"name", "namespace"}, nil)
)

func clusterDescs() []*prometheus.Desc {
	out := []*prometheus.Desc{nodeAllocatable, nodePodRequests, nodePodLimits, nodeDaemonRequests, nodeDaemonLimits,
		nodeOverhead, nodeLifetime, clusterUtilization, podState, podUnbound, podUnstarted}
	for _, k := range conditionKinds {
		out = append(out, k.count, k.current)
	}
	return append(out, deprecatedCount, deprecatedCurrent)
}

// nodeSamples computes the per-node gauges and the cluster's utilization.
func nodeSamples(c *state.Cluster, now time.Time) []sample {
	managed := map[string]bool{}
	for _, nc := range c.NodeClaims {
		if nc.Status.ProviderID != "" {
			managed[nc.Status.ProviderID] = true
		}
	}
	var out []sample
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	for _, node := range c.Nodes {
		labels := make([]string, 0, len(nodeLabelNames))
		for _, k := range nodeLabelKeys {
			labels = append(labels, node.Labels[k])
		}
		labels = append(labels, node.Name, string(node.Status.Phase), strconv.FormatBool(managed[node.Spec.ProviderID] && node.Spec.ProviderID != ""))
		podReq, podLim, dsReq, dsLim := nodePodResources(c, node.Name)
		for desc, list := range map[*prometheus.Desc]corev1.ResourceList{
			nodeAllocatable: node.Status.Allocatable, nodeOverhead: subtract(node.Status.Capacity, node.Status.Allocatable),
			nodePodRequests: podReq, nodePodLimits: podLim, nodeDaemonRequests: dsReq, nodeDaemonLimits: dsLim,
		} {
			for name, q := range list {
				out = append(out, sample{desc, Amount(name, q), append(labels[:len(labels):len(labels)], ResourceType(name))})
			}
		}
		out = append(out, sample{nodeLifetime, now.Sub(node.CreationTimestamp.Time).Seconds(), labels})
		add(allocatable, node.Status.Allocatable)
		add(requested, podReq)
	}
	for name, alloc := range allocatable {
		if alloc.IsZero() {
			continue
		}
		used := requested[name]
		pct := 100 * float64(used.Value()) / float64(alloc.Value())
		if name == corev1.ResourceCPU {
			pct = 100 * float64(used.MilliValue()) / float64(alloc.MilliValue())
		}
		out = append(out, sample{clusterUtilization, pct, []string{ResourceType(name)}})
	}
	return out
}

// nodePodResources sums the requests and limits of the pods bound to the node that have not
// finished, and of its DaemonSet pods alone.
func nodePodResources(c *state.Cluster, node string) (podReq, podLim, dsReq, dsLim corev1.ResourceList) {
	podReq, podLim, dsReq, dsLim = corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}
	for _, p := range c.PodsOn(node) {
		if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		lim := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
		add(podReq, req)
		add(podLim, lim)
		if state.OwnedByDaemonSet(p) {
			add(dsReq, req)
			add(dsLim, lim)
		}
	}
	return podReq, podLim, dsReq, dsLim
}

// ResourceType is a resource's name as Karpenter's resource_type label gives it.
func ResourceType(name corev1.ResourceName) string { return snake(string(name)) }

// Amount is a quantity as Karpenter's metrics give it: cpu in cores, the rest in units.
func Amount(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

func add(into, list corev1.ResourceList) {
	for name, q := range list {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range a {
		d := q.DeepCopy()
		if s, ok := b[name]; ok {
			d.Sub(s)
		}
		out[name] = d
	}
	return out
}

// podSamples computes karpenter_pods_state for every pod, and how long pending pods have waited.
func podSamples(c *state.Cluster, now time.Time) []sample {
	nodes := make(map[string]*corev1.Node, len(c.Nodes))
	for _, n := range c.Nodes {
		nodes[n.Name] = n
	}
	var out []sample
	for _, p := range c.Pods {
		var nodeLabels map[string]string
		if n := nodes[p.Spec.NodeName]; n != nil {
			nodeLabels = n.Labels
		}
		out = append(out, sample{podState, 1, []string{p.Name, p.Namespace, ownerLink(p), p.Spec.NodeName,
			strconv.FormatBool(p.Spec.NodeName != ""), nodeLabels[karpv1.LabelNodePool], nodeLabels[corev1.LabelTopologyZone],
			nodeLabels[corev1.LabelArchStable], nodeLabels[karpv1.LabelCapacityType], nodeLabels[corev1.LabelInstanceTypeStable],
			string(p.Status.Phase), strconv.FormatBool(podCondition(p, corev1.PodReady)), strconv.FormatBool(nodeLabels[karpv1.LabelNodePool] != "")}})
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		waited := now.Sub(p.CreationTimestamp.Time).Seconds()
		out = append(out, sample{podUnstarted, waited, []string{p.Name, p.Namespace}})
		if !podCondition(p, corev1.PodScheduled) {
			out = append(out, sample{podUnbound, waited, []string{p.Name, p.Namespace}})
		}
	}
	return out
}

// ownerLink is the path of the pod's first owner, as Karpenter labels pods (the old selfLink).
func ownerLink(p *corev1.Pod) string {
	if len(p.OwnerReferences) == 0 {
		return ""
	}
	o := p.OwnerReferences[0]
	return fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", o.APIVersion, p.Namespace, strings.ToLower(o.Kind), o.Name)
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
