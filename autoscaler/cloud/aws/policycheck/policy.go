// Package policycheck checks the AWS requests recorded by internal/awssim against karpool's
// least-privilege controller policy (DESIGN.md section 5): the managed policies of the
// reference CloudFormation template (shared/reference/karpenter/cloudformation.yaml), encoded
// below as a table from IAM action to the conditions a request must meet. Tests run karpool's
// AWS code against the simulator and hand srv.Calls() to Check; a request the table does not
// cover, or whose conditions do not hold, is a violation.
//
// The check is a model of IAM evaluation, not a policy engine: for each action it lists the
// statements that must all allow the request (for example CreateFleet needs the launch
// template, the tags of what it creates and iam:PassRole of the profile's role), and it learns
// resource tags by replaying the recorded requests and responses in order.
package policycheck

import (
	"encoding/json"
	"fmt"

	"github.com/karpool/karpool/internal/awssim"
)

// Params are the template's parameters and the facts its ARNs and conditions name.
type Params struct {
	ClusterName string
	Region      string
	// NodeRole is the name of the node role (KarpenterNodeRole-<cluster> in the template):
	// the only role iam:PassRole lets the controller hand to EC2.
	NodeRole string
	// InterruptionQueue is the SQS queue name; the template names it after the cluster.
	InterruptionQueue string
	// AccessKeyID, when set, limits the check to the requests signed with it (the controller's
	// identity); requests of other keys (test setup) are only replayed to learn resource tags.
	AccessKeyID string
}

// Violation is a recorded request the policy does not allow.
type Violation struct {
	Call awssim.Call
	// Statement names the policy statement whose condition failed ("" when no statement
	// covers the action).
	Statement string
	Reason    string
}

func (v Violation) String() string {
	where := "no statement of the controller policy allows it"
	if v.Statement != "" {
		where = "statement " + v.Statement
	}
	return fmt.Sprintf("%s:%s (%s): %s; input: %s", v.Call.Service, v.Call.Action, where, v.Reason, describe(v.Call.Input))
}

// rule is one statement a request of an action needs. check is nil when the statement allows
// the action without conditions (on the resources karpool uses).
type rule struct {
	statement string
	check     func(s *state, c awssim.Call) error
}

// Statement names: "<managed policy>/<Sid>" as in the reference template.
const (
	stInstanceAccess        = "NodeLifecyclePolicy/AllowScopedEC2InstanceAccessActions"
	stLaunchTemplateAccess  = "NodeLifecyclePolicy/AllowScopedEC2LaunchTemplateAccessActions"
	stInstanceActionsTagged = "NodeLifecyclePolicy/AllowScopedEC2InstanceActionsWithTags"
	stCreationTagging       = "NodeLifecyclePolicy/AllowScopedResourceCreationTagging"
	stResourceTagging       = "NodeLifecyclePolicy/AllowScopedResourceTagging"
	stDeletion              = "NodeLifecyclePolicy/AllowScopedDeletion"
	stPassRole              = "IAMIntegrationPolicy/AllowPassingInstanceRole"
	stProfileCreation       = "IAMIntegrationPolicy/AllowScopedInstanceProfileCreationActions"
	stProfileTagging        = "IAMIntegrationPolicy/AllowScopedInstanceProfileTagActions"
	stProfileActions        = "IAMIntegrationPolicy/AllowScopedInstanceProfileActions"
	stDescribeCluster       = "EKSIntegrationPolicy/AllowAPIServerEndpointDiscovery"
	stQueue                 = "InterruptionPolicy/AllowInterruptionQueueActions"
	// The template conditions its describe calls on aws:RequestedRegion. The simulator refuses
	// requests signed for another region, so every recorded request meets it.
	stRegionalRead     = "ResourceDiscoveryPolicy/AllowRegionalReadActions"
	stSSMRead          = "ResourceDiscoveryPolicy/AllowSSMReadActions"
	stPricingRead      = "ResourceDiscoveryPolicy/AllowPricingReadActions"
	stProfileList      = "ResourceDiscoveryPolicy/AllowUnscopedInstanceProfileListAction"
	stProfileRead      = "ResourceDiscoveryPolicy/AllowInstanceProfileReadActions"
	stNoPermissionNeed = "none: AWS documents that sts:GetCallerIdentity needs no permission"
)

// policy maps each IAM action the controller may call to the statements that must all allow
// it. Actions absent from the table are denied.
var policy = map[string][]rule{
	"ec2:DescribeCapacityReservations":  {{stRegionalRead, nil}},
	"ec2:DescribeImages":                {{stRegionalRead, nil}},
	"ec2:DescribeInstances":             {{stRegionalRead, nil}},
	"ec2:DescribeInstanceStatus":        {{stRegionalRead, nil}},
	"ec2:DescribeInstanceTypeOfferings": {{stRegionalRead, nil}},
	"ec2:DescribeInstanceTypes":         {{stRegionalRead, nil}},
	"ec2:DescribeLaunchTemplates":       {{stRegionalRead, nil}},
	"ec2:DescribePlacementGroups":       {{stRegionalRead, nil}},
	"ec2:DescribeSecurityGroups":        {{stRegionalRead, nil}},
	"ec2:DescribeSpotPriceHistory":      {{stRegionalRead, nil}},
	"ec2:DescribeSubnets":               {{stRegionalRead, nil}},
	"ssm:GetParameter":                  {{stSSMRead, checkSSMParameter}},
	"pricing:GetProducts":               {{stPricingRead, nil}},
	"iam:ListInstanceProfiles":          {{stProfileList, nil}},
	"iam:GetInstanceProfile":            {{stProfileRead, nil}},
	"eks:DescribeCluster":               {{stDescribeCluster, checkDescribeCluster}},
	"sqs:GetQueueUrl":                   {{stQueue, checkQueue}},
	"sqs:ReceiveMessage":                {{stQueue, checkQueue}},
	"sqs:DeleteMessage":                 {{stQueue, checkQueue}},
	"sts:GetCallerIdentity":             {{stNoPermissionNeed, nil}},
	"iam:CreateInstanceProfile":         {{stProfileCreation, checkCreateInstanceProfile}},
	"iam:TagInstanceProfile":            {{stProfileTagging, checkTagInstanceProfile}},
	"iam:AddRoleToInstanceProfile":      {{stProfileActions, checkProfileResourceTags}, {stPassRole, checkAddRolePassRole}},
	"iam:RemoveRoleFromInstanceProfile": {{stProfileActions, checkProfileResourceTags}},
	"iam:DeleteInstanceProfile":         {{stProfileActions, checkProfileResourceTags}},
	"ec2:CreateLaunchTemplate":          {{stInstanceActionsTagged, checkCreatedResourcesTagged}, {stCreationTagging, checkEveryTagSpecification}},
	"ec2:TerminateInstances":            {{stDeletion, checkTerminateResourceTags}},
	"ec2:DeleteLaunchTemplate":          {{stDeletion, checkDeleteLaunchTemplateResourceTags}},
	"ec2:CreateTags":                    {{stResourceTagging, checkCreateTags}},
	"ec2:RunInstances":                  launchRules,
	"ec2:CreateFleet":                   launchRules,
}

// launchRules: a launch touches the AMI, snapshots, subnet and security groups (allowed
// outright), uses a launch template (whose tags are conditioned), creates instances, volumes,
// network interfaces and, for CreateFleet, the fleet (which must carry the cluster's tags, and
// tagging at creation is itself ec2:CreateTags with ec2:CreateAction), and passes the instance
// profile's role.
var launchRules = []rule{
	{stInstanceAccess, nil},
	{stLaunchTemplateAccess, checkLaunchTemplateResourceTags},
	{stInstanceActionsTagged, checkCreatedResourcesTagged},
	{stCreationTagging, checkEveryTagSpecification},
	{stPassRole, checkLaunchPassRole},
}

// Check returns the recorded requests (signed with p.AccessKeyID when set) that the controller
// policy does not allow, in order.
func Check(p Params, calls []awssim.Call) []Violation {
	if p.InterruptionQueue == "" {
		p.InterruptionQueue = p.ClusterName
	}
	s := newState(p)
	var out []Violation
	for _, c := range calls {
		if p.AccessKeyID == "" || c.AccessKeyID == p.AccessKeyID {
			out = append(out, s.check(c)...)
		}
		if c.ErrorCode == "" {
			s.learn(c)
		}
	}
	return out
}

func (s *state) check(c awssim.Call) []Violation {
	action := c.Service + ":" + c.Action
	rules, ok := policy[action]
	if !ok {
		return []Violation{{Call: c, Reason: "the action " + action + " is not in the policy"}}
	}
	var out []Violation
	for _, r := range rules {
		if r.check == nil {
			continue
		}
		if err := r.check(s, c); err != nil {
			out = append(out, Violation{Call: c, Statement: r.statement, Reason: err.Error()})
		}
	}
	return out
}

// describe prints a request input as JSON without its empty fields, shortened.
func describe(in any) string {
	var s string
	var v any
	raw, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err == nil {
		raw, err = json.Marshal(compact(v))
		s = string(raw)
	}
	if err != nil {
		s = fmt.Sprintf("%+v", in)
	}
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

// compact drops nulls, empty strings, empty lists and empty objects.
func compact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e = compact(e); e == nil {
				delete(x, k)
			} else {
				x[k] = e
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		out := x[:0]
		for _, e := range x {
			if e = compact(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}
