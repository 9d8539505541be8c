// Package autoscaler assembles karpool's autoscaling core on a controller-runtime manager: the
// provisioner (pending pods → NodeClaims, through the one scheduling engine), the NodeClaim
// lifecycle (launch → register → initialize, and termination), garbage collection and NodePool
// status. The cloud provider is passed in; everything here is cloud-agnostic.
package autoscaler

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/disruption"
	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/nodeclaim"
	"github.com/karpool/karpool/autoscaler/nodeoverlay"
	"github.com/karpool/karpool/autoscaler/nodepool"
	"github.com/karpool/karpool/autoscaler/provisioning"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
	"github.com/karpool/karpool/internal/featuregates"
)

// Options configure the autoscaler.
type Options struct {
	Provider cloud.CloudProvider
	// Region is the value of topology.kubernetes.io/region on new nodes.
	Region string
	// BatchIdle and BatchMax bound how long pending pods are collected before a provisioning
	// round (defaults 1 s and 10 s, like Karpenter's BATCH_IDLE_DURATION / BATCH_MAX_DURATION).
	BatchIdle, BatchMax time.Duration
	// RegistrationTTL is how long an instance may take to register its node (default 15 min).
	RegistrationTTL time.Duration
	// GCInterval is how often instances without NodeClaims and NodeClaims without instances are
	// collected (default 1 min).
	GCInterval time.Duration
	// DisruptionDryRun reports what disruption would do without doing it.
	DisruptionDryRun bool
	// MinSavings is the least a consolidation must save (NodePools may override it).
	MinSavings disruption.MinSavings
	// Gates are the feature gates (Karpenter's FEATURE_GATES).
	Gates featuregates.Gates
	// Scheduling holds PREFERENCE_POLICY and MIN_VALUES_POLICY (scheduling.PolicyOptions).
	Scheduling scheduling.Options
	// DisruptionValidationDelay: see disruption.Options.ValidationDelay (0: Karpenter's 15 s).
	DisruptionValidationDelay time.Duration
	// Registry receives the metrics (normally controller-runtime's metrics.Registry, which the
	// manager serves).
	Registry prometheus.Registerer
}

// Setup registers every autoscaler controller with mgr. It must be called before mgr starts.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := metrics.New(reg)
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorderFor("karpenter")
	if err := nodeclaim.IndexFields(ctx, mgr); err != nil {
		return err
	}
	if err := watchMetrics(mgr, m); err != nil {
		return err
	}
	// The provisioner records where it planned pods; the lifecycle hands them over at registration.
	nominations := state.NewNominations()
	prov := provisioning.New(mgr.GetClient(), provisioning.Options{
		Provider: m.Cloud(opts.Provider, metrics.ControllerProvisioner), Region: opts.Region,
		BatchIdle: opts.BatchIdle, BatchMax: opts.BatchMax, Recorder: recorder, Metrics: m, Nominations: nominations,
		NodeOverlay: opts.Gates.NodeOverlay, Scheduling: opts.Scheduling,
	})
	// Runnables get the manager's context, which carries no logger; give them the manager's
	// (the process-wide default may belong to another manager in tests).
	withLogger := func(r interface{ Start(context.Context) error }) manager.RunnableFunc {
		return func(ctx context.Context) error { return r.Start(log.IntoContext(ctx, mgr.GetLogger())) }
	}
	if err := mgr.Add(withLogger(prov)); err != nil {
		return err
	}
	if err := provisioning.NewPodWatcher(mgr.GetClient(), prov, m).SetupWithManager(mgr); err != nil {
		return err
	}
	claimOpts := nodeclaim.Options{
		Provider: m.Cloud(opts.Provider, metrics.ControllerLifecycle), RegistrationTTL: opts.RegistrationTTL,
		Recorder: recorder, Metrics: m, CapacityGone: prov.Trigger, Nominations: nominations,
	}
	// Launches are slow API calls; let several run at once.
	if err := nodeclaim.NewLifecycle(mgr.GetClient(), claimOpts).SetupWithManager(mgr, 10); err != nil {
		return err
	}
	if err := nodeclaim.NewPodEvents(mgr.GetClient(), nil).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := nodeclaim.NewNodeTermination(mgr.GetClient()).SetupWithManager(mgr); err != nil {
		return err
	}
	gcOpts := claimOpts
	gcOpts.Provider = m.Cloud(opts.Provider, metrics.ControllerGC)
	collector, _ := opts.Provider.(nodeclaim.InstanceCollector)
	if err := mgr.Add(withLogger(nodeclaim.NewGarbageCollector(mgr.GetClient(), mgr.GetAPIReader(), opts.GCInterval, gcOpts, collector))); err != nil {
		return err
	}
	if err := mgr.Add(withLogger(disruption.New(mgr.GetClient(), disruption.Options{
		Recorder: recorder, Metrics: m, Simulator: prov, DryRun: opts.DisruptionDryRun, MinSavings: opts.MinSavings,
		SpotToSpot: opts.Gates.SpotToSpotConsolidation, Drift: m.Cloud(opts.Provider, metrics.ControllerDisruption),
		ValidationDelay: opts.DisruptionValidationDelay,
	}))); err != nil {
		return err
	}
	if opts.Gates.NodeRepair {
		if err := nodeclaim.NewRepair(mgr.GetClient(), opts.Provider.RepairPolicies(), recorder, m).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if opts.Gates.StaticCapacity {
		if err := provisioning.NewStatic(mgr.GetClient(), mgr.GetAPIReader(), recorder).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if opts.Gates.NodeOverlay {
		if err := nodeoverlay.NewStatus(mgr.GetClient(), prov).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	status := nodepool.NewStatus(mgr.GetClient(), m.Cloud(opts.Provider, metrics.ControllerPoolStatus), m)
	status.StaticCapacity, status.Overlay = opts.Gates.StaticCapacity, prov.Overlaid
	return status.SetupWithManager(mgr)
}

// watchMetrics serves the gauges computed at scrape time from the manager's cache (on the
// leader only) and watches status conditions for their transitions.
func watchMetrics(mgr ctrl.Manager, m *metrics.Metrics) error {
	elected := mgr.Elected()
	m.Cluster.Bind(func(ctx context.Context) (*state.Cluster, error) { return state.Take(ctx, mgr.GetClient()) },
		func() bool {
			select {
			case <-elected:
				return true
			default:
				return false
			}
		})
	return m.Transitions.WatchTransitions(mgr)
}
