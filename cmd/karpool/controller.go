package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/disruption"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/internal/featuregates"
	"github.com/karpool/karpool/internal/operator"
	"github.com/karpool/karpool/internal/switchover"
	"github.com/karpool/karpool/reconciler"
)

type controllerFlags struct {
	kubeconfig  string
	awsEndpoint string
	region      string
	logLevel    string
	qps, burst  int
	vmOverhead  float64
	env         *envFlags
	minSavings  string
	gates       string
	leases      string
	// preferences and minValues are PREFERENCE_POLICY and MIN_VALUES_POLICY.
	preferences, minValues string
	// ignoreDRA is IGNORE_DRA_REQUESTS: only Karpenter's default (true) is implemented.
	ignoreDRA bool
	cfg       operator.Config
}

func newControllerCommand() *cobra.Command {
	var f controllerFlags
	cmd := &cobra.Command{
		Use:   "controller --cluster-name NAME",
		Short: "Run karpool's controllers: PoolSync GitOps, EC2NodeClass status and the autoscaler",
		Long: `controller runs every karpool controller in one process, with leader election so that
only one replica acts at a time:

  - PoolSync: Git → kustomize → schema → server-side apply, with Flux-style status;
  - EC2NodeClass: resolves subnets, security groups, AMIs and the instance profile into status;
  - the autoscaler: pods the kube-scheduler marked Unschedulable are batched, planned with the
    scheduling engine ('karpool simulate' runs the same one) and turned into NodeClaims, which are
    launched on EC2, registered, initialized, and drained and terminated when deleted.

AWS credentials and region come from the SDK's standard chain (environment, shared config,
IRSA / EKS Pod Identity); they are never logged. --aws-endpoint (or AWS_ENDPOINT_URL) points
every AWS client at another endpoint, e.g. 'karpool awssim'. Logs are JSON lines on stderr
with Karpenter's messages ("launched nodeclaim", ...). Metrics are served on
--metrics-bind-address at /metrics, probes on --health-probe-bind-address at /healthz and
/readyz.`,
		Example: `  karpool controller --cluster-name demo --kubeconfig ~/.kube/config
  karpool controller --cluster-name karpool-local --aws-endpoint http://127.0.0.1:4566 --leader-elect=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runController(ctx, f)
		},
	}
	fl := cmd.Flags()
	env := &envFlags{fs: fl}
	f.env = env
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, the in-cluster configuration or ~/.kube/config")
	env.StringVar(&f.cfg.ClusterName, "cluster-name", "CLUSTER_NAME", "", "EKS cluster name (required)")
	env.StringVar(&f.cfg.ClusterEndpoint, "cluster-endpoint", "CLUSTER_ENDPOINT", "", "API server URL nodes join; default from EKS DescribeCluster")
	env.StringVar(&f.cfg.ClusterCA, "cluster-ca", "CLUSTER_CA_BUNDLE", "", "cluster CA bundle, base64 PEM; default from EKS DescribeCluster")
	fl.StringVar(&f.cfg.ClusterCIDR, "cluster-cidr", "", "service CIDR; default from EKS DescribeCluster")
	fl.StringVar(&f.cfg.KubernetesVersion, "kubernetes-version", "", "cluster version (major.minor) for AMI aliases; default from EKS DescribeCluster")
	fl.StringVar(&f.region, "region", "", "AWS region; default from the SDK chain ($AWS_REGION, shared config)")
	fl.StringVar(&f.awsEndpoint, "aws-endpoint", "", "send every AWS call to this endpoint (e.g. the simulator); default AWS itself")
	env.StringVar(&f.cfg.Namespace, "namespace", "SYSTEM_NAMESPACE", reconciler.DefaultSecretNamespace, "the controller's namespace: PoolSync credential Secrets and the leader lease")
	// Karpenter sets ports and listens on every interface; the addresses here default to its
	// ports, on every interface only in a pod.
	metricsPort, probePort := env.envInt("METRICS_PORT", 8080), env.envInt("HEALTH_PROBE_PORT", 8081)
	fl.StringVar(&f.cfg.MetricsAddr, "metrics-bind-address", listenAddr(metricsPort), `metrics listen address ("0" disables); the port from $METRICS_PORT, all interfaces in a pod, loopback elsewhere`)
	fl.StringVar(&f.cfg.ProbeAddr, "health-probe-bind-address", listenAddr(probePort), `health probe listen address ("0" disables); the port from $HEALTH_PROBE_PORT, all interfaces in a pod, loopback elsewhere`)
	leaderElect := true
	if disabled, ok := env.envBool("DISABLE_LEADER_ELECTION"); ok {
		leaderElect = !disabled
	}
	fl.BoolVar(&f.cfg.LeaderElection, "leader-elect", leaderElect, "elect one active replica through a Lease in --namespace (env DISABLE_LEADER_ELECTION=true turns it off)")
	fl.StringVar(&f.leases, "karpenter-leases", defaultKarpenterLeases(), "a running Karpenter's leader-election Leases, namespace/name, comma-separated: while one is held karpool does not act; once Karpenter stops, karpool adopts its NodeClaims (empty: none is looked at)")
	env.IntVar(&f.qps, "kube-client-qps", "KUBE_CLIENT_QPS", 200, "requests per second to the API server, smoothed")
	env.IntVar(&f.burst, "kube-client-burst", "KUBE_CLIENT_BURST", 300, "requests to the API server in a burst")
	env.DurationVar(&f.cfg.BatchIdle, "batch-idle-duration", "BATCH_IDLE_DURATION", time.Second, "a batch of pending pods ends after this long without a new one")
	env.DurationVar(&f.cfg.BatchMax, "batch-max-duration", "BATCH_MAX_DURATION", 10*time.Second, "a batch of pending pods ends after this long in any case")
	fl.DurationVar(&f.cfg.RegistrationTTL, "registration-ttl", 15*time.Minute, "an instance whose node has not registered after this long is terminated")
	fl.DurationVar(&f.cfg.GCInterval, "gc-interval", time.Minute, "how often leaked instances and NodeClaims without instances are collected")
	env.Float64Var(&f.vmOverhead, "vm-memory-overhead-percent", "VM_MEMORY_OVERHEAD_PERCENT", catalog.VMMemoryOverheadPercent, "share of an instance type's memory the hypervisor keeps, taken off its capacity")
	env.IntVar(&f.cfg.ReservedENIs, "reserved-enis", "RESERVED_ENIS", 0, "network interfaces per instance kept out of the VPC CNI's pod count")
	env.StringVar(&f.cfg.InterruptionQueue, "interruption-queue", "INTERRUPTION_QUEUE", "", "SQS queue with the instances' interruption events (spot interruption, scheduled change, stop/terminate): their NodeClaims are drained and replaced at once (empty: none)")
	fl.BoolVar(&f.cfg.DisruptionDryRun, "disruption-dry-run", false, "decide disruptions as usual but only report them (DisruptionDryRun events, log lines); taint and delete nothing")
	fl.StringVar(&f.minSavings, "consolidation-min-savings", "", `least a consolidation must save: "10%", USD per hour "0.05", or both "10%,0.05"; NodePools may override it with the karpool.dev/consolidation-min-savings annotation (default: any saving, as Karpenter)`)
	env.StringVar(&f.gates, "feature-gates", "FEATURE_GATES", "", `optional behaviours, Karpenter's format: "SpotToSpotConsolidation=true" (spot nodes replaced by cheaper spot nodes), "StaticCapacity=true" (static NodePools keep spec.replicas nodes), "NodeOverlay=true" (NodeOverlays change prices and extended resources), "NodeRepair=true" (unhealthy nodes replaced); Karpenter's other gates are accepted when off and refused when turned on, as karpool does not implement them`)
	env.StringVar(&f.preferences, "preference-policy", "PREFERENCE_POLICY", scheduling.PreferencesRespect, `how pods' preferences (preferred node and pod affinity, ScheduleAnyway topology spread) are treated: "Respect" (tried, then relaxed) or "Ignore"`)
	env.StringVar(&f.minValues, "min-values-policy", "MIN_VALUES_POLICY", scheduling.MinValuesStrict, `"Strict": a NodeClaim that cannot list minValues distinct values launches nothing and its pods wait; "BestEffort": it launches with what there is, its minValues lowered and the NodeClaim annotated karpenter.sh/nodeclaim-min-values-relaxed=true`)
	ignoreDRA := true
	if v, ok := env.envBool("IGNORE_DRA_REQUESTS"); ok {
		ignoreDRA = v
	}
	fl.BoolVar(&f.ignoreDRA, "ignore-dra-requests", ignoreDRA, "pods with Dynamic Resource Allocation claims get no node, as with Karpenter's default (env IGNORE_DRA_REQUESTS); false, Karpenter's DRA alpha, is refused: karpool does not model devices")
	fl.StringVar(&f.cfg.EventsAddr, "events-addr", "", "Flux notification-controller address (Flux's --events-addr, e.g. http://notification-controller.flux-system.svc.cluster.local./): every PoolSync event is also sent there, for Flux Alerts; empty: none")
	profiling, _ := env.envBool("ENABLE_PROFILING")
	fl.BoolVar(&f.cfg.Profiling, "enable-profiling", profiling, "serve Go's pprof profiles under /debug/pprof/ on the metrics address, as Karpenter's ENABLE_PROFILING (env ENABLE_PROFILING)")
	env.StringVar(&f.logLevel, "log-level", "LOG_LEVEL", "info", "debug, info or error")
	return cmd
}

// defaultKarpenterLeases lists switchover.DefaultLeases as the flag writes them.
func defaultKarpenterLeases() string {
	var names []string
	for _, l := range switchover.DefaultLeases {
		names = append(names, l.String())
	}
	return strings.Join(names, ",")
}

func runController(ctx context.Context, f controllerFlags) error {
	if err := f.env.err(); err != nil {
		return usageError{err}
	}
	if f.cfg.ClusterName == "" {
		return usageError{errors.New("--cluster-name is required (or set CLUSTER_NAME)")}
	}
	level, err := operator.ParseLogLevel(f.logLevel)
	if err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	if f.qps <= 0 || f.burst <= 0 {
		return usageError{errors.New("--kube-client-qps and --kube-client-burst must be positive")}
	}
	if f.vmOverhead < 0 || f.vmOverhead >= 1 || f.cfg.ReservedENIs < 0 {
		return usageError{errors.New("--vm-memory-overhead-percent must be in [0, 1) (0.075 is 7.5 %) and --reserved-enis at least 0")}
	}
	if f.cfg.BatchIdle <= 0 || f.cfg.BatchMax < f.cfg.BatchIdle {
		return usageError{errors.New("--batch-idle-duration must be positive and at most --batch-max-duration")}
	}
	minSavings, err := disruption.ParseMinSavings(f.minSavings)
	if err != nil {
		return usageError{fmt.Errorf("--consolidation-min-savings: %w", err)}
	}
	f.cfg.MinSavings = minSavings
	gates, err := featuregates.Parse(f.gates)
	if err != nil {
		return usageError{fmt.Errorf("--feature-gates: %w", err)}
	}
	f.cfg.Gates = gates
	if !f.ignoreDRA {
		return usageError{errors.New("--ignore-dra-requests=false (IGNORE_DRA_REQUESTS=false) is Karpenter's DRA alpha, which karpool does not implement: leave it true")}
	}
	if f.cfg.Scheduling, err = scheduling.PolicyOptions(f.preferences, f.minValues); err != nil {
		return usageError{fmt.Errorf("--preference-policy (PREFERENCE_POLICY) / --min-values-policy (MIN_VALUES_POLICY): %w", err)}
	}
	if f.cfg.KarpenterLeases, err = switchover.ParseLeases(f.leases); err != nil {
		return usageError{fmt.Errorf("--karpenter-leases: %w", err)}
	}
	kube, err := restConfig(f.kubeconfig)
	if err != nil {
		return usageError{err}
	}
	kube.QPS, kube.Burst = float32(f.qps), f.burst
	f.cfg.VMMemoryOverheadPercent = &f.vmOverhead
	var opts []func(*awsconfig.LoadOptions) error
	if f.region != "" {
		opts = append(opts, awsconfig.WithRegion(f.region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return usageError{errors.New("no AWS region: set --region or AWS_REGION")}
	}
	if f.awsEndpoint != "" {
		awsCfg.BaseEndpoint = &f.awsEndpoint
	}
	f.cfg.Kube = kube
	f.cfg.AWS = awsCfg
	f.cfg.Log = operator.NewJSONLogger(os.Stderr, level)
	return operator.Run(ctx, f.cfg, func(r operator.Ready) {
		f.cfg.Log.Info("karpool controller ready", "metrics", r.MetricsURL, "probes", r.ProbeURL, "cluster", f.cfg.ClusterName, "region", awsCfg.Region)
	})
}
