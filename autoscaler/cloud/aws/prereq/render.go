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

// ControllerDocument is the controller's policies' statements in one document: what IAM decides
// the controller's requests against.
func (r *Resources) ControllerDocument() iampolicy.Document {
	doc := iampolicy.Document{Version: iampolicy.Version}
	for _, p := range r.ControllerPolicies {
		doc.Statement = append(doc.Statement, p.Document.Statement...)
	}
	return doc
}

// Resources is the desired state of the account for one cluster.
type Resources struct {
	Settings Settings
	// NodeRoles: the default node role and every role an EC2NodeClass names in spec.role.
	NodeRoles        []Role
	InstanceProfiles []InstanceProfile
	ControllerRole   Role
	// ControllerPolicies are the controller role's managed policies, one per concern.
	ControllerPolicies []Policy
	Queue              Queue
	Rules              []Rule
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
	Name string
	// Path is the role's IAM path, / unless spec.role names one: the role's ARN, which the
	// controller policy names, includes it.
	Path              string
	Trust             iampolicy.Document
	ManagedPolicyARNs []string
	Tags              map[string]string
}

// Policy is a customer managed policy.
type Policy struct {
	// Concern is what the policy covers (ConcernNodeLifecycle, ...).
	Concern  string
	Name     string
	Document iampolicy.Document
	Tags     map[string]string
}

// ID is the policy's logical id in a CloudFormation template, as in Karpenter's
// (KarpenterControllerNodeLifecyclePolicy).
func (p Policy) ID() string { return "KarpenterController" + p.Concern + "Policy" }

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

// Render computes the desired resources from the settings and the revision's EC2NodeClasses. It
// refuses names that are not AWS names and roles of other accounts that the settings do not allow.
func Render(in Settings, classes []awsv1.EC2NodeClass) (*Resources, error) {
	s := in.withDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	owner := map[string]string{OwnerTag: s.ClusterName}
	r := &Resources{Settings: s, ServiceLinkedRoles: []string{"spot.amazonaws.com"}}

	classes = slices.Clone(classes)
	slices.SortFunc(classes, func(a, b awsv1.EC2NodeClass) int { return strings.Compare(a.Name, b.Name) })
	roles, err := r.classRoles(s, classes, owner)
	if err != nil {
		return nil, err
	}
	profileRoles, err := s.roles("AWS settings: instance profile role (--instance-profile-role)", s.InstanceProfileRoles)
	if err != nil {
		return nil, err
	}
	if err := r.nodeRoles(s, roles, owner); err != nil {
		return nil, err
	}
	var passed []string
	for _, ref := range append(roles, profileRoles...) {
		passed = append(passed, ref.arn())
	}
	r.ControllerRole = Role{Name: controllerRoleName(s.ClusterName), Path: "/", Trust: controllerTrust(s), Tags: owner}
	for _, cd := range controllerDocuments(s, passed) {
		name := ControllerPolicyName(s.ClusterName, cd.concern)
		if n := cd.document.Chars(); n > MaxPolicyChars {
			return nil, fmt.Errorf("AWS settings: the controller's IAM policy %s would be %d characters, IAM allows %d: name fewer node roles", name, n, MaxPolicyChars)
		}
		r.ControllerPolicies = append(r.ControllerPolicies, Policy{Concern: cd.concern, Name: name, Document: cd.document, Tags: owner})
		r.ControllerRole.ManagedPolicyARNs = append(r.ControllerRole.ManagedPolicyARNs, s.arn("iam", "", s.AccountID, "policy/"+name))
	}
	if s.PodIdentity {
		ref := roleRef{partition: s.Partition, account: s.AccountID, path: "/", name: r.ControllerRole.Name}
		r.PodIdentity = &PodIdentityAssociation{Namespace: s.Namespace, ServiceAccount: s.ServiceAccount, RoleARN: ref.arn()}
	}

	r.Queue = Queue{Name: s.InterruptionQueue, RetentionSeconds: 300, ManagedSSE: true, Policy: queuePolicy(s), Tags: owner}
	for _, ir := range interruptionRules {
		r.Rules = append(r.Rules, Rule{Name: RuleName(s.ClusterName, ir.kind), Kind: ir.kind,
			Pattern:  fmt.Sprintf(`{"source":[%q],"detail-type":[%q]}`, ir.source, ir.detailType),
			TargetID: "karpool-interruption-queue", TargetQueue: s.QueueARN(), Tags: owner})
	}
	r.DiscoveryTags, err = discoveryTags(s, classes)
	return r, err
}

// classRoles reads the default node role and the classes' spec.role, gives every class with a
// role of this account its instance profile, and warns of what karpool cannot manage.
func (r *Resources) classRoles(s Settings, classes []awsv1.EC2NodeClass, owner map[string]string) ([]roleRef, error) {
	def, err := s.role("AWS settings: node role (--node-role, PoolSync spec.aws.nodeRole; default KarpenterNodeRole-<cluster>)", s.NodeRole)
	if err != nil {
		return nil, err
	}
	roles := []roleRef{def}
	for _, nc := range classes {
		if nc.Spec.Role == "" {
			r.Warnings = append(r.Warnings, profileWarnings(s, nc)...)
			continue
		}
		ref, err := s.role("EC2NodeClass "+nc.Name+" spec.role", nc.Spec.Role)
		if err != nil {
			return nil, err
		}
		roles = append(roles, ref)
		if ref.account != s.AccountID {
			r.Warnings = append(r.Warnings, fmt.Sprintf("EC2NodeClass %s spec.role %s is a role of account %s (allowed): karpool creates neither it nor an instance profile for it, and Karpenter adds a class's role to its instance profile by name, in account %s", nc.Name, ref.arn(), ref.account, s.AccountID))
			continue
		}
		r.InstanceProfiles = append(r.InstanceProfiles, InstanceProfile{
			Name: InstanceProfileName(s.ClusterName, s.Region, nc.Name), Role: ref.name, NodeClass: nc.Name,
			Tags: merged(owner, InstanceProfileTags(s.ClusterName, s.Region, nc.Name, nc.Spec.Tags)),
		})
	}
	return roles, nil
}

// profileWarnings are the warnings about a class with spec.instanceProfile.
func profileWarnings(s Settings, nc awsv1.EC2NodeClass) []string {
	if nc.Spec.InstanceProfile == nil {
		return nil
	}
	if w, bad := instanceProfileWarning(nc.Name, *nc.Spec.InstanceProfile); bad {
		return []string{w}
	}
	if len(s.InstanceProfileRoles) == 0 {
		return []string{fmt.Sprintf("EC2NodeClass %s uses instance profile %q, whose role karpool cannot see: name that role in the settings (instance profile roles) so that the controller may pass it", nc.Name, *nc.Spec.InstanceProfile)}
	}
	return nil
}

// nodeRoles makes the roles of this account (the others are not karpool's to make) and gives
// every node role access to the cluster.
func (r *Resources) nodeRoles(s Settings, roles []roleRef, owner map[string]string) error {
	roles = slices.Clone(roles)
	slices.SortFunc(roles, func(a, b roleRef) int { return strings.Compare(a.arn(), b.arn()) })
	roles = slices.CompactFunc(roles, func(a, b roleRef) bool { return a.arn() == b.arn() })
	byName := map[string]roleRef{}
	for _, ref := range roles {
		if ref.account == s.AccountID {
			if other, ok := byName[ref.name]; ok {
				return fmt.Errorf("%s names role %s at path %s, and %s at path %s, but a role has one path: write the same path in both", other.where, ref.name, other.path, ref.where, ref.path)
			}
			byName[ref.name] = ref
			r.NodeRoles = append(r.NodeRoles, Role{Name: ref.name, Path: ref.path, Trust: serviceTrust("ec2." + s.urlSuffix()), ManagedPolicyARNs: managed(s, nodePolicies), Tags: owner})
		}
		if s.NodeAccess == AWSAuth {
			r.NodeAccess = append(r.NodeAccess, NodeAccess{Mode: AWSAuth, RoleARN: ref.arn(), Username: "system:node:{{EC2PrivateDNSName}}", Groups: []string{"system:bootstrappers", "system:nodes"}})
		} else {
			r.NodeAccess = append(r.NodeAccess, NodeAccess{Mode: AccessEntry, RoleARN: ref.arn(), EntryType: "EC2_LINUX"})
		}
	}
	return nil
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
func discoveryTags(s Settings, classes []awsv1.EC2NodeClass) ([]ResourceTag, error) {
	ids := slices.Clone(s.Subnets)
	ids = append(ids, s.SecurityGroups...)
	for _, nc := range classes {
		var subnets, groups []string
		for _, t := range nc.Spec.SubnetSelectorTerms {
			if t.ID != "" {
				subnets = append(subnets, t.ID)
			}
		}
		for _, t := range nc.Spec.SecurityGroupSelectorTerms {
			if t.ID != "" {
				groups = append(groups, t.ID)
			}
		}
		if err := checkIDs("EC2NodeClass "+nc.Name+" spec.subnetSelectorTerms id", "EC2NodeClass "+nc.Name+" spec.securityGroupSelectorTerms id", subnets, groups); err != nil {
			return nil, err
		}
		ids = append(append(ids, subnets...), groups...)
	}
	slices.Sort(ids)
	var out []ResourceTag
	for _, id := range slices.Compact(ids) {
		out = append(out, ResourceTag{ResourceID: id, Key: DiscoveryTag, Value: s.ClusterName})
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
