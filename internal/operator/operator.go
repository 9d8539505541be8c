// Package operator runs karpool's controllers in one process: the PoolSync GitOps reconciler,
// the EC2NodeClass status controller and the autoscaler (provisioning, NodeClaim lifecycle,
// garbage collection, NodePool status), on one controller-runtime manager with leader election,
// health and readiness probes and a Prometheus endpoint. `karpool controller` and `karpool up`
// both run it.
package operator

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	rtcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/autoscaler"
	"github.com/karpool/karpool/autoscaler/catalog"
	awsprovider "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/autoscaler/cloud/aws/interruption"
	"github.com/karpool/karpool/autoscaler/cloud/aws/nodeclass"
	"github.com/karpool/karpool/autoscaler/disruption"
	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/featuregates"
	"github.com/karpool/karpool/internal/switchover"
	"github.com/karpool/karpool/reconciler"
)

// Config is everything the controller process needs.
type Config struct {
	// Kube is the cluster to manage.
	Kube *rest.Config
	// AWS is the SDK configuration (credentials from the standard chain; BaseEndpoint pointed
	// at the simulator in tests and `karpool up`).
	AWS aws.Config
	// ClusterName is required; the endpoint, CA (base64 PEM), service CIDR and Kubernetes
	// version are read from EKS DescribeCluster when empty.
	ClusterName, ClusterEndpoint, ClusterCA, ClusterCIDR, KubernetesVersion string
	// Namespace is where the controller runs: credential Secrets of PoolSyncs and the leader
	// election lease live there.
	Namespace string
	// MetricsAddr and ProbeAddr are listen addresses ("0" disables); both default to loopback
	// (the command's defaults are the in-cluster ones).
	MetricsAddr, ProbeAddr string
	LeaderElection         bool
	// KarpenterLeases are the Leases of a Karpenter controller: while one is held, karpool does
	// not act (internal/switchover). Empty: none is looked at.
	KarpenterLeases []types.NamespacedName
	// Autoscaler tuning (zero values take the defaults).
	BatchIdle, BatchMax, RegistrationTTL, GCInterval time.Duration
	// InterruptionQueue is the SQS queue EventBridge sends the instances' interruption events to
	// (Karpenter's INTERRUPTION_QUEUE); empty: none is watched.
	InterruptionQueue string
	// DisruptionDryRun and MinSavings: see autoscaler.Options.
	DisruptionDryRun bool
	MinSavings       disruption.MinSavings
	// ReservedENIs and VMMemoryOverheadPercent are Karpenter's settings (nil: its default 7.5 %).
	ReservedENIs            int
	VMMemoryOverheadPercent *float64
	// DisruptionValidationDelay is how long disruption decisions wait before they are carried
	// out (0: Karpenter's 15 s); tests shorten it.
	DisruptionValidationDelay time.Duration
	// Gates are the feature gates (--feature-gates, Karpenter's FEATURE_GATES).
	Gates featuregates.Gates
	// Scheduling holds the scheduler settings (PREFERENCE_POLICY, MIN_VALUES_POLICY).
	Scheduling scheduling.Options
	// EventsAddr is Flux's notification-controller, which then receives every PoolSync event
	// (Flux's --events-addr); empty: none is sent.
	EventsAddr string
	// Profiling serves Go's pprof handlers under /debug/pprof/ on the metrics address.
	Profiling bool
	Log       logr.Logger
}

// Ready is reported once the manager runs: the addresses it actually listens on.
type Ready struct {
	MetricsURL string
	ProbeURL   string
}

// Run starts the controllers and blocks until ctx ends or a controller fails. ready, when not
// nil, is called once the caches are synced.
func Run(ctx context.Context, cfg Config, ready func(Ready)) error {
	if cfg.ClusterName == "" {
		return fmt.Errorf("a cluster name is required (--cluster-name)")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = reconciler.DefaultSecretNamespace
	}
	ctrl.SetLogger(cfg.Log)
	ctx = ctrl.LoggerInto(ctx, cfg.Log)
	if cfg.MetricsAddr == "" {
		cfg.MetricsAddr = "127.0.0.1:8080"
	}
	if cfg.ProbeAddr == "" {
		cfg.ProbeAddr = "127.0.0.1:8081"
	}
	opts := ctrl.Options{
		Scheme:                  scheme.Scheme,
		Logger:                  cfg.Log,
		Metrics:                 metricsserver.Options{BindAddress: cfg.MetricsAddr, ExtraHandlers: profilingHandlers(cfg.Profiling)},
		Cache:                   cacheOptions(),
		HealthProbeBindAddress:  cfg.ProbeAddr,
		LeaderElection:          cfg.LeaderElection,
		LeaderElectionID:        leaseName,
		LeaderElectionNamespace: cfg.Namespace,
		// Losing the lease must stop the process: another replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
	}
	watchKarpenter, err := holdBackForKarpenter(ctx, cfg, &opts)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg.Kube, opts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if watchKarpenter != nil {
		if err := mgr.Add(watchKarpenter); err != nil {
			return err
		}
	}
	cat, err := catalog.Load(cfg.AWS.Region)
	if err != nil {
		return fmt.Errorf("region %q: %w", cfg.AWS.Region, err)
	}
	provider, err := awsprovider.New(cfg.AWS, awsprovider.Options{
		ClusterName: cfg.ClusterName, ClusterEndpoint: cfg.ClusterEndpoint, ClusterCA: cfg.ClusterCA,
		ClusterCIDR: cfg.ClusterCIDR, KubernetesVersion: cfg.KubernetesVersion,
		Catalog: cat, ReservedENIs: cfg.ReservedENIs, VMMemoryOverheadPercent: cfg.VMMemoryOverheadPercent,
		NoReservedCapacity: cfg.Gates.NoReservedCapacity,
	})
	if err != nil {
		return err
	}
	var notifier *events.Recorder
	if cfg.EventsAddr != "" {
		if notifier, err = reconciler.NewNotifier(cfg.EventsAddr, cfg.Log.WithName("events")); err != nil {
			return err
		}
	}
	poolSync := reconciler.New(mgr.GetClient(), reconciler.Options{
		SecretNamespace: cfg.Namespace,
		SecretReader:    mgr.GetAPIReader(),
		EventRecorder:   mgr.GetEventRecorderFor("karpool"),
		Notifier:        notifier,
		Metrics:         rtcontroller.NewMetrics(mgr, fluxRecorder()),
		Region:          cfg.AWS.Region,
		// spec.aws works with the controller's own credentials and endpoint, in its region.
		AWSConfig: func(_ context.Context, region string) (aws.Config, error) {
			c := cfg.AWS.Copy()
			c.Region = region
			return c, nil
		},
		Reserved: func(ctx context.Context) (simulate.Reserved, error) {
			return clusterReservations(ctx, mgr.GetClient(), provider)
		},
		NodeOverlays: cfg.Gates.NodeOverlay,
	})
	if err := poolSync.SetupWithManager(mgr, reconciler.SetupOptions{MaxConcurrentReconciles: 2, SkipNameValidation: true}); err != nil {
		return err
	}
	if err := nodeclass.New(mgr.GetClient(), provider, nodeclass.Options{SkipNameValidation: true}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := autoscaler.Setup(ctx, mgr, autoscaler.Options{
		Provider: provider, Region: cfg.AWS.Region,
		BatchIdle: cfg.BatchIdle, BatchMax: cfg.BatchMax, RegistrationTTL: cfg.RegistrationTTL, GCInterval: cfg.GCInterval,
		DisruptionDryRun: cfg.DisruptionDryRun, MinSavings: cfg.MinSavings, Gates: cfg.Gates, Scheduling: cfg.Scheduling,
		DisruptionValidationDelay: cfg.DisruptionValidationDelay,
		Registry:                  crmetrics.Registry,
	}); err != nil {
		return err
	}
	if cfg.InterruptionQueue != "" {
		if err := addInterruption(mgr, cfg, provider); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	if cfg.LeaderElection {
		// Replicas that wait for the lease are otherwise silent; this line tells an operator
		// which one acts.
		go func() {
			select {
			case <-mgr.Elected():
				cfg.Log.Info("acting as leader", "lease", cfg.Namespace+"/"+leaseName)
			case <-ctx.Done():
			}
		}()
	}
	if ready != nil {
		go func() {
			if mgr.GetCache().WaitForCacheSync(ctx) {
				ready(Ready{MetricsURL: "http://" + cfg.MetricsAddr + "/metrics", ProbeURL: "http://" + cfg.ProbeAddr + "/readyz"})
			}
		}()
	}
	return mgr.Start(ctx)
}

// leaseName is the Lease replicas compete for, in Config.Namespace.
const leaseName = "karpool-leader-election"

// holdBackForKarpenter keeps karpool from acting while a Karpenter controller holds one of
// cfg.KarpenterLeases. With leader election, karpool's own lock cannot be taken or renewed
// meanwhile; without, Run waits here until the Leases are free and returns a runnable that stops
// the manager if Karpenter comes back.
func holdBackForKarpenter(ctx context.Context, cfg Config, opts *ctrl.Options) (manager.Runnable, error) {
	if len(cfg.KarpenterLeases) == 0 {
		return nil, nil
	}
	checker, err := switchover.NewChecker(cfg.Kube, cfg.KarpenterLeases)
	if err != nil {
		return nil, err
	}
	if cfg.LeaderElection {
		lock, err := switchover.LeaderLock(cfg.Kube, cfg.Namespace, leaseName, checker, cfg.Log.WithName("switchover"))
		if err != nil {
			return nil, err
		}
		opts.LeaderElectionResourceLockInterface = lock
		return nil, nil
	}
	if err := switchover.Wait(ctx, checker, 5*time.Second, cfg.Log.WithName("switchover")); err != nil {
		return nil, err
	}
	return manager.RunnableFunc(func(ctx context.Context) error {
		return switchover.Watch(ctx, checker, 10*time.Second)
	}), nil
}

// fluxRecorder returns Flux's reconcile metrics recorder, registered once per process (tests
// run the operator more than once).
var fluxRecorder = sync.OnceValue(fluxmetrics.MustMakeRecorder)

// addInterruption runs the interruption queue consumer on the leader.
func addInterruption(mgr ctrl.Manager, cfg Config, provider *awsprovider.Provider) error {
	m, err := metrics.New(crmetrics.Registry) // the autoscaler's collectors, already registered
	if err != nil {
		return err
	}
	c := interruption.New(sqs.NewFromConfig(cfg.AWS), mgr.GetClient(), interruption.Options{
		Queue: cfg.InterruptionQueue, Recorder: mgr.GetEventRecorderFor("karpenter"), Metrics: m,
		MarkUnavailable: provider.MarkUnavailable,
	})
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return c.Start(log.IntoContext(ctx, mgr.GetLogger()))
	}))
}

// clusterReservations are the capacity reservations the cluster's EC2NodeClasses resolved to
// (their status) with the room the provider knows each has, for the plans of pull requests.
func clusterReservations(ctx context.Context, c client.Client, p *awsprovider.Provider) (simulate.Reserved, error) {
	var classes awsv1.EC2NodeClassList
	if err := c.List(ctx, &classes); err != nil {
		return nil, err
	}
	out := simulate.Reserved{}
	for _, nc := range classes.Items {
		for _, r := range nc.Status.CapacityReservations {
			out[nc.Name] = append(out[nc.Name], simulate.Reservation{CapacityReservation: r, Available: p.ReservationAvailable(r.ID)})
		}
	}
	return out, nil
}
