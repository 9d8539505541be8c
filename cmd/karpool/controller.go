package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/karpool/karpool/autoscaler/disruption"
	"github.com/karpool/karpool/internal/featuregates"
	"github.com/karpool/karpool/internal/operator"
	"github.com/karpool/karpool/reconciler"
)

type controllerFlags struct {
	kubeconfig  string
	awsEndpoint string
	region      string
	debug       bool
	minSavings  string
	gates       string
	cfg         operator.Config
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
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, the in-cluster configuration or ~/.kube/config")
	fl.StringVar(&f.cfg.ClusterName, "cluster-name", os.Getenv("CLUSTER_NAME"), "EKS cluster name (required; default $CLUSTER_NAME)")
	fl.StringVar(&f.cfg.ClusterEndpoint, "cluster-endpoint", "", "API server URL nodes join; default from EKS DescribeCluster")
	fl.StringVar(&f.cfg.ClusterCA, "cluster-ca", "", "cluster CA bundle, base64 PEM; default from EKS DescribeCluster")
	fl.StringVar(&f.cfg.ClusterCIDR, "cluster-cidr", "", "service CIDR; default from EKS DescribeCluster")
	fl.StringVar(&f.cfg.KubernetesVersion, "kubernetes-version", "", "cluster version (major.minor) for AMI aliases; default from EKS DescribeCluster")
	fl.StringVar(&f.region, "region", "", "AWS region; default from the SDK chain ($AWS_REGION, shared config)")
	fl.StringVar(&f.awsEndpoint, "aws-endpoint", "", "send every AWS call to this endpoint (e.g. the simulator); default AWS itself")
	fl.StringVar(&f.cfg.Namespace, "namespace", envOr("SYSTEM_NAMESPACE", reconciler.DefaultSecretNamespace), "the controller's namespace: PoolSync credential Secrets and the leader lease")
	fl.StringVar(&f.cfg.MetricsAddr, "metrics-bind-address", "127.0.0.1:8080", `metrics listen address ("0" disables; ":8080" for all interfaces in a pod)`)
	fl.StringVar(&f.cfg.ProbeAddr, "health-probe-bind-address", "127.0.0.1:8081", `health probe listen address ("0" disables)`)
	fl.BoolVar(&f.cfg.LeaderElection, "leader-elect", true, "elect one active replica through a Lease in --namespace")
	fl.DurationVar(&f.cfg.BatchIdle, "batch-idle-duration", time.Second, "a batch of pending pods ends after this long without a new one")
	fl.DurationVar(&f.cfg.BatchMax, "batch-max-duration", 10*time.Second, "a batch of pending pods ends after this long in any case")
	fl.DurationVar(&f.cfg.RegistrationTTL, "registration-ttl", 15*time.Minute, "an instance whose node has not registered after this long is terminated")
	fl.DurationVar(&f.cfg.GCInterval, "gc-interval", time.Minute, "how often leaked instances and NodeClaims without instances are collected")
	fl.StringVar(&f.cfg.InterruptionQueue, "interruption-queue", os.Getenv("INTERRUPTION_QUEUE"), "SQS queue with the instances' interruption events (spot interruption, scheduled change, stop/terminate): their NodeClaims are drained and replaced at once (default $INTERRUPTION_QUEUE; empty: none)")
	fl.BoolVar(&f.cfg.DisruptionDryRun, "disruption-dry-run", false, "decide disruptions as usual but only report them (DisruptionDryRun events, log lines); taint and delete nothing")
	fl.StringVar(&f.minSavings, "consolidation-min-savings", "", `least a consolidation must save: "10%", USD per hour "0.05", or both "10%,0.05"; NodePools may override it with the karpool.dev/consolidation-min-savings annotation (default: any saving, as Karpenter)`)
	fl.StringVar(&f.gates, "feature-gates", os.Getenv("FEATURE_GATES"), `optional behaviours, Karpenter's format: "SpotToSpotConsolidation=true" (spot nodes replaced by cheaper spot nodes); Karpenter's other gates are accepted and ignored (default $FEATURE_GATES)`)
	fl.StringVar(&f.cfg.EventsAddr, "events-addr", "", "Flux notification-controller address (Flux's --events-addr, e.g. http://notification-controller.flux-system.svc.cluster.local./): every PoolSync event is also sent there, for Flux Alerts; empty: none")
	fl.BoolVar(&f.debug, "debug", false, "log debug messages")
	return cmd
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func runController(ctx context.Context, f controllerFlags) error {
	if f.cfg.ClusterName == "" {
		return usageError{errors.New("--cluster-name is required (or set CLUSTER_NAME)")}
	}
	if f.cfg.BatchIdle <= 0 || f.cfg.BatchMax < f.cfg.BatchIdle {
		return usageError{errors.New("--batch-idle-duration must be positive and at most --batch-max-duration")}
	}
	minSavings, err := disruption.ParseMinSavings(f.minSavings)
	if err != nil {
		return usageError{fmt.Errorf("--consolidation-min-savings: %w", err)}
	}
	f.cfg.MinSavings = minSavings
	gates, notes, err := featuregates.Parse(f.gates)
	if err != nil {
		return usageError{fmt.Errorf("--feature-gates: %w", err)}
	}
	f.cfg.Gates = gates
	kube, err := restConfig(f.kubeconfig)
	if err != nil {
		return usageError{err}
	}
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
	f.cfg.Log = operator.NewJSONLogger(os.Stderr, f.debug)
	for _, note := range notes {
		f.cfg.Log.Info(note)
	}
	return operator.Run(ctx, f.cfg, func(r operator.Ready) {
		f.cfg.Log.Info("karpool controller ready", "metrics", r.MetricsURL, "probes", r.ProbeURL, "cluster", f.cfg.ClusterName, "region", awsCfg.Region)
	})
}
