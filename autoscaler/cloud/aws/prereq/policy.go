package prereq

import (
	"slices"

	"github.com/karpool/karpool/internal/iampolicy"
)

// Tag keys the controller policy's conditions read, as the provider writes them.
const (
	TagNodePool  = "karpenter.sh/nodepool"
	TagNodeClaim = "karpenter.sh/nodeclaim"
	TagNodeClass = "karpenter.k8s.aws/ec2nodeclass"
	TagCluster   = "eks:eks-cluster-name"
	TagRegion    = "topology.kubernetes.io/region"
)

// ClusterOwnedTag is kubernetes.io/cluster/<cluster>, valued "owned" on what the cluster owns.
func ClusterOwnedTag(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// The only actions the controller policy allows on every resource ("*"): they read, and AWS
// offers no narrower resource for them. The EC2 ones are limited to the cluster's region; prices
// are served from a few regions only, and IAM is global.
// Only what karpool calls: Karpenter's DescribeInstanceStatus (health checks),
// DescribePlacementGroups (placement groups) and iam:ListInstanceProfiles (its instance profile
// garbage collection) follow features karpool lacks.
var (
	regionalReads = []string{
		"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances",
		"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
		"ec2:DescribeLaunchTemplates", "ec2:DescribeSecurityGroups",
		"ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
	}
	globalReads = []string{"pricing:GetProducts"}
)

// The concerns the controller's permissions are split by, as Karpenter splits its policy since
// v1.9: one managed policy each, so that none reaches IAM's size limit (MaxPolicyChars).
const (
	ConcernNodeLifecycle     = "NodeLifecycle"
	ConcernIAMIntegration    = "IAMIntegration"
	ConcernEKSIntegration    = "EKSIntegration"
	ConcernInterruption      = "Interruption"
	ConcernResourceDiscovery = "ResourceDiscovery"
)

// MaxPolicyChars is IAM's limit on a managed policy document, whitespace not counted.
const MaxPolicyChars = 6144

// ControllerPolicyName is the name of the controller's managed policy for a concern
// (Karpenter's names), the cluster's name cut to fit IAM's 128 characters.
func ControllerPolicyName(cluster, concern string) string {
	prefix := "KarpenterController" + concern + "Policy-"
	return prefix + cluster[:min(len(cluster), 128-len(prefix))]
}

// concernDocument is one of the controller's policies.
type concernDocument struct {
	concern  string
	document iampolicy.Document
}

// ControllerPolicy is the controller's least-privilege policy, all its statements in one
// document (IAM decides a request against the role's policies together, so deciding against
// their union is the same): it may launch only with
// templates and into resources tagged for this cluster and a NodePool, tag and terminate only
// such instances, pass only the node roles to EC2, manage only instance profiles tagged for this
// cluster, region and an EC2NodeClass, describe only this cluster and read only its
// interruption queue. nodeRoles are the roles nodes launch with, read as spec.role is. The
// settings' defaults apply; the controller's identity plays no part.
//
// Render refuses settings and roles that are not AWS names, saying why. ControllerPolicy has no
// error to return, so it fails closed: from such settings it renders a policy that allows
// nothing, and such roles it leaves out.
func ControllerPolicy(s Settings, nodeRoles []string) iampolicy.Document {
	s = s.withDefaults()
	if s.validateScope() != nil {
		return iampolicy.Document{Version: iampolicy.Version, Statement: []iampolicy.Statement{}}
	}
	var passed []string
	for _, name := range nodeRoles {
		if ref, err := s.role("node role", name); err == nil {
			passed = append(passed, ref.arn())
		}
	}
	doc := iampolicy.Document{Version: iampolicy.Version}
	for _, cd := range controllerDocuments(s, passed) {
		doc.Statement = append(doc.Statement, cd.document.Statement...)
	}
	return doc
}

// controllerDocuments are the controller's policies for valid settings, passing the roles of
// the ARNs given, one per concern.
func controllerDocuments(s Settings, passed []string) []concernDocument {
	owned := ClusterOwnedTag(s.ClusterName)
	ec2 := func(kinds ...string) iampolicy.Strings {
		var out iampolicy.Strings
		for _, k := range kinds {
			account := "*"
			if k == "image" || k == "snapshot" {
				account = "" // public and shared images have no account in their ARN
			}
			out = append(out, s.arn("ec2", s.Region, account, k+"/*"))
		}
		return out
	}
	created := []string{"fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"}
	profiles := iampolicy.Strings{s.arn("iam", "", s.AccountID, "instance-profile/*")}
	passed = slices.Clone(passed)
	slices.Sort(passed)
	passed = slices.Compact(passed)
	ownedResource := map[string]iampolicy.Strings{"aws:ResourceTag/" + owned: {"owned"}}
	nodePoolResource := map[string]iampolicy.Strings{"aws:ResourceTag/" + TagNodePool: {"*"}}
	requestTags := map[string]iampolicy.Strings{"aws:RequestTag/" + owned: {"owned"}, "aws:RequestTag/" + TagCluster: {s.ClusterName}}
	profileResource := map[string]iampolicy.Strings{"aws:ResourceTag/" + owned: {"owned"}, "aws:ResourceTag/" + TagRegion: {s.Region}}
	profileRequest := map[string]iampolicy.Strings{"aws:RequestTag/" + owned: {"owned"}, "aws:RequestTag/" + TagCluster: {s.ClusterName}, "aws:RequestTag/" + TagRegion: {s.Region}}

	lifecycle := []iampolicy.Statement{
		{Sid: "LaunchIntoAnySubnetWithAnyImage", Effect: iampolicy.Allow,
			Action:   iampolicy.Strings{"ec2:RunInstances", "ec2:CreateFleet"},
			Resource: ec2("image", "snapshot", "security-group", "subnet", "capacity-reservation")},
		{Sid: "LaunchWithClusterTemplates", Effect: iampolicy.Allow,
			Action:    iampolicy.Strings{"ec2:RunInstances", "ec2:CreateFleet"},
			Resource:  ec2("launch-template"),
			Condition: iampolicy.Conditions{"StringEquals": ownedResource, "StringLike": nodePoolResource}},
		{Sid: "CreateOnlyClusterTaggedResources", Effect: iampolicy.Allow,
			Action:    iampolicy.Strings{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
			Resource:  ec2(created...),
			Condition: iampolicy.Conditions{"StringEquals": requestTags, "StringLike": {"aws:RequestTag/" + TagNodePool: {"*"}}}},
		{Sid: "TagWhileCreating", Effect: iampolicy.Allow,
			Action:   iampolicy.Strings{"ec2:CreateTags"},
			Resource: ec2(created...),
			Condition: iampolicy.Conditions{
				"StringEquals": merge(requestTags, map[string]iampolicy.Strings{"ec2:CreateAction": {"RunInstances", "CreateFleet", "CreateLaunchTemplate"}}),
				"StringLike":   {"aws:RequestTag/" + TagNodePool: {"*"}}}},
		{Sid: "TagClusterInstances", Effect: iampolicy.Allow,
			Action:   iampolicy.Strings{"ec2:CreateTags"},
			Resource: ec2("instance"),
			Condition: iampolicy.Conditions{
				"StringEquals":              ownedResource,
				"StringLike":                nodePoolResource,
				"StringEqualsIfExists":      {"aws:RequestTag/" + TagCluster: {s.ClusterName}},
				"ForAllValues:StringEquals": {"aws:TagKeys": {TagCluster, TagNodeClaim, "Name"}}}},
		{Sid: "DeleteClusterInstancesAndTemplates", Effect: iampolicy.Allow,
			Action:    iampolicy.Strings{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
			Resource:  ec2("instance", "launch-template"),
			Condition: iampolicy.Conditions{"StringEquals": ownedResource, "StringLike": nodePoolResource}},
	}
	iamIntegration := []iampolicy.Statement{
		{Sid: "PassNodeRolesToEC2", Effect: iampolicy.Allow,
			Action:    iampolicy.Strings{"iam:PassRole"},
			Resource:  passed,
			Condition: iampolicy.Conditions{"StringEquals": {"iam:PassedToService": {"ec2." + s.urlSuffix()}}}},
		{Sid: "CreateClusterInstanceProfiles", Effect: iampolicy.Allow,
			Action:    iampolicy.Strings{"iam:CreateInstanceProfile"},
			Resource:  profiles,
			Condition: iampolicy.Conditions{"StringEquals": profileRequest, "StringLike": {"aws:RequestTag/" + TagNodeClass: {"*"}}}},
		{Sid: "TagClusterInstanceProfiles", Effect: iampolicy.Allow,
			Action:   iampolicy.Strings{"iam:TagInstanceProfile"},
			Resource: profiles,
			Condition: iampolicy.Conditions{
				"StringEquals": merge(profileResource, profileRequest),
				"StringLike":   {"aws:ResourceTag/" + TagNodeClass: {"*"}, "aws:RequestTag/" + TagNodeClass: {"*"}}}},
		{Sid: "ChangeClusterInstanceProfiles", Effect: iampolicy.Allow,
			Action:    iampolicy.Strings{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"},
			Resource:  profiles,
			Condition: iampolicy.Conditions{"StringEquals": profileResource, "StringLike": {"aws:ResourceTag/" + TagNodeClass: {"*"}}}},
	}
	// No roles to pass: IAM refuses a statement without resources, and reading one as a
	// statement on every resource would pass any role.
	iamIntegration = slices.DeleteFunc(iamIntegration, func(st iampolicy.Statement) bool { return len(st.Resource) == 0 })
	discovery := []iampolicy.Statement{
		{Sid: "ReadInstanceProfiles", Effect: iampolicy.Allow,
			Action: iampolicy.Strings{"iam:GetInstanceProfile"}, Resource: profiles},
		{Sid: "ReadAMIParameters", Effect: iampolicy.Allow,
			Action:   iampolicy.Strings{"ssm:GetParameter"},
			Resource: iampolicy.Strings{s.arn("ssm", s.Region, "", "parameter/aws/service/*")}},
		{Sid: "ReadRegion", Effect: iampolicy.Allow,
			Action: regionalReads, Resource: iampolicy.Strings{"*"},
			Condition: iampolicy.Conditions{"StringEquals": {"aws:RequestedRegion": {s.Region}}}},
		{Sid: "ReadPrices", Effect: iampolicy.Allow,
			Action: globalReads, Resource: iampolicy.Strings{"*"}},
	}
	doc := func(concern string, sts ...iampolicy.Statement) concernDocument {
		return concernDocument{concern, iampolicy.Document{Version: iampolicy.Version, Statement: sts}}
	}
	return []concernDocument{
		doc(ConcernNodeLifecycle, lifecycle...),
		doc(ConcernIAMIntegration, iamIntegration...),
		doc(ConcernEKSIntegration, iampolicy.Statement{Sid: "DescribeThisCluster", Effect: iampolicy.Allow,
			Action: iampolicy.Strings{"eks:DescribeCluster"}, Resource: iampolicy.Strings{s.ClusterARN()}}),
		doc(ConcernInterruption, iampolicy.Statement{Sid: "ConsumeInterruptionQueue", Effect: iampolicy.Allow,
			Action:   iampolicy.Strings{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"},
			Resource: iampolicy.Strings{s.QueueARN()}}),
		doc(ConcernResourceDiscovery, discovery...),
	}
}

// merge returns the union of condition key sets.
func merge(sets ...map[string]iampolicy.Strings) map[string]iampolicy.Strings {
	out := map[string]iampolicy.Strings{}
	for _, m := range sets {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
