package prereq

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/iampolicy"
)

// Resources is the desired state of the account for one cluster.
type Resources struct {
	Settings Settings
	// NodeRoles: the default node role and every role an EC2NodeClass names in spec.role.
	NodeRoles        []Role
	InstanceProfiles []InstanceProfile
	ControllerRole   Role
	ControllerPolicy Policy
	Queue            Queue
	Rules            []Rule
	// DiscoveryTags are added to subnets and security groups karpool does not own.
	DiscoveryTags []ResourceTag
	// NodeAccess lets nodes of the node roles join the cluster.
	NodeAccess []NodeAccess
	// PodIdentity associates the controller's service account with its role (Pod Identity only).
	PodIdentity        *PodIdentityAssociation
	ServiceLinkedRoles []string
	// Warnings are things the renderer could not make right on its own.
	Warnings []string
}

// Role is an IAM role with managed policies attached.
type Role struct {
	Name              string
	Trust             iampolicy.Document
	ManagedPolicyARNs []string
	Tags              map[string]string
}

// Policy is a customer managed policy.
type Policy struct {
	Name     string
	Document iampolicy.Document
	Tags     map[string]string
}

// InstanceProfile holds one role, for an EC2NodeClass with spec.role.
type InstanceProfile struct {
	Name, Role, NodeClass string
	Tags                  map[string]string
}

// Queue is the interruption queue.
type Queue struct {
	Name string
	// RetentionSeconds: interruption notices are worth nothing after a few minutes.
	RetentionSeconds int
	ManagedSSE       bool
	Policy           iampolicy.Document
	Tags             map[string]string
}

// Rule is an EventBridge rule with the queue as its one target.
type Rule struct {
	Name, Kind  string
	Pattern     string // JSON event pattern
	TargetID    string
	TargetQueue string // queue ARN
	Tags        map[string]string
}

// ResourceTag is one tag on an EC2 resource (subnet or security group) by ID.
type ResourceTag struct {
	ResourceID, Key, Value string
}

// NodeAccess is an EKS access entry, or an aws-auth mapRoles entry, for a node role.
type NodeAccess struct {
	Mode      string // AccessEntry or AWSAuth
	RoleARN   string
	Username  string   // aws-auth only
	Groups    []string // aws-auth only
	EntryType string   // access entry only: EC2_LINUX
}

// PodIdentityAssociation binds a service account to a role.
type PodIdentityAssociation struct {
	Namespace, ServiceAccount, RoleARN string
}

// The node role's AWS managed policies: join the cluster, run the VPC CNI, pull images, and
// be reachable through Systems Manager (as the seeds and Karpenter's template attach them).
var nodePolicies = []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"}

// interruptionRules are the events the controller acts on, by rule kind.
var interruptionRules = []struct{ kind, source, detailType string }{
	{"scheduled-change", "aws.health", "AWS Health Event"},
	{"spot-interruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"},
	{"rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"},
	{"instance-state-change", "aws.ec2", "EC2 Instance State-change Notification"},
}

// Render computes the desired resources from the settings and the revision's EC2NodeClasses.
func Render(in Settings, classes []awsv1.EC2NodeClass) (*Resources, error) {
	s := in.withDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	owner := map[string]string{OwnerTag: s.ClusterName}
	r := &Resources{Settings: s, ServiceLinkedRoles: []string{"spot.amazonaws.com"}}

	roles := []string{s.NodeRole}
	classes = slices.Clone(classes)
	slices.SortFunc(classes, func(a, b awsv1.EC2NodeClass) int { return strings.Compare(a.Name, b.Name) })
	for _, nc := range classes {
		if nc.Spec.Role == "" {
			if nc.Spec.InstanceProfile != nil && len(s.InstanceProfileRoles) == 0 {
				r.Warnings = append(r.Warnings, fmt.Sprintf("EC2NodeClass %s uses instance profile %q, whose role karpool cannot see: name that role in the settings (instance profile roles) so that the controller may pass it", nc.Name, *nc.Spec.InstanceProfile))
			}
			continue
		}
		roles = append(roles, nc.Spec.Role)
		r.InstanceProfiles = append(r.InstanceProfiles, InstanceProfile{
			Name: InstanceProfileName(s.ClusterName, s.Region, nc.Name), Role: roleName(nc.Spec.Role), NodeClass: nc.Name,
			Tags: merged(owner, InstanceProfileTags(s.ClusterName, s.Region, nc.Name, nc.Spec.Tags)),
		})
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)
	for _, name := range roles {
		r.NodeRoles = append(r.NodeRoles, Role{Name: roleName(name), Trust: serviceTrust("ec2." + s.urlSuffix()), ManagedPolicyARNs: managed(s, nodePolicies), Tags: owner})
		arn := s.RoleARN(name)
		if s.NodeAccess == AWSAuth {
			r.NodeAccess = append(r.NodeAccess, NodeAccess{Mode: AWSAuth, RoleARN: arn, Username: "system:node:{{EC2PrivateDNSName}}", Groups: []string{"system:bootstrappers", "system:nodes"}})
		} else {
			r.NodeAccess = append(r.NodeAccess, NodeAccess{Mode: AccessEntry, RoleARN: arn, EntryType: "EC2_LINUX"})
		}
	}

	r.ControllerPolicy = Policy{Name: "KarpenterControllerPolicy-" + s.ClusterName, Document: ControllerPolicy(s, append(roles, s.InstanceProfileRoles...)), Tags: owner}
	r.ControllerRole = Role{Name: controllerRoleName(s.ClusterName), Trust: controllerTrust(s),
		ManagedPolicyARNs: []string{s.arn("iam", "", s.AccountID, "policy/"+r.ControllerPolicy.Name)}, Tags: owner}
	if s.PodIdentity {
		r.PodIdentity = &PodIdentityAssociation{Namespace: s.Namespace, ServiceAccount: s.ServiceAccount, RoleARN: s.RoleARN(r.ControllerRole.Name)}
	}

	r.Queue = Queue{Name: s.InterruptionQueue, RetentionSeconds: 300, ManagedSSE: true, Policy: queuePolicy(s), Tags: owner}
	for _, ir := range interruptionRules {
		r.Rules = append(r.Rules, Rule{Name: RuleName(s.ClusterName, ir.kind), Kind: ir.kind,
			Pattern:  fmt.Sprintf(`{"source":[%q],"detail-type":[%q]}`, ir.source, ir.detailType),
			TargetID: "karpool-interruption-queue", TargetQueue: s.QueueARN(), Tags: owner})
	}
	r.DiscoveryTags = discoveryTags(s, classes)
	return r, nil
}

// InstanceProfileTags are a managed profile's tags: the class's own, then those the controller
// policy's conditions require.
func InstanceProfileTags(cluster, region, class string, classTags map[string]string) map[string]string {
	return merged(classTags, map[string]string{ClusterOwnedTag(cluster): "owned", TagCluster: cluster, TagRegion: region, TagNodeClass: class})
}

// controllerRoleName follows the seeds' <cluster>-karpenter, cut to IAM's 64 characters.
func controllerRoleName(cluster string) string {
	if len(cluster) > 64-len("-karpenter") {
		cluster = cluster[:64-len("-karpenter")]
	}
	return cluster + "-karpenter"
}

// roleName strips an IAM path ("path/to/Role" → "Role").
func roleName(role string) string { return role[strings.LastIndex(role, "/")+1:] }

func managed(s Settings, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, s.arn("iam", "", "aws", "policy/"+n))
	}
	return out
}

func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// serviceTrust lets an AWS service assume the role.
func serviceTrust(service string) iampolicy.Document {
	return iampolicy.Document{Version: iampolicy.Version, Statement: []iampolicy.Statement{{
		Effect: iampolicy.Allow, Principal: &iampolicy.Principal{Service: iampolicy.Strings{service}}, Action: iampolicy.Strings{"sts:AssumeRole"}}}}
}

// controllerTrust lets only the controller's service account assume the controller role:
// through the cluster's OIDC provider (IRSA), or through EKS Pod Identity.
func controllerTrust(s Settings) iampolicy.Document {
	if s.PodIdentity {
		return iampolicy.Document{Version: iampolicy.Version, Statement: []iampolicy.Statement{{
			Effect: iampolicy.Allow, Principal: &iampolicy.Principal{Service: iampolicy.Strings{"pods.eks." + s.urlSuffix()}},
			Action: iampolicy.Strings{"sts:AssumeRole", "sts:TagSession"}}}}
	}
	issuer := strings.TrimPrefix(s.OIDCIssuer, "https://")
	if u, err := url.Parse(s.OIDCIssuer); err == nil && u.Host != "" {
		issuer = u.Host + strings.TrimSuffix(u.Path, "/")
	}
	return iampolicy.Document{Version: iampolicy.Version, Statement: []iampolicy.Statement{{
		Effect:    iampolicy.Allow,
		Principal: &iampolicy.Principal{Federated: iampolicy.Strings{s.arn("iam", "", s.AccountID, "oidc-provider/"+issuer)}},
		Action:    iampolicy.Strings{"sts:AssumeRoleWithWebIdentity"},
		Condition: iampolicy.Conditions{"StringEquals": {
			issuer + ":aud": {"sts.amazonaws.com"},
			issuer + ":sub": {"system:serviceaccount:" + s.Namespace + ":" + s.ServiceAccount},
		}},
	}}}
}

// queuePolicy lets EventBridge (and SQS itself) send to the queue, and refuses anything over
// plain HTTP.
func queuePolicy(s Settings) iampolicy.Document {
	arn := iampolicy.Strings{s.QueueARN()}
	return iampolicy.Document{Version: iampolicy.Version, ID: "KarpoolInterruptionQueue", Statement: []iampolicy.Statement{
		{Sid: "EventsSendInterruptions", Effect: iampolicy.Allow,
			Principal: &iampolicy.Principal{Service: iampolicy.Strings{"events." + s.urlSuffix(), "sqs." + s.urlSuffix()}},
			Action:    iampolicy.Strings{"sqs:SendMessage"}, Resource: arn},
		{Sid: "DenyHTTP", Effect: iampolicy.Deny, Principal: &iampolicy.Principal{Anyone: true},
			Action: iampolicy.Strings{"sqs:*"}, Resource: arn,
			Condition: iampolicy.Conditions{"Bool": {"aws:SecureTransport": {"false"}}}},
	}}
}

// discoveryTags tags the subnets and security groups the settings name or a class selects by
// ID. Those a class selects by tag carry their tags already, or the class selects nothing.
func discoveryTags(s Settings, classes []awsv1.EC2NodeClass) []ResourceTag {
	ids := slices.Clone(s.Subnets)
	ids = append(ids, s.SecurityGroups...)
	for _, nc := range classes {
		for _, t := range nc.Spec.SubnetSelectorTerms {
			if t.ID != "" {
				ids = append(ids, t.ID)
			}
		}
		for _, t := range nc.Spec.SecurityGroupSelectorTerms {
			if t.ID != "" {
				ids = append(ids, t.ID)
			}
		}
	}
	slices.Sort(ids)
	var out []ResourceTag
	for _, id := range slices.Compact(ids) {
		out = append(out, ResourceTag{ResourceID: id, Key: DiscoveryTag, Value: s.ClusterName})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
