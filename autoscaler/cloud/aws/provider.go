// Package aws is karpool's cloud provider for AWS: it resolves EC2NodeClass selectors, keeps
// launch templates, launches NodeClaims with EC2 CreateFleet and finds, terminates and garbage
// collects their instances, all through the aws-sdk-go-v2 clients. Tests point the same
// clients at testbed/awssim with a custom BaseEndpoint.
package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/cloud/aws/amifamily"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
	"github.com/karpool/karpool/autoscaler/cloud/aws/instanceprofile"
	"github.com/karpool/karpool/autoscaler/cloud/aws/instancetype"
	"github.com/karpool/karpool/autoscaler/cloud/aws/network"
	"github.com/karpool/karpool/internal/awstransport"
)

// UnavailableFor is how long an offering that failed with insufficient capacity is avoided.
const UnavailableFor = 3 * time.Minute

// Options configure a Provider. Only ClusterName is required; the cluster's endpoint, CA,
// service CIDR and Kubernetes version are read with EKS DescribeCluster when left empty.
type Options struct {
	ClusterName string
	// ClusterEndpoint is the API server URL nodes join.
	ClusterEndpoint string
	// ClusterCA is the cluster's CA bundle, base64-encoded PEM (as EKS reports it).
	ClusterCA string
	// ClusterCIDR is the service CIDR (nodeadm needs it to derive the cluster DNS address).
	ClusterCIDR string
	// KubernetesVersion (major.minor) picks the EKS-optimized AMIs of alias terms.
	KubernetesVersion string
	// Catalog is the instance-type catalog of the region; default the embedded one.
	Catalog *catalog.Catalog
	// Unavailable is shared with the scheduler so that it stops choosing offerings that just
	// failed with insufficient capacity; default a private set.
	Unavailable *catalog.Unavailable
	// Now is the clock (unavailable offerings, resolution cache, instance-type discovery);
	// default time.Now.
	Now func() time.Time
	// ReservedENIs and VMMemoryOverheadPercent are Karpenter's settings of the same names:
	// they shape every class's instance types (catalog.NodeClassOptions).
	ReservedENIs            int
	VMMemoryOverheadPercent *float64
	// NoReservedCapacity is Karpenter's ReservedCapacity=false: capacity reservations are not
	// resolved, offered or targeted, and launches leave EC2's default (open reservations may
	// take an instance; it still counts as on-demand).
	NoReservedCapacity bool
}

// Provider is the AWS CloudProvider. It is safe for concurrent use.
type Provider struct {
	ec2    *ec2.Client
	eks    *eks.Client
	region string
	opts   Options

	// clusterMu guards opts' cluster facts while they are filled in from EKS.
	clusterMu   sync.Mutex
	clusterDone bool

	// launchTemplates maps a launch template name (which embeds the hash of its content) to
	// its id, so a template is described or created once per process.
	ltMu            sync.Mutex
	launchTemplates map[string]string

	resolvedMu    sync.Mutex
	resolvedCache map[string]resolvedEntry

	// The providers of the classes' AWS resources, one per concern. The instance profiles are
	// written by the class controller only.
	network *network.Provider
	// fullSubnets are the subnets recently found without a free address.
	fullSubnets   network.FullSubnets
	amis          *amifamily.Provider
	instanceTypes *instancetype.Provider
	profiles      *instanceprofile.Provider
	reservations  *capreservation.Provider
}

var _ cloud.CloudProvider = (*Provider)(nil)

// Name is the provider's name in metrics, as Karpenter's AWS provider calls itself.
func (p *Provider) Name() string { return "aws" }

// RepairPolicies are Karpenter's for AWS: the kubelet's Ready condition, and the conditions
// of the EKS node monitoring agent.
func (p *Provider) RepairPolicies() []cloud.RepairPolicy {
	const usual, accelerators = 30 * time.Minute, 10 * time.Minute
	return []cloud.RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: usual},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: usual},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: accelerators},
		{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: usual},
		{ConditionType: "NetworkingReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: usual},
		{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: usual},
		{ConditionType: "ContainerRuntimeReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: usual},
	}
}

// New returns a Provider using the SDK configuration cfg (credentials from the standard chain,
// region, endpoint). Throttled calls are retried with the SDK's adaptive retryer, up to 10
// attempts, so a burst of throttling slows launches down instead of failing them.
func New(cfg aws.Config, opts Options) (*Provider, error) {
	if opts.ClusterName == "" {
		return nil, fmt.Errorf("aws cloud provider: the cluster name is required (set Options.ClusterName)")
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("aws cloud provider: the AWS region is not set (set AWS_REGION or the region in the shared config)")
	}
	if opts.Catalog == nil {
		c, err := catalog.Load(cfg.Region)
		if err != nil {
			return nil, fmt.Errorf("aws cloud provider: %w", err)
		}
		opts.Catalog = c
	}
	if opts.Unavailable == nil {
		opts.Unavailable = catalog.NewUnavailable()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg = cfg.Copy()
	if _, ok := cfg.HTTPClient.(awstransport.BufferedBodies); !ok {
		cfg.HTTPClient = awstransport.New(cfg.HTTPClient)
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
				so.MaxAttempts = 10
				so.MaxBackoff = 5 * time.Second
				// The retry quota is meant to stop retry storms against a failing service;
				// throttling is handled by the adaptive rate limiter instead.
				so.RateLimiter = ratelimit.None
			})
		})
	}
	ec2Client, ssmClient := ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	return &Provider{
		ec2:          ec2Client,
		network:      network.New(ec2Client, opts.ClusterName),
		amis:         amifamily.New(ec2Client, ssmClient, opts.Now),
		eks:          eks.NewFromConfig(cfg),
		profiles:     instanceprofile.New(iam.NewFromConfig(cfg), opts.ClusterName, cfg.Region),
		reservations: capreservation.New(ec2Client, opts.Now),
		instanceTypes: instancetype.New(ec2Client, pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = instancetype.PricingRegion(cfg.Region) }),
			cfg.Region, opts.Catalog, opts.Unavailable, opts.Now),
		region:          cfg.Region,
		opts:            opts,
		launchTemplates: map[string]string{},
		resolvedCache:   map[string]resolvedEntry{},
	}, nil
}

// RefreshInstanceTypes reads the region's instance types and prices from AWS now
// (instancetype.Provider.Refresh); a controller may call it at start-up.
func (p *Provider) RefreshInstanceTypes(ctx context.Context) error {
	return p.instanceTypes.Refresh(ctx)
}

// InstanceProfileName is the name of the instance profile karpool manages for a class with
// spec.role.
func (p *Provider) InstanceProfileName(class string) string { return p.profiles.Name(class) }

// EnsureInstanceProfile creates or corrects the class's instance profile and returns its name
// (instanceprofile.Provider.Ensure); the EC2NodeClass controller calls it.
func (p *Provider) EnsureInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	return p.profiles.Ensure(ctx, nc)
}

// DeleteInstanceProfile deletes the class's instance profile once its nodes are gone.
func (p *Provider) DeleteInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	return p.profiles.Delete(ctx, nc)
}

// cluster fills the cluster facts that were not given in Options from EKS DescribeCluster.
// A failed call is retried by the next launch.
func (p *Provider) cluster(ctx context.Context) error {
	p.clusterMu.Lock()
	defer p.clusterMu.Unlock()
	if p.clusterDone {
		return nil
	}
	o := &p.opts
	if o.ClusterEndpoint == "" || o.ClusterCA == "" || o.ClusterCIDR == "" || o.KubernetesVersion == "" {
		out, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(o.ClusterName)})
		if err != nil {
			return fmt.Errorf("describing EKS cluster %q (needed for the node bootstrap settings not given in the options): %w", o.ClusterName, err)
		}
		c := out.Cluster
		if o.ClusterEndpoint == "" {
			o.ClusterEndpoint = aws.ToString(c.Endpoint)
		}
		if o.ClusterCA == "" && c.CertificateAuthority != nil {
			o.ClusterCA = aws.ToString(c.CertificateAuthority.Data)
		}
		if o.ClusterCIDR == "" && c.KubernetesNetworkConfig != nil {
			o.ClusterCIDR = aws.ToString(c.KubernetesNetworkConfig.ServiceIpv4Cidr)
		}
		if o.KubernetesVersion == "" {
			o.KubernetesVersion = aws.ToString(c.Version)
		}
	}
	if _, err := base64.StdEncoding.DecodeString(o.ClusterCA); err != nil {
		return fmt.Errorf("cluster %q: the CA bundle is not base64 (%v); pass it base64-encoded as EKS reports it", o.ClusterName, err)
	}
	p.clusterDone = true
	return nil
}

// clusterFacts returns the cluster facts once cluster has succeeded.
func (p *Provider) clusterFacts() Options {
	p.clusterMu.Lock()
	defer p.clusterMu.Unlock()
	return p.opts
}

// MarkUnavailable avoids an offering for UnavailableFor, as after insufficient capacity: a spot
// offering that was just interrupted would likely be interrupted again.
func (p *Provider) MarkUnavailable(instanceType, zone, capacityType string) {
	p.opts.Unavailable.Mark(instanceType, zone, capacityType, p.opts.Now().Add(UnavailableFor))
}

// classOptions are the class's instance-type options with the provider's settings applied.
func (p *Provider) classOptions(nc *awsv1.EC2NodeClass) (catalog.NodeClassOptions, error) {
	opts, err := catalog.NodeClassOptionsFor(&nc.Spec)
	opts.ReservedENIs, opts.VMMemoryOverheadPercent = p.opts.ReservedENIs, p.opts.VMMemoryOverheadPercent
	return opts, err
}
