package policycheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpool/karpool/internal/iampolicy"
	"github.com/karpool/karpool/testbed/awssim"
)

// state is what the replayed requests told about the account's resources: the tags conditions
// read (aws:ResourceTag) and the instance profiles' roles (iam:PassRole).
type state struct {
	p         Params
	lts       map[string]*launchTemplate // by id and by name
	instances map[string]map[string]string
	profiles  map[string]*profile
	// reservationOwners are the accounts of the capacity reservations DescribeCapacityReservations
	// showed (a shared reservation's ARN names its owner).
	reservationOwners map[string]string
}

type launchTemplate struct {
	id, name string
	tags     map[string]string
	// dataKnown is set when the template's content was seen (CreateLaunchTemplate): its
	// instance profile and the tags it applies at launch.
	dataKnown bool
	profile   string
	launch    map[ec2types.ResourceType]map[string]string
	// reservation is the capacity reservation the template's launches target ("" for none).
	reservation string
}

type profile struct {
	tags map[string]string
	role string
}

func newState(p Params) *state {
	return &state{p: p, lts: map[string]*launchTemplate{}, instances: map[string]map[string]string{}, profiles: map[string]*profile{},
		reservationOwners: map[string]string{}}
}

func ec2TagMap(tags []ec2types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func iamTagMap(tags []iamtypes.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// profileName accepts a name or an instance-profile ARN.
func profileName(nameOrArn string) string {
	if i := strings.LastIndex(nameOrArn, ":instance-profile/"); i >= 0 {
		rest := nameOrArn[i+len(":instance-profile/"):]
		return rest[strings.LastIndex(rest, "/")+1:]
	}
	return nameOrArn
}

func (s *state) putLT(lt *launchTemplate) {
	if lt.id != "" {
		s.lts[lt.id] = lt
	}
	if lt.name != "" {
		s.lts["name:"+lt.name] = lt
	}
}

func (s *state) lt(id, name *string) *launchTemplate {
	if lt := s.lts[aws.ToString(id)]; id != nil && lt != nil {
		return lt
	}
	if name != nil {
		return s.lts["name:"+aws.ToString(name)]
	}
	return nil
}

func (s *state) profile(name string) *profile {
	p := s.profiles[name]
	if p == nil {
		p = &profile{tags: map[string]string{}}
		s.profiles[name] = p
	}
	return p
}

// learn records what a successful request created, changed or showed.
func (s *state) learn(c awssim.Call) {
	switch in := c.Input.(type) {
	case *ec2.CreateLaunchTemplateInput:
		out, _ := c.Output.(*ec2.CreateLaunchTemplateOutput)
		if out == nil || out.LaunchTemplate == nil {
			return
		}
		lt := &launchTemplate{id: aws.ToString(out.LaunchTemplate.LaunchTemplateId), name: aws.ToString(in.LaunchTemplateName),
			tags: map[string]string{}, dataKnown: true, launch: map[ec2types.ResourceType]map[string]string{}}
		for _, ts := range in.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeLaunchTemplate {
				for k, v := range ec2TagMap(ts.Tags) {
					lt.tags[k] = v
				}
			}
		}
		if d := in.LaunchTemplateData; d != nil {
			if ip := d.IamInstanceProfile; ip != nil {
				lt.profile = profileName(aws.ToString(ip.Name) + aws.ToString(ip.Arn))
			}
			for _, ts := range d.TagSpecifications {
				lt.launch[ts.ResourceType] = ec2TagMap(ts.Tags)
			}
			if c := d.CapacityReservationSpecification; c != nil {
				lt.reservation = reservationTarget(c.CapacityReservationTarget)
			}
		}
		s.putLT(lt)
	case *ec2.DescribeLaunchTemplatesInput:
		out, _ := c.Output.(*ec2.DescribeLaunchTemplatesOutput)
		if out == nil {
			return
		}
		for _, d := range out.LaunchTemplates {
			lt := s.lt(d.LaunchTemplateId, d.LaunchTemplateName)
			if lt == nil {
				lt = &launchTemplate{id: aws.ToString(d.LaunchTemplateId), name: aws.ToString(d.LaunchTemplateName)}
			}
			lt.tags = ec2TagMap(d.Tags)
			s.putLT(lt)
		}
	case *ec2.DeleteLaunchTemplateInput:
		if lt := s.lt(in.LaunchTemplateId, in.LaunchTemplateName); lt != nil {
			delete(s.lts, lt.id)
			delete(s.lts, "name:"+lt.name)
		}
	case *ec2.CreateFleetInput:
		out, _ := c.Output.(*ec2.CreateFleetOutput)
		if out == nil {
			return
		}
		tags := map[string]string{}
		for _, ts := range in.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeInstance {
				tags = ec2TagMap(ts.Tags)
			}
		}
		for _, fi := range out.Instances {
			for _, id := range fi.InstanceIds {
				s.instances[id] = tags
			}
		}
	case *ec2.RunInstancesInput:
		out, _ := c.Output.(*ec2.RunInstancesOutput)
		if out == nil {
			return
		}
		for _, i := range out.Instances {
			s.instances[aws.ToString(i.InstanceId)] = ec2TagMap(i.Tags)
		}
	case *ec2.DescribeCapacityReservationsInput:
		out, _ := c.Output.(*ec2.DescribeCapacityReservationsOutput)
		if out == nil {
			return
		}
		for _, r := range out.CapacityReservations {
			s.reservationOwners[aws.ToString(r.CapacityReservationId)] = aws.ToString(r.OwnerId)
		}
	case *ec2.DescribeInstancesInput:
		out, _ := c.Output.(*ec2.DescribeInstancesOutput)
		if out == nil {
			return
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				s.instances[aws.ToString(i.InstanceId)] = ec2TagMap(i.Tags)
			}
		}
	case *ec2.CreateTagsInput:
		for _, id := range in.Resources {
			if s.instances[id] == nil {
				s.instances[id] = map[string]string{}
			}
			for k, v := range ec2TagMap(in.Tags) {
				s.instances[id][k] = v
			}
		}
	case *iam.CreateInstanceProfileInput:
		p := s.profile(aws.ToString(in.InstanceProfileName))
		p.tags, p.role = iamTagMap(in.Tags), ""
	case *iam.GetInstanceProfileInput:
		out, _ := c.Output.(*iam.GetInstanceProfileOutput)
		if out == nil || out.InstanceProfile == nil {
			return
		}
		p := s.profile(aws.ToString(out.InstanceProfile.InstanceProfileName))
		p.tags, p.role = iamTagMap(out.InstanceProfile.Tags), ""
		for _, r := range out.InstanceProfile.Roles {
			p.role = aws.ToString(r.RoleName)
		}
	case *iam.TagInstanceProfileInput:
		p := s.profile(aws.ToString(in.InstanceProfileName))
		for k, v := range iamTagMap(in.Tags) {
			p.tags[k] = v
		}
	case *iam.AddRoleToInstanceProfileInput:
		s.profile(aws.ToString(in.InstanceProfileName)).role = aws.ToString(in.RoleName)
	case *iam.RemoveRoleFromInstanceProfileInput:
		s.profile(aws.ToString(in.InstanceProfileName)).role = ""
	case *iam.DeleteInstanceProfileInput:
		delete(s.profiles, aws.ToString(in.InstanceProfileName))
	}
}

// arn builds an ARN in the account and region of the check.
func (s *state) arn(service, resource string) string {
	region, account := s.p.Region, s.p.AccountID
	switch service {
	case "iam":
		region = ""
	case "ssm":
		account = ""
	}
	return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, region, account, resource)
}

// tagContext is the condition keys a tag set gives: prefix is aws:RequestTag/ or
// aws:ResourceTag/. Request tags also give aws:TagKeys.
func tagContext(ctx map[string][]string, prefix string, tags map[string]string) map[string][]string {
	if ctx == nil {
		ctx = map[string][]string{}
	}
	for k, v := range tags {
		ctx[prefix+k] = []string{v}
		if prefix == "aws:RequestTag/" {
			ctx["aws:TagKeys"] = append(ctx["aws:TagKeys"], k)
		}
	}
	return ctx
}

func request(action, resource string, ctx map[string][]string) iampolicy.Request {
	return iampolicy.Request{Action: action, Resource: resource, Context: ctx}
}

// authorizations are the requests IAM evaluates for one call, or an error when the replay does
// not know what they would carry (a resource nothing created or described).
func (s *state) authorizations(c awssim.Call) ([]iampolicy.Request, error) {
	action := c.Service + ":" + c.Action
	switch in := c.Input.(type) {
	case *ssm.GetParameterInput:
		return []iampolicy.Request{request(action, s.arn("ssm", "parameter"+aws.ToString(in.Name)), nil)}, nil
	case *eks.DescribeClusterInput:
		return []iampolicy.Request{request(action, s.arn("eks", "cluster/"+aws.ToString(in.Name)), nil)}, nil
	case *sqs.GetQueueUrlInput, *sqs.ReceiveMessageInput, *sqs.DeleteMessageInput:
		return []iampolicy.Request{request(action, s.arn("sqs", queueName(in)), nil)}, nil
	case *iam.GetInstanceProfileInput:
		return []iampolicy.Request{request(action, s.arn("iam", "instance-profile/"+aws.ToString(in.InstanceProfileName)), nil)}, nil
	case *iam.CreateInstanceProfileInput:
		return []iampolicy.Request{request(action, s.arn("iam", "instance-profile/"+aws.ToString(in.InstanceProfileName)), tagContext(nil, "aws:RequestTag/", iamTagMap(in.Tags)))}, nil
	case *iam.TagInstanceProfileInput, *iam.AddRoleToInstanceProfileInput, *iam.RemoveRoleFromInstanceProfileInput, *iam.DeleteInstanceProfileInput:
		return s.profileAuthorizations(action, c.Input)
	case *ec2.TerminateInstancesInput:
		return s.onInstances(action, in.InstanceIds, nil)
	case *ec2.CreateTagsInput:
		return s.onInstances(action, in.Resources, ec2TagMap(in.Tags))
	case *ec2.DeleteLaunchTemplateInput:
		lt := s.lt(in.LaunchTemplateId, in.LaunchTemplateName)
		if lt == nil {
			return nil, fmt.Errorf("launch template %s%s: no recorded request created or described it, so its tags are unknown",
				aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName))
		}
		return []iampolicy.Request{request(action, s.arn("ec2", "launch-template/"+lt.id), tagContext(nil, "aws:ResourceTag/", lt.tags))}, nil
	case *ec2.CreateLaunchTemplateInput:
		return s.createLaunchTemplate(action, in), nil
	case *ec2.RunInstancesInput, *ec2.CreateFleetInput:
		return s.launchAuthorizations(c)
	case *sts.GetCallerIdentityInput:
		return nil, nil // AWS documents that it needs no permission
	}
	if c.Service == "ec2" || c.Service == "pricing" || c.Action == "ListInstanceProfiles" {
		// Reads without a narrower resource; the simulator refuses requests signed for another
		// region, so aws:RequestedRegion is the cluster's.
		return []iampolicy.Request{request(action, "*", map[string][]string{"aws:RequestedRegion": {s.p.Region}})}, nil
	}
	return nil, fmt.Errorf("karpool's policy check does not know what %s needs", action)
}

// profileAuthorizations: the instance profile's tags condition every change; adding a role
// also passes it.
func (s *state) profileAuthorizations(action string, input any) ([]iampolicy.Request, error) {
	var name, role string
	var reqTags map[string]string
	switch in := input.(type) {
	case *iam.TagInstanceProfileInput:
		name, reqTags = aws.ToString(in.InstanceProfileName), iamTagMap(in.Tags)
	case *iam.AddRoleToInstanceProfileInput:
		name, role = aws.ToString(in.InstanceProfileName), aws.ToString(in.RoleName)
	case *iam.RemoveRoleFromInstanceProfileInput:
		name = aws.ToString(in.InstanceProfileName)
	case *iam.DeleteInstanceProfileInput:
		name = aws.ToString(in.InstanceProfileName)
	}
	p := s.profiles[name]
	if p == nil {
		return nil, fmt.Errorf("no recorded request created or read instance profile %s, so its tags are unknown", name)
	}
	ctx := tagContext(tagContext(nil, "aws:ResourceTag/", p.tags), "aws:RequestTag/", reqTags)
	out := []iampolicy.Request{request(action, s.arn("iam", "instance-profile/"+name), ctx)}
	if role != "" {
		out = append(out, s.passRole(role))
	}
	return out, nil
}

// passRole is handing a role to EC2, which launching with a profile or putting a role in one
// does.
func (s *state) passRole(role string) iampolicy.Request {
	return request("iam:PassRole", s.arn("iam", "role/"+role), map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}})
}

// onInstances authorizes an action on each instance by its tags (and the tags it adds).
func (s *state) onInstances(action string, ids []string, add map[string]string) ([]iampolicy.Request, error) {
	var out []iampolicy.Request
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return nil, fmt.Errorf("resource %s is not an instance", id)
		}
		tags, ok := s.instances[id]
		if !ok {
			return nil, fmt.Errorf("%s: no recorded request launched or described it, so its tags are unknown", id)
		}
		ctx := tagContext(tagContext(nil, "aws:ResourceTag/", tags), "aws:RequestTag/", add)
		out = append(out, request(action, s.arn("ec2", "instance/"+id), ctx))
	}
	return out, nil
}

// created names a resource the request creates: its ARN is not known before it exists.
func (s *state) created(rt ec2types.ResourceType) string {
	return s.arn("ec2", string(rt)+"/new")
}

// tagAtCreation: tagging at creation is ec2:CreateTags on each tagged resource, with
// ec2:CreateAction naming the creating action.
func (s *state) tagAtCreation(creating string, rt ec2types.ResourceType, tags map[string]string) iampolicy.Request {
	ctx := tagContext(map[string][]string{"ec2:CreateAction": {creating}}, "aws:RequestTag/", tags)
	return request("ec2:CreateTags", s.created(rt), ctx)
}

func (s *state) createLaunchTemplate(action string, in *ec2.CreateLaunchTemplateInput) []iampolicy.Request {
	tags := map[string]string{}
	var out []iampolicy.Request
	for _, ts := range in.TagSpecifications {
		m := ec2TagMap(ts.Tags)
		if ts.ResourceType == ec2types.ResourceTypeLaunchTemplate {
			tags = m
		}
		out = append(out, s.tagAtCreation("CreateLaunchTemplate", ts.ResourceType, m))
	}
	return append(out, request(action, s.created(ec2types.ResourceTypeLaunchTemplate), tagContext(nil, "aws:RequestTag/", tags)))
}

// launch is what a RunInstances or CreateFleet request uses and creates.
type launch struct {
	templates []*launchTemplate
	// unknown names templates the replay never saw.
	unknown []string
	// tagSpecs are the tags the request applies per resource type: its own TagSpecifications,
	// then the templates' (which EC2 applies at launch).
	tagSpecs map[ec2types.ResourceType][]map[string]string
	// creates are the resource types the request creates.
	creates []ec2types.ResourceType
	// profiles are the instance profiles the instances get.
	profiles []string
	// uses are the subnets, security groups, images and capacity reservations it names.
	uses []string
}

func (s *state) launchOf(c awssim.Call) launch {
	l := launch{tagSpecs: map[ec2types.ResourceType][]map[string]string{}}
	useLT := func(id, name *string) {
		lt := s.lt(id, name)
		if lt == nil {
			l.unknown = append(l.unknown, aws.ToString(id)+aws.ToString(name))
			return
		}
		l.templates = append(l.templates, lt)
	}
	var own []ec2types.TagSpecification
	profileOverride, reservationOverride := "", ""
	switch in := c.Input.(type) {
	case *ec2.CreateFleetInput:
		for _, cfg := range in.LaunchTemplateConfigs {
			if sp := cfg.LaunchTemplateSpecification; sp != nil {
				useLT(sp.LaunchTemplateId, sp.LaunchTemplateName)
			}
			for _, o := range cfg.Overrides {
				if o.SubnetId != nil {
					l.uses = append(l.uses, "subnet/"+aws.ToString(o.SubnetId))
				}
				if o.ImageId != nil {
					l.uses = append(l.uses, "image/"+aws.ToString(o.ImageId))
				}
			}
		}
		own = in.TagSpecifications
		l.creates = []ec2types.ResourceType{ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeNetworkInterface, ec2types.ResourceTypeFleet}
	case *ec2.RunInstancesInput:
		if sp := in.LaunchTemplate; sp != nil {
			useLT(sp.LaunchTemplateId, sp.LaunchTemplateName)
		}
		if ip := in.IamInstanceProfile; ip != nil {
			profileOverride = profileName(aws.ToString(ip.Name) + aws.ToString(ip.Arn))
		}
		if in.SubnetId != nil {
			l.uses = append(l.uses, "subnet/"+aws.ToString(in.SubnetId))
		}
		if in.ImageId != nil {
			l.uses = append(l.uses, "image/"+aws.ToString(in.ImageId))
		}
		for _, sg := range in.SecurityGroupIds {
			l.uses = append(l.uses, "security-group/"+sg)
		}
		if c := in.CapacityReservationSpecification; c != nil {
			reservationOverride = reservationTarget(c.CapacityReservationTarget)
		}
		own = in.TagSpecifications
		l.creates = []ec2types.ResourceType{ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeNetworkInterface}
	}
	for _, ts := range own {
		l.tagSpecs[ts.ResourceType] = append(l.tagSpecs[ts.ResourceType], ec2TagMap(ts.Tags))
	}
	for _, lt := range l.templates {
		for rt, tags := range lt.launch {
			l.tagSpecs[rt] = append(l.tagSpecs[rt], tags)
		}
		if profileOverride == "" && lt.profile != "" {
			l.profiles = append(l.profiles, lt.profile)
		}
		if !lt.dataKnown {
			l.unknown = append(l.unknown, lt.id+" (content never seen)")
		}
	}
	if profileOverride != "" {
		l.profiles = append(l.profiles, profileOverride)
	}
	l.uses = append(l.uses, l.reservations(reservationOverride)...)
	return l
}

// reservations are the capacity reservations a launch targets: the request's own target
// (RunInstances), else its templates'.
func (l launch) reservations(override string) []string {
	if override != "" {
		return []string{"capacity-reservation/" + override}
	}
	var out []string
	for _, lt := range l.templates {
		if lt.reservation != "" && !slices.Contains(out, "capacity-reservation/"+lt.reservation) {
			out = append(out, "capacity-reservation/"+lt.reservation)
		}
	}
	return out
}

func reservationTarget(t *ec2types.CapacityReservationTarget) string {
	if t == nil {
		return ""
	}
	return aws.ToString(t.CapacityReservationId)
}

// launchAuthorizations: a launch uses its templates (conditioned on their tags), the subnets,
// security groups and images it names and the capacity reservation it targets (IAM authorizes
// RunInstances/CreateFleet on the capacity-reservation resource then); creates instances, volumes, network interfaces and, for
// CreateFleet, the fleet (conditioned on the tags they get); tags them at creation; and passes
// the instance profile's role.
func (s *state) launchAuthorizations(c awssim.Call) ([]iampolicy.Request, error) {
	action := c.Service + ":" + c.Action
	l := s.launchOf(c)
	if len(l.unknown) > 0 {
		return nil, fmt.Errorf("launch templates %v: no recorded request created them, so their tags and content are unknown", l.unknown)
	}
	var out []iampolicy.Request
	for _, lt := range l.templates {
		out = append(out, request(action, s.arn("ec2", "launch-template/"+lt.id), tagContext(nil, "aws:ResourceTag/", lt.tags)))
	}
	for _, u := range l.uses {
		out = append(out, request(action, s.usedResource(u), nil))
	}
	for _, rt := range l.creates {
		merged := map[string]string{}
		for _, m := range l.tagSpecs[rt] {
			maps.Copy(merged, m)
		}
		out = append(out, request(action, s.created(rt), tagContext(nil, "aws:RequestTag/", merged)))
	}
	for rt, specs := range l.tagSpecs {
		for _, m := range specs {
			out = append(out, s.tagAtCreation(c.Action, rt, m))
		}
	}
	for _, name := range l.profiles {
		p := s.profiles[name]
		if p == nil {
			return nil, fmt.Errorf("instance profile %s: no recorded request created or read it, so the role it passes is unknown", name)
		}
		if p.role != "" {
			out = append(out, s.passRole(p.role))
		}
	}
	return out, nil
}

// usedResource is the ARN of a resource a launch uses: images have no account; a capacity
// reservation has its owner's (another account's when shared), the check's when unknown.
func (s *state) usedResource(u string) string {
	if strings.HasPrefix(u, "image/") {
		return fmt.Sprintf("arn:aws:ec2:%s::%s", s.p.Region, u)
	}
	if id, ok := strings.CutPrefix(u, "capacity-reservation/"); ok && s.reservationOwners[id] != "" {
		return fmt.Sprintf("arn:aws:ec2:%s:%s:%s", s.p.Region, s.reservationOwners[id], u)
	}
	return s.arn("ec2", u)
}

// queueName is the queue a request names, by name or by the last segment of its URL.
func queueName(in any) string {
	var url string
	switch x := in.(type) {
	case *sqs.GetQueueUrlInput:
		return aws.ToString(x.QueueName)
	case *sqs.ReceiveMessageInput:
		url = aws.ToString(x.QueueUrl)
	case *sqs.DeleteMessageInput:
		url = aws.ToString(x.QueueUrl)
	}
	return url[strings.LastIndex(url, "/")+1:]
}
