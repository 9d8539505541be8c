// Package metrics holds the autoscaler's Prometheus metrics. Where Karpenter (v1.14) has the same
// measurement, the name, the labels and the meaning are Karpenter's, so existing dashboards and
// alerts keep working; measurements Karpenter does not have are karpool_*. docs/metrics.md lists
// every one, and a test holds this package to that list.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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
	// PodBindLatency observes, for each pod the autoscaler found capacity for, the time from
	// the pod's creation to its binding.
	PodBindLatency prometheus.Histogram
	// PoolUsage and PoolLimit are per pool and resource; PoolCost is the $/h of the pool's
	// nodes at the prices they launched with.
	PoolUsage *prometheus.GaugeVec
	PoolLimit *prometheus.GaugeVec
	PoolCost  *prometheus.GaugeVec
	// UnschedulablePods is the number of pods the last provisioning round found no capacity for.
	UnschedulablePods prometheus.Gauge
	// DisruptionDecisions counts disruption decisions by decision (delete), reason (empty) and
	// consolidation type; AllowedDisruptions is, per pool and reason, how many nodes the
	// budgets let be disrupting at once.
	DisruptionDecisions *prometheus.CounterVec
	AllowedDisruptions  *prometheus.GaugeVec
	// NodeClaimsDisrupted counts NodeClaims disruption deleted, by NodePool, capacity type and
	// reason (empty, underutilized, expired).
	NodeClaimsDisrupted *prometheus.CounterVec
	// InterruptionReceived counts interruption queue messages by type; InterruptionDeleted the
	// ones deleted after handling; InterruptionQueueDuration is how long they waited in the queue.
	InterruptionReceived      *prometheus.CounterVec
	InterruptionDeleted       prometheus.Counter
	InterruptionQueueDuration prometheus.Histogram
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		NodeClaimsCreated: counter("karpenter_nodeclaims_created_total",
			"NodeClaims created, by reason, NodePool and whether minValues was relaxed.", "reason", "nodepool", "min_values_relaxed"),
		NodeClaimsLaunched:    counter("karpool_nodeclaims_launched_total", "NodeClaims whose instance was launched, by NodePool.", "nodepool"),
		NodeClaimsRegistered:  counter("karpool_nodeclaims_registered_total", "NodeClaims whose node registered, by NodePool.", "nodepool"),
		NodeClaimsInitialized: counter("karpool_nodeclaims_initialized_total", "NodeClaims whose node became initialized, by NodePool.", "nodepool"),
		NodeClaimsTerminated: counter("karpenter_nodeclaims_terminated_total",
			"NodeClaims terminated (finalizer removed), by NodePool, capacity type and zone.", "nodepool", "capacity_type", "zone"),
		PodBindLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "karpool_pods_pending_to_bound_seconds",
			Help:    "Time from creation to binding of the pods karpool provisioned capacity for.",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}),
		PoolUsage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_nodepools_usage",
			Help: "Capacity of the NodePool's nodes and in-flight NodeClaims, by resource."}, []string{"nodepool", "resource_type"}),
		PoolLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_nodepools_limit",
			Help: "The NodePool's limits, by resource."}, []string{"nodepool", "resource_type"}),
		PoolCost: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpool_nodepool_cost_per_hour_dollars",
			Help: "List price per hour of the NodePool's launched instances, in USD."}, []string{"nodepool"}),
		UnschedulablePods: prometheus.NewGauge(prometheus.GaugeOpts{Name: "karpool_unschedulable_pods",
			Help: "Pods the last provisioning round could not find capacity for."}),
		DisruptionDecisions: counter("karpenter_voluntary_disruption_decisions_total",
			"Disruption decisions, by decision, reason and consolidation type.", "decision", "reason", "consolidation_type"),
		NodeClaimsDisrupted: counter("karpenter_nodeclaims_disrupted_total",
			"NodeClaims disrupted, by NodePool, capacity type and reason.", "nodepool", "capacity_type", "reason"),
		InterruptionReceived: counter("karpenter_interruption_received_messages_total",
			"Interruption queue messages received, by message type.", "message_type"),
		InterruptionDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "karpenter_interruption_deleted_messages_total",
			Help: "Interruption queue messages deleted after handling."}),
		InterruptionQueueDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_interruption_message_queue_duration_seconds",
			Help: "Time from an interruption message's arrival in the queue to its handling.", Buckets: prometheus.ExponentialBuckets(0.5, 2, 12)}),
		AllowedDisruptions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_nodepools_allowed_disruptions",
			Help: "Nodes the NodePool's disruption budgets allow to be disrupting at once, by reason."}, []string{"nodepool", "reason"}),
	}
	var err error
	for _, c := range []**prometheus.CounterVec{&m.NodeClaimsCreated, &m.NodeClaimsLaunched, &m.NodeClaimsRegistered, &m.NodeClaimsInitialized, &m.NodeClaimsTerminated, &m.DisruptionDecisions, &m.NodeClaimsDisrupted, &m.InterruptionReceived} {
		if *c, err = register(reg, *c); err != nil {
			return nil, err
		}
	}
	for _, g := range []**prometheus.GaugeVec{&m.PoolUsage, &m.PoolLimit, &m.PoolCost, &m.AllowedDisruptions} {
		if *g, err = register(reg, *g); err != nil {
			return nil, err
		}
	}
	if m.PodBindLatency, err = register(reg, m.PodBindLatency); err != nil {
		return nil, err
	}
	if m.UnschedulablePods, err = register(reg, m.UnschedulablePods); err != nil {
		return nil, err
	}
	if m.InterruptionDeleted, err = register(reg, m.InterruptionDeleted); err != nil {
		return nil, err
	}
	if m.InterruptionQueueDuration, err = register(reg, m.InterruptionQueueDuration); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name: a process
// that runs the autoscaler twice (tests, a restart after losing the lease) keeps counting in
// the same series.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
