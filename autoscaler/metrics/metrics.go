// Package metrics holds the autoscaler's Prometheus metrics. Where Karpenter (v1.14) has the same
// measurement, the name, the labels and the meaning are Karpenter's, so existing dashboards and
// alerts keep working; measurements Karpenter does not have are karpool_*. docs/metrics.md lists
// every one, and a test holds this package to that list.
//
// Three kinds of metric live here: counters and histograms the controllers update as things
// happen (this file), gauges computed from the cluster's objects when Prometheus scrapes
// (cluster.go: nodes, pods, status conditions), and the status-condition transitions a watch
// observes (transitions.go). Cloud provider calls are timed by a decorator (cloud.go).
package metrics

import (
	"errors"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
)

// Label names shared by several metrics (Karpenter's).
const (
	labelNodePool     = "nodepool"
	labelReason       = "reason"
	labelResourceType = "resource_type"
	labelCapacityType = "capacity_type"
	labelZone         = "zone"
	labelController   = "controller"
)

// Controller label values: which part of the autoscaler ran a simulation or a cloud call.
const (
	ControllerProvisioner = "provisioner"
	ControllerDisruption  = "disruption"
	ControllerLifecycle   = "nodeclaim.lifecycle"
	ControllerGC          = "nodeclaim.garbagecollection"
	ControllerPoolStatus  = "nodepool.status"
)

// Metrics are registered once per process, on the registry the manager serves.
type Metrics struct {
	// NodeClaimsCreated counts by reason, NodePool and whether minValues was relaxed (never, in
	// karpool); NodeClaimsTerminated counts NodeClaims whose finalizer was removed, by NodePool,
	// capacity type and zone (as Karpenter). Launched, registered and initialized are karpool's.
	NodeClaimsCreated     *prometheus.CounterVec
	NodeClaimsLaunched    *prometheus.CounterVec
	NodeClaimsRegistered  *prometheus.CounterVec
	NodeClaimsInitialized *prometheus.CounterVec
	NodeClaimsTerminated  *prometheus.CounterVec
	// NodesCreated counts nodes that registered for a NodeClaim, NodesTerminated the nodes whose
	// finalizer termination removed, by NodePool and zone.
	NodesCreated    *prometheus.CounterVec
	NodesTerminated *prometheus.CounterVec
	// PodBindLatency observes, for each pod the autoscaler found capacity for, the time from
	// the pod's creation to its binding. PodBound and PodStartup observe it for every pod seen
	// pending: creation to bound, and creation to ready.
	PodBindLatency prometheus.Histogram
	PodBound       prometheus.Histogram
	PodStartup     prometheus.Summary
	// PoolUsage and PoolLimit are per pool and resource; PoolCost is the $/h of the pool's
	// nodes at the prices they launched with.
	PoolUsage *prometheus.GaugeVec
	PoolLimit *prometheus.GaugeVec
	PoolCost  *prometheus.GaugeVec
	// PoolCostCounted is what the pool's NodeClaims count against its cost limit (launching
	// ones at their dearest option), PoolCostLimit the limit; both only for pools with one.
	PoolCostCounted *prometheus.GaugeVec
	PoolCostLimit   *prometheus.GaugeVec
	// SchedulingDuration times the engine's runs, UnschedulablePods counts the pods the last
	// run found no room for; both by controller (provisioner, disruption).
	SchedulingDuration *prometheus.HistogramVec
	UnschedulablePods  *prometheus.GaugeVec
	// DisruptionDecisions counts disruption decisions by decision (delete), reason (empty) and
	// consolidation type; AllowedDisruptions is, per pool and reason, how many nodes the
	// budgets let be disrupting at once; EligibleNodes how many nodes each reason could take.
	DisruptionDecisions *prometheus.CounterVec
	AllowedDisruptions  *prometheus.GaugeVec
	EligibleNodes       *prometheus.GaugeVec
	// NotConsolidated counts, per pool and reason, the nodes the last consolidation pass did not
	// consolidate (the reasons of their Consolidatable condition).
	NotConsolidated *prometheus.GaugeVec
	// NodeClaimsDisrupted counts NodeClaims disruption deleted, by NodePool, capacity type and
	// reason (empty, underutilized, expired).
	NodeClaimsDisrupted *prometheus.CounterVec
	// InterruptionReceived counts interruption queue messages by type; InterruptionDeleted the
	// ones deleted after handling; InterruptionQueueDuration is how long they waited in the queue.
	InterruptionReceived      *prometheus.CounterVec
	InterruptionDeleted       prometheus.Counter
	InterruptionQueueDuration prometheus.Histogram
	// CloudDuration times cloud provider calls and CloudErrors counts the failed ones, by
	// calling controller, method and provider (and error type).
	CloudDuration *prometheus.HistogramVec
	CloudErrors   *prometheus.CounterVec
	// Cluster computes the node, pod and status-condition gauges at scrape time; Transitions
	// counts and times status-condition changes.
	Cluster     *Cluster
	Transitions *Transitions
}

// durationBuckets are Karpenter's buckets for durations (controller-runtime's, stretched to
// 10 minutes).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
	0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		NodeClaimsCreated: counter("karpenter_nodeclaims_created_total",
			"NodeClaims created, by reason, NodePool and whether minValues was relaxed.", labelReason, labelNodePool, "min_values_relaxed"),
		NodeClaimsLaunched:    counter("karpool_nodeclaims_launched_total", "NodeClaims whose instance was launched, by NodePool.", labelNodePool),
		NodeClaimsRegistered:  counter("karpool_nodeclaims_registered_total", "NodeClaims whose node registered, by NodePool.", labelNodePool),
		NodeClaimsInitialized: counter("karpool_nodeclaims_initialized_total", "NodeClaims whose node became initialized, by NodePool.", labelNodePool),
		NodeClaimsTerminated: counter("karpenter_nodeclaims_terminated_total",
			"NodeClaims terminated (finalizer removed), by NodePool, capacity type and zone.", labelNodePool, labelCapacityType, labelZone),
		NodesCreated:    counter("karpenter_nodes_created_total", "Nodes registered for a NodeClaim, by NodePool and zone.", labelNodePool, labelZone),
		NodesTerminated: counter("karpenter_nodes_terminated_total", "Nodes terminated (finalizer removed), by NodePool and zone.", labelNodePool, labelZone),
		PodBindLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "karpool_pods_pending_to_bound_seconds",
			Help:    "Time from creation to binding of the pods karpool provisioned capacity for.",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}),
		PodBound: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_bound_duration_seconds",
			Help: "Time from creation to binding of the pods seen pending.", Buckets: durationBuckets}),
		PodStartup: prometheus.NewSummary(prometheus.SummaryOpts{Name: "karpenter_pods_startup_duration_seconds",
			Help:       "Time from creation to readiness of the pods seen pending.",
			Objectives: map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}}),
		PoolUsage: gauge("karpenter_nodepools_usage", "Resources provisioned for the NodePool (its nodes and in-flight NodeClaims), by resource.",
			labelResourceType, labelNodePool),
		PoolLimit: gauge("karpenter_nodepools_limit", "The NodePool's limits, by resource.", labelResourceType, labelNodePool),
		PoolCost:  gauge("karpenter_nodepools_cost_total", "List price per hour of the NodePool's launched instances, in USD.", labelNodePool),
		PoolCostCounted: gauge("karpool_nodepool_cost_per_hour",
			"What the NodePool's NodeClaims count against its karpool.dev/limit-per-hour, in USD per hour: launched ones at their price, launching ones at their dearest option.", labelNodePool),
		PoolCostLimit: gauge("karpool_nodepool_cost_limit_per_hour", "The NodePool's karpool.dev/limit-per-hour, in USD per hour.", labelNodePool),
		SchedulingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_scheduler_scheduling_duration_seconds",
			Help: "Duration of scheduling simulations, by controller (provisioner, disruption).", Buckets: durationBuckets}, []string{labelController}),
		UnschedulablePods: gauge("karpenter_scheduler_unschedulable_pods_count",
			"Pods the last scheduling simulation found no room for, by controller.", labelController),
		DisruptionDecisions: counter("karpenter_voluntary_disruption_decisions_total",
			"Disruption decisions, by decision, reason and consolidation type.", "decision", labelReason, "consolidation_type"),
		NodeClaimsDisrupted: counter("karpenter_nodeclaims_disrupted_total",
			"NodeClaims disrupted, by reason, NodePool and capacity type.", labelReason, labelNodePool, labelCapacityType),
		InterruptionReceived: counter("karpenter_interruption_received_messages_total",
			"Interruption queue messages received, by message type.", "message_type"),
		InterruptionDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "karpenter_interruption_deleted_messages_total",
			Help: "Interruption queue messages deleted after handling."}),
		InterruptionQueueDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_interruption_message_queue_duration_seconds",
			Help: "Time from an interruption message's arrival in the queue to its handling.", Buckets: prometheus.ExponentialBuckets(0.5, 2, 12)}),
		AllowedDisruptions: gauge("karpenter_nodepools_allowed_disruptions",
			"Nodes the NodePool's disruption budgets allow to be disrupting at once, by reason.", labelNodePool, labelReason),
		EligibleNodes: gauge("karpenter_voluntary_disruption_eligible_nodes", "Nodes eligible for disruption, by reason.", labelReason),
		NotConsolidated: gauge("karpool_consolidation_skipped_nodes",
			"Nodes the last consolidation pass did not consolidate, by NodePool and reason.", labelNodePool, labelReason),
		CloudDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_cloudprovider_duration_seconds",
			Help: "Duration of cloud provider calls, by controller, method and provider."}, []string{labelController, "method", "provider"}),
		CloudErrors: counter("karpenter_cloudprovider_errors_total",
			"Errors returned by cloud provider calls, by controller, method, provider and error type.", labelController, "method", "provider", "error"),
		Cluster:     newCluster(),
		Transitions: newTransitions(),
	}
	return m, m.register(reg)
}

// register registers every field of m, replacing a field by the collector already registered
// under its name: a process that runs the autoscaler twice (tests, a restart after losing the
// lease) keeps counting in the same series.
func (m *Metrics) register(reg prometheus.Registerer) error {
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		err := reg.Register(f.Interface().(prometheus.Collector))
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			if err != nil {
				return err
			}
			continue
		}
		existing := reflect.ValueOf(dup.ExistingCollector)
		if !existing.Type().AssignableTo(f.Type()) {
			return err
		}
		f.Set(existing)
	}
	return nil
}
