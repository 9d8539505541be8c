// Package prereq renders the AWS resources a cluster's pools need before karpool can launch a
// node — node role, instance profiles, controller role and least-privilege policy, interruption
// queue and its EventBridge rules, discovery tags, node access to the cluster, the spot
// service-linked role — from the cluster's settings and the EC2NodeClasses of a revision.
//
// Render is pure: the same desired state feeds `karpool render --aws` (CloudFormation,
// Terraform JSON, JSON), the apply that ensures it through the AWS API, and the least-privilege
// tests, which decide the controller's recorded requests against ControllerPolicy.
package prereq

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
)

// Settings are the facts about the cluster and its account that the resources depend on.
type Settings struct {
	// ClusterName is the EKS cluster's name; it names and tags everything.
	ClusterName string
	Region      string
	AccountID   string
	// Partition is aws (default), aws-cn or aws-us-gov.
	Partition string

	// The controller's identity: OIDCIssuer (IRSA, the cluster's issuer URL) or PodIdentity
	// (EKS Pod Identity). Exactly one is set.
	OIDCIssuer  string
	PodIdentity bool
	// Namespace and ServiceAccount run the controller; default karpool-system and karpool.
	Namespace, ServiceAccount string

	// NodeRole is the default node role; default KarpenterNodeRole-<cluster>. It, the
	// InstanceProfileRoles and every EC2NodeClass's spec.role are read as Karpenter reads
	// spec.role (awsv1.RolePattern): a name, a path and name, or an ARN.
	NodeRole string
	// InstanceProfileRoles are the roles of instance profiles karpool does not manage
	// (EC2NodeClasses with spec.instanceProfile): the controller must be allowed to pass them.
	InstanceProfileRoles []string
	// AllowedAccounts are the accounts besides AccountID whose role ARNs the roles may name.
	// Without them, an ARN of another account is refused.
	AllowedAccounts []string
	// InterruptionQueue is the SQS queue's name; default the cluster name.
	InterruptionQueue string
	// NodeAccess is how nodes join: "access-entry" (default, EKS access entry EC2_LINUX) or
	// "aws-auth" (a mapRoles entry of the aws-auth ConfigMap).
	NodeAccess string
	// Subnets and SecurityGroups get the discovery tag, besides those the classes select by ID.
	Subnets, SecurityGroups []string
}

// Node access modes.
const (
	AccessEntry = "access-entry"
	AWSAuth     = "aws-auth"
)

// DiscoveryTag is the tag EC2NodeClasses select subnets and security groups by, valued with the
// cluster name.
const DiscoveryTag = "karpenter.sh/discovery"

// OwnerTag marks what karpool created for a cluster: apply changes and prunes only what carries
// it with this cluster's name.
const OwnerTag = "karpool.dev/cluster"

var (
	clusterName = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)
	region      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	account     = regexp.MustCompile(`^[0-9]{12}$`)
	k8sName     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// withDefaults fills the defaults.
func (s Settings) withDefaults() Settings {
	if s.Partition == "" {
		s.Partition = "aws"
	}
	if s.Namespace == "" {
		s.Namespace = "karpool-system"
	}
	if s.ServiceAccount == "" {
		s.ServiceAccount = "karpool"
	}
	if s.NodeRole == "" {
		s.NodeRole = "KarpenterNodeRole-" + s.ClusterName
	}
	if s.InterruptionQueue == "" {
		s.InterruptionQueue = s.ClusterName
	}
	if s.NodeAccess == "" {
		s.NodeAccess = AccessEntry
	}
	return s
}

// validate checks settings with their defaults, naming the setting at fault.
func (s Settings) validate() error {
	if err := s.validateScope(); err != nil {
		return err
	}
	if err := firstFailed([]check{
		{(s.OIDCIssuer != "") != s.PodIdentity, "controller identity: set the OIDC issuer (IRSA) or Pod Identity, exactly one"},
		{s.OIDCIssuer == "" || issuerURL.MatchString(s.OIDCIssuer), fmt.Sprintf("OIDC issuer %q: the cluster's issuer URL, https://oidc.eks.<region>.amazonaws.com/id/<id>", s.OIDCIssuer)},
		{k8sName.MatchString(s.Namespace) && k8sName.MatchString(s.ServiceAccount), fmt.Sprintf("namespace %q and service account %q: Kubernetes names", s.Namespace, s.ServiceAccount)},
		{s.NodeAccess == AccessEntry || s.NodeAccess == AWSAuth, fmt.Sprintf("node access %q: %s or %s", s.NodeAccess, AccessEntry, AWSAuth)},
	}); err != nil {
		return err
	}
	return checkIDs("AWS settings: subnet (--subnet)", "AWS settings: security group (--security-group)", s.Subnets, s.SecurityGroups)
}

// validateScope checks the settings the controller policy is scoped by: whatever the
// controller's identity, a policy is rendered only from these.
func (s Settings) validateScope() error {
	if err := firstFailed([]check{
		{clusterName.MatchString(s.ClusterName), fmt.Sprintf("cluster name %q: 1 to 100 letters, digits, - and _, starting with a letter or digit", s.ClusterName)},
		{region.MatchString(s.Region), fmt.Sprintf("region %q: an AWS region such as us-east-1", s.Region)},
		{account.MatchString(s.AccountID), fmt.Sprintf("account ID %q: 12 digits", s.AccountID)},
		{s.Partition == "aws" || s.Partition == "aws-cn" || s.Partition == "aws-us-gov", fmt.Sprintf("partition %q: aws, aws-cn or aws-us-gov", s.Partition)},
	}); err != nil {
		return err
	}
	return s.checkNames()
}

// check is one condition on the settings, and what the setting should be when it fails.
type check struct {
	ok   bool
	what string
}

func firstFailed(checks []check) error {
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("AWS settings: %s", c.what)
		}
	}
	return nil
}

// arn builds an ARN of this partition.
func (s Settings) arn(service, region, account, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", s.Partition, service, region, account, resource)
}

// QueueARN is the interruption queue's ARN.
func (s Settings) QueueARN() string { return s.arn("sqs", s.Region, s.AccountID, s.InterruptionQueue) }

// ClusterARN is the EKS cluster's ARN.
func (s Settings) ClusterARN() string {
	return s.arn("eks", s.Region, s.AccountID, "cluster/"+s.ClusterName)
}

// urlSuffix is the service principal's domain in the partition.
func (s Settings) urlSuffix() string {
	if s.Partition == "aws-cn" {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

// InstanceProfileName is the instance profile karpool manages for an EC2NodeClass with
// spec.role: the cluster name and a hash of the region and the class name, so that it is stable,
// distinct per region and class, and within IAM's 128 characters whatever the cluster is called.
func InstanceProfileName(cluster, region, class string) string {
	sum := sha256.Sum256([]byte(region + "/" + class))
	if len(cluster) > 107 { // "<cluster>_" + 20 hex digits ≤ 128
		cluster = cluster[:107]
	}
	return cluster + "_" + hex.EncodeToString(sum[:10])
}

// RuleName names one of the cluster's EventBridge rules within the 64 characters allowed.
func RuleName(cluster, kind string) string {
	name := "karpool-" + cluster + "-" + kind
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(cluster))
	return "karpool-" + cluster[:64-len("karpool-")-len(kind)-10] + "-" + hex.EncodeToString(sum[:4]) + "-" + kind
}
