package policycheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/karpool/karpool/internal/iampolicy"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/must"
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

// withoutReservations is the controller policy without the capacity-reservation resource of
// its launch statement.
func withoutReservations(p Params) iampolicy.Document {
	doc := ControllerPolicy(p)
	for i, st := range doc.Statement {
		var kept iampolicy.Strings
		for _, r := range st.Resource {
			if !strings.Contains(r, ":capacity-reservation/") {
				kept = append(kept, r)
			}
		}
		doc.Statement[i].Resource = kept
	}
	return doc
}

// reservedSequence is launchSequence with the template targeting a capacity reservation (as
// Karpenter writes it for reserved capacity) that DescribeCapacityReservations showed, owned by
// owner.
func reservedSequence(owner string) []awssim.Call {
	cs := launchSequence()
	lt := cs[3].Input.(*ec2.CreateLaunchTemplateInput)
	lt.LaunchTemplateData.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
		CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
		CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-00000000000000001")}}
	describe := call("ec2", "DescribeCapacityReservations", &ec2.DescribeCapacityReservationsInput{},
		&ec2.DescribeCapacityReservationsOutput{CapacityReservations: []ec2types.CapacityReservation{{
			CapacityReservationId: aws.String("cr-00000000000000001"), OwnerId: aws.String(owner)}}})
	return append(cs[:4], append([]awssim.Call{describe}, cs[4:]...)...)
}

func TestTargetedLaunchNeedsTheReservation(t *testing.T) {
	if v := Check(params, reservedSequence("111122223333")); len(v) != 0 {
		t.Fatalf("violations of the controller policy: %v", v)
	}
	// Without the capacity-reservation resource the untargeted launch still passes, the
	// targeted one is denied on the reservation (in its owner's account when shared).
	if v := CheckPolicy(params, withoutReservations(params), launchSequence()); len(v) != 0 {
		t.Fatalf("untargeted launch: %v", v)
	}
	for _, owner := range []string{"111122223333", "444455556666"} {
		vs := CheckPolicy(params, withoutReservations(params), reservedSequence(owner))
		want := "ec2:CreateFleet on arn:aws:ec2:us-east-1:" + owner + ":capacity-reservation/cr-00000000000000001 is denied"
		if len(vs) != 1 || vs[0].Call.Action != "CreateFleet" || !strings.Contains(vs[0].String(), want) {
			t.Errorf("owner %s: violations %v, want one: %s", owner, vs, want)
		}
	}
	// RunInstances names the reservation in the request, over its template's.
	run := call("ec2", "RunInstances", &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String("lt-1")},
		CapacityReservationSpecification: &ec2types.CapacityReservationSpecification{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-00000000000000002")}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "instance", Tags: ec2Tags(clusterTags...)},
			{ResourceType: "volume", Tags: ec2Tags(clusterTags...)}}}, &ec2.RunInstancesOutput{})
	vs := CheckPolicy(params, withoutReservations(params), append(reservedSequence("111122223333")[:5], run))
	if len(vs) != 1 || !strings.Contains(vs[0].String(), "capacity-reservation/cr-00000000000000002 is denied") {
		t.Errorf("RunInstances with its own target: %v", vs)
	}
}

// The same through the simulator: the requests the real SDK sent for a targeted CreateFleet
// pass the controller policy, and need its capacity-reservation resource.
func TestTargetedFleetThroughTheSimulator(t *testing.T) {
	srv, err := awssim.Start(awssim.Options{ClusterName: "c1", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, controller := srv.AWSConfig(), srv.AWSConfig()
	controller.Credentials = credentials.NewStaticCredentialsProvider("CONTROLLER", "secret", "")
	cr, err := srv.AddCapacityReservation(awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	ami, sg, subnet := simSetup(t, ctx, admin)
	c := ec2.NewFromConfig(controller)
	try(c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{cr}})).OK(t)
	lt := try(c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("karpool/reserved"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(ami), SecurityGroupIds: []string{sg},
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("c1_profile")},
			CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
				CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr)}},
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: "network-interface", Tags: ec2Tags(clusterTags...)}}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "launch-template", Tags: ec2Tags(clusterTags...)}}})).OK(t)
	tags := ec2Tags(append(clusterTags, "karpenter.sh/nodeclaim", "default-1")...)
	out := try(c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(subnet)}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{DefaultTargetCapacityType: "on-demand", TotalTargetCapacity: aws.Int32(1)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "instance", Tags: tags}, {ResourceType: "volume", Tags: tags},
			{ResourceType: "fleet", Tags: tags}}})).OK(t)
	if len(out.Instances) != 1 || len(out.Errors) != 0 {
		t.Fatalf("targeted fleet: %+v errors %+v", out.Instances, out.Errors)
	}
	if v := Check(params, srv.Calls()); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	vs := CheckPolicy(params, withoutReservations(params), srv.Calls())
	if len(vs) != 1 || vs[0].Call.Action != "CreateFleet" || !strings.Contains(vs[0].String(), "capacity-reservation/"+cr+" is denied") {
		t.Errorf("without the capacity-reservation resource: %v", vs)
	}
}

// simSetup creates, with the administrator's key, what the controller's launch uses: the node
// role in the profile c1_profile, and returns an image, the security group and the subnet of
// us-east-1a.
func simSetup(t *testing.T, ctx context.Context, cfg aws.Config) (ami, sg, subnet string) {
	i := iam.NewFromConfig(cfg)
	try(i.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(params.NodeRole),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})).OK(t)
	try(i.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("c1_profile"), Tags: iamTags(profileTags...)})).OK(t)
	try(i.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("c1_profile"), RoleName: aws.String(params.NodeRole)})).OK(t)
	p := try(ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")})).OK(t)
	c := ec2.NewFromConfig(cfg)
	sgs := try(c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})).OK(t)
	sns := try(c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}}})).OK(t)
	return aws.ToString(p.Parameter.Value), aws.ToString(sgs.SecurityGroups[0].GroupId), aws.ToString(sns.Subnets[0].SubnetId)
}

// try(c.Op(ctx, in)).OK(t) is the call's value, or the test stops.
func try[T any](v T, err error) must.Result[T] { return must.Of(v, err) }
