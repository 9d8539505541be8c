package policycheck

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/karpool/karpool/testbed/awssim"
)

var params = Params{ClusterName: "c1", Region: "us-east-1", NodeRole: "KarpenterNodeRole-c1", AccessKeyID: "CONTROLLER"}

func ec2Tags(kv ...string) []ec2types.Tag {
	var out []ec2types.Tag
	for i := 0; i < len(kv); i += 2 {
		out = append(out, ec2types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

func iamTags(kv ...string) []iamtypes.Tag {
	var out []iamtypes.Tag
	for i := 0; i < len(kv); i += 2 {
		out = append(out, iamtypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

var (
	clusterTags = []string{"kubernetes.io/cluster/c1", "owned", "eks:eks-cluster-name", "c1", "karpenter.sh/nodepool", "default"}
	profileTags = []string{"kubernetes.io/cluster/c1", "owned", "eks:eks-cluster-name", "c1", "topology.kubernetes.io/region", "us-east-1",
		"karpenter.k8s.aws/ec2nodeclass", "default"}
)

func call(service, action string, in, out any) awssim.Call {
	return awssim.Call{Service: service, Action: action, AccessKeyID: "CONTROLLER", Input: in, Output: out}
}

// launchSequence is a compliant launch: profile, template, fleet, termination.
func launchSequence() []awssim.Call {
	lt := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("karpool/x"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("c1_profile")},
			TagSpecifications:  []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: "network-interface", Tags: ec2Tags(clusterTags...)}}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "launch-template", Tags: ec2Tags(clusterTags...)}}}
	tags := append(clusterTags, "karpenter.sh/nodeclaim", "default-1")
	fleet := &ec2.CreateFleetInput{
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String("lt-1")}}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "instance", Tags: ec2Tags(tags...)}, {ResourceType: "volume", Tags: ec2Tags(tags...)},
			{ResourceType: "fleet", Tags: ec2Tags(tags...)}}}
	return []awssim.Call{
		call("iam", "CreateInstanceProfile", &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("c1_profile"), Tags: iamTags(profileTags...)}, &iam.CreateInstanceProfileOutput{}),
		call("iam", "AddRoleToInstanceProfile", &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("c1_profile"), RoleName: aws.String("KarpenterNodeRole-c1")}, &iam.AddRoleToInstanceProfileOutput{}),
		call("ssm", "GetParameter", &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id")}, &ssm.GetParameterOutput{}),
		call("ec2", "CreateLaunchTemplate", lt, &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: aws.String("lt-1")}}),
		call("ec2", "CreateFleet", fleet, &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{InstanceIds: []string{"i-1"}}}}),
		call("ec2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-1"}}, &ec2.TerminateInstancesOutput{}),
		call("ec2", "DeleteLaunchTemplate", &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String("lt-1")}, &ec2.DeleteLaunchTemplateOutput{}),
	}
}

func TestCompliantLaunchPasses(t *testing.T) {
	if v := Check(params, launchSequence()); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

// Each mutation breaks one condition of the policy; Check must name the call, the denied
// authorization and the condition.
func TestViolations(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func([]awssim.Call) []awssim.Call
		action string
		reason string // in the violation's text
	}{
		"action outside the policy": {func(cs []awssim.Call) []awssim.Call {
			return append(cs, call("ec2", "DescribeAvailabilityZones", &ec2.DescribeAvailabilityZonesInput{}, &ec2.DescribeAvailabilityZonesOutput{}))
		}, "DescribeAvailabilityZones", "no statement allows ec2:DescribeAvailabilityZones on *"},
		"fleet not tagged": {func(cs []awssim.Call) []awssim.Call {
			in := cs[4].Input.(*ec2.CreateFleetInput)
			in.TagSpecifications = in.TagSpecifications[:2]
			return cs
		}, "CreateFleet", "ec2:CreateFleet on arn:aws:ec2:us-east-1:111122223333:fleet/new is denied: statement CreateOnlyClusterTaggedResources: StringEquals aws:RequestTag/eks:eks-cluster-name [c1]: the request has no"},
		"launch template without nodepool tag": {func(cs []awssim.Call) []awssim.Call {
			in := cs[3].Input.(*ec2.CreateLaunchTemplateInput)
			in.TagSpecifications[0].Tags = ec2Tags("kubernetes.io/cluster/c1", "owned", "eks:eks-cluster-name", "c1")
			return cs
		}, "CreateLaunchTemplate", "StringLike aws:RequestTag/karpenter.sh/nodepool [*]: the request has no aws:RequestTag/karpenter.sh/nodepool"},
		"role other than the node role": {func(cs []awssim.Call) []awssim.Call {
			cs[1].Input.(*iam.AddRoleToInstanceProfileInput).RoleName = aws.String("Admin")
			return cs
		}, "AddRoleToInstanceProfile", "iam:PassRole on arn:aws:iam::111122223333:role/Admin is denied: no statement allows"},
		"launch passes another role": {func(cs []awssim.Call) []awssim.Call {
			setup := call("iam", "RemoveRoleFromInstanceProfile", &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("c1_profile"), RoleName: aws.String("KarpenterNodeRole-c1")}, &iam.RemoveRoleFromInstanceProfileOutput{})
			add := call("iam", "AddRoleToInstanceProfile", &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("c1_profile"), RoleName: aws.String("Admin")}, &iam.AddRoleToInstanceProfileOutput{})
			setup.AccessKeyID, add.AccessKeyID = "ADMIN", "ADMIN"
			return append(cs[:4], append([]awssim.Call{setup, add}, cs[4:]...)...)
		}, "CreateFleet", "iam:PassRole on arn:aws:iam::111122223333:role/Admin is denied"},
		"terminate an instance not launched by a pool": {func(cs []awssim.Call) []awssim.Call {
			out := &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: []ec2types.Instance{{InstanceId: aws.String("i-9"),
				Tags: ec2Tags("kubernetes.io/cluster/c1", "owned")}}}}}
			return append(cs, call("ec2", "DescribeInstances", &ec2.DescribeInstancesInput{}, out),
				call("ec2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-9"}}, &ec2.TerminateInstancesOutput{}))
		}, "TerminateInstances", "instance/i-9 is denied: statement DeleteClusterInstancesAndTemplates: StringLike aws:ResourceTag/karpenter.sh/nodepool [*]: the request has no"},
		"terminate an unknown instance": {func(cs []awssim.Call) []awssim.Call {
			return append(cs, call("ec2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-7"}}, &ec2.TerminateInstancesOutput{}))
		}, "TerminateInstances", "i-7: no recorded request launched or described it, so its tags are unknown"},
		"profile without region tag": {func(cs []awssim.Call) []awssim.Call {
			cs[0].Input.(*iam.CreateInstanceProfileInput).Tags = iamTags("kubernetes.io/cluster/c1", "owned", "eks:eks-cluster-name", "c1",
				"karpenter.k8s.aws/ec2nodeclass", "default")
			return cs
		}, "CreateInstanceProfile", "statement CreateClusterInstanceProfiles: StringEquals aws:RequestTag/topology.kubernetes.io/region [us-east-1]: the request has no"},
		"private SSM parameter": {func(cs []awssim.Call) []awssim.Call {
			cs[2].Input.(*ssm.GetParameterInput).Name = aws.String("/team/ami")
			return cs
		}, "GetParameter", "ssm:GetParameter on arn:aws:ssm:us-east-1::parameter/team/ami is denied"},
		"tagging a running instance with another key": {func(cs []awssim.Call) []awssim.Call {
			return append(cs[:5], call("ec2", "CreateTags", &ec2.CreateTagsInput{Resources: []string{"i-1"}, Tags: ec2Tags("team", "x")}, &ec2.CreateTagsOutput{}))
		}, "CreateTags", "ForAllValues:StringEquals aws:TagKeys [eks:eks-cluster-name karpenter.sh/nodeclaim Name]: the request has [team]"},
	} {
		t.Run(name, func(t *testing.T) {
			// A violating request still ran in the simulator, so later requests that depend
			// on what it created may violate too; the first violation is the one caused here.
			vs := Check(params, tc.mutate(launchSequence()))
			if len(vs) == 0 {
				t.Fatal("no violation")
			}
			v := vs[0]
			if v.Call.Action != tc.action || !strings.Contains(v.String(), tc.reason) || !strings.Contains(v.String(), "; input: ") {
				t.Errorf("violation %s, want action %s and %q", v, tc.action, tc.reason)
			}
		})
	}
}
