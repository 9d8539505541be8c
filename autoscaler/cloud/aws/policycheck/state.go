package policycheck

import (
	"fmt"
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

	"github.com/karpool/karpool/internal/awssim"
)

// state is what the replayed requests told about the account's resources: the tags conditions
// read (aws:ResourceTag) and the instance profiles' roles (iam:PassRole).
type state struct {
	p         Params
	lts       map[string]*launchTemplate // by id and by name
	instances map[string]map[string]string
	profiles  map[string]*profile
}

type launchTemplate struct {
	id, name string
	tags     map[string]string
	// dataKnown is set when the template's content was seen (CreateLaunchTemplate): its
	// instance profile and the tags it applies at launch.
	dataKnown bool
	profile   string
	launch    map[ec2types.ResourceType]map[string]string
}

type profile struct {
	tags map[string]string
	role string
}

func newState(p Params) *state {
	return &state{p: p, lts: map[string]*launchTemplate{}, instances: map[string]map[string]string{}, profiles: map[string]*profile{}}
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

// want is a tag condition: StringEquals with a value, or StringLike "*" (present, any value)
// when any is set.
type want struct {
	key, value string
	any        bool
}

func (s *state) owned() want {
	return want{key: "kubernetes.io/cluster/" + s.p.ClusterName, value: "owned"}
}
func (s *state) eksCluster() want { return want{key: "eks:eks-cluster-name", value: s.p.ClusterName} }
func (s *state) region() want     { return want{key: "topology.kubernetes.io/region", value: s.p.Region} }

var (
	anyNodePool  = want{key: "karpenter.sh/nodepool", any: true}
	anyNodeClass = want{key: "karpenter.k8s.aws/ec2nodeclass", any: true}
)

// holds checks tag conditions on a tag set; kind is "resource" or "request" for the message.
func holds(tags map[string]string, kind string, wants ...want) error {
	var missing []string
	for _, w := range wants {
		v, ok := tags[w.key]
		switch {
		case !ok && w.any:
			missing = append(missing, fmt.Sprintf("%s tag %s (any value)", kind, w.key))
		case !ok || (!w.any && v != w.value):
			missing = append(missing, fmt.Sprintf("%s tag %s=%s (got %q)", kind, w.key, w.value, v))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("needs %s", strings.Join(missing, ", "))
	}
	return nil
}

func checkSSMParameter(_ *state, c awssim.Call) error {
	name := ssmName(c.Input)
	if !strings.HasPrefix(name, "/aws/service/") {
		return fmt.Errorf("parameter %q is outside arn:aws:ssm:<region>::parameter/aws/service/*", name)
	}
	return nil
}

func checkDescribeCluster(s *state, c awssim.Call) error {
	if name := eksClusterName(c.Input); name != s.p.ClusterName {
		return fmt.Errorf("cluster %q is not the cluster %s", name, s.p.ClusterName)
	}
	return nil
}

func checkQueue(s *state, c awssim.Call) error {
	if q := queueName(c.Input); q != s.p.InterruptionQueue {
		return fmt.Errorf("queue %q is not the interruption queue %s", q, s.p.InterruptionQueue)
	}
	return nil
}

func checkCreateInstanceProfile(s *state, c awssim.Call) error {
	in := c.Input.(*iam.CreateInstanceProfileInput)
	return holds(iamTagMap(in.Tags), "request", s.owned(), s.eksCluster(), s.region(), anyNodeClass)
}

// profileOf returns the known instance profile a request names.
func (s *state) profileOf(name string) (*profile, error) {
	p := s.profiles[name]
	if p == nil {
		return nil, fmt.Errorf("no recorded request created or read instance profile %s, so its tags are unknown", name)
	}
	return p, nil
}

func checkTagInstanceProfile(s *state, c awssim.Call) error {
	in := c.Input.(*iam.TagInstanceProfileInput)
	p, err := s.profileOf(aws.ToString(in.InstanceProfileName))
	if err != nil {
		return err
	}
	if err := holds(p.tags, "resource", s.owned(), s.region(), anyNodeClass); err != nil {
		return err
	}
	return holds(iamTagMap(in.Tags), "request", s.owned(), s.eksCluster(), s.region(), anyNodeClass)
}

func checkProfileResourceTags(s *state, c awssim.Call) error {
	var name string
	switch in := c.Input.(type) {
	case *iam.AddRoleToInstanceProfileInput:
		name = aws.ToString(in.InstanceProfileName)
	case *iam.RemoveRoleFromInstanceProfileInput:
		name = aws.ToString(in.InstanceProfileName)
	case *iam.DeleteInstanceProfileInput:
		name = aws.ToString(in.InstanceProfileName)
	}
	p, err := s.profileOf(name)
	if err != nil {
		return err
	}
	return holds(p.tags, "resource", s.owned(), s.region(), anyNodeClass)
}

// AddRoleToInstanceProfile needs iam:PassRole on the role it adds.
func checkAddRolePassRole(s *state, c awssim.Call) error {
	role := aws.ToString(c.Input.(*iam.AddRoleToInstanceProfileInput).RoleName)
	if role != s.p.NodeRole {
		return fmt.Errorf("iam:PassRole is allowed only for the node role %s, not %s", s.p.NodeRole, role)
	}
	return nil
}

func checkTerminateResourceTags(s *state, c awssim.Call) error {
	var errs []string
	for _, id := range c.Input.(*ec2.TerminateInstancesInput).InstanceIds {
		tags, ok := s.instances[id]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: no recorded request launched or described it, so its tags are unknown", id))
			continue
		}
		if err := holds(tags, "resource", s.owned(), anyNodePool); err != nil {
			errs = append(errs, id+": "+err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func checkDeleteLaunchTemplateResourceTags(s *state, c awssim.Call) error {
	in := c.Input.(*ec2.DeleteLaunchTemplateInput)
	lt := s.lt(in.LaunchTemplateId, in.LaunchTemplateName)
	if lt == nil {
		return fmt.Errorf("launch template %s%s: no recorded request created or described it, so its tags are unknown",
			aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName))
	}
	return holds(lt.tags, "resource", s.owned(), anyNodePool)
}

// createTagsKeys are the only keys AllowScopedResourceTagging lets karpool add to a running
// instance.
var createTagsKeys = []string{"eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"}

func checkCreateTags(s *state, c awssim.Call) error {
	in := c.Input.(*ec2.CreateTagsInput)
	for _, t := range in.Tags {
		k := aws.ToString(t.Key)
		if !slices.Contains(createTagsKeys, k) {
			return fmt.Errorf("tag key %s is not one of %v", k, createTagsKeys)
		}
		if k == "eks:eks-cluster-name" && aws.ToString(t.Value) != s.p.ClusterName {
			return fmt.Errorf("eks:eks-cluster-name=%s is not the cluster %s", aws.ToString(t.Value), s.p.ClusterName)
		}
	}
	for _, id := range in.Resources {
		if !strings.HasPrefix(id, "i-") {
			return fmt.Errorf("resource %s is not an instance", id)
		}
		tags, ok := s.instances[id]
		if !ok {
			return fmt.Errorf("%s: no recorded request launched or described it, so its tags are unknown", id)
		}
		if err := holds(tags, "resource", s.owned(), anyNodePool); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
	}
	return nil
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
	profileOverride := ""
	switch in := c.Input.(type) {
	case *ec2.CreateFleetInput:
		for _, cfg := range in.LaunchTemplateConfigs {
			if sp := cfg.LaunchTemplateSpecification; sp != nil {
				useLT(sp.LaunchTemplateId, sp.LaunchTemplateName)
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
	return l
}

func checkLaunchTemplateResourceTags(s *state, c awssim.Call) error {
	l := s.launchOf(c)
	for _, lt := range l.templates {
		if err := holds(lt.tags, "resource", s.owned(), anyNodePool); err != nil {
			return fmt.Errorf("launch template %s: %w", lt.id, err)
		}
	}
	if len(l.unknown) > 0 {
		return fmt.Errorf("launch templates %v: no recorded request created them, so their tags and content are unknown", l.unknown)
	}
	return nil
}

// checkCreatedResourcesTagged: every resource the request creates must carry the cluster's
// tags, since the statement allowing its creation is conditioned on aws:RequestTag.
func checkCreatedResourcesTagged(s *state, c awssim.Call) error {
	if in, ok := c.Input.(*ec2.CreateLaunchTemplateInput); ok {
		for _, ts := range in.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeLaunchTemplate {
				return holds(ec2TagMap(ts.Tags), "request", s.owned(), s.eksCluster(), anyNodePool)
			}
		}
		return fmt.Errorf("the launch template is created without tags")
	}
	l := s.launchOf(c)
	for _, rt := range l.creates {
		specs := l.tagSpecs[rt]
		if len(specs) == 0 {
			return fmt.Errorf("the request creates %s resources without tags", rt)
		}
		merged := map[string]string{}
		for _, m := range specs {
			for k, v := range m {
				merged[k] = v
			}
		}
		if err := holds(merged, "request", s.owned(), s.eksCluster(), anyNodePool); err != nil {
			return fmt.Errorf("%s: %w", rt, err)
		}
	}
	return nil
}

// checkEveryTagSpecification: tagging at creation is ec2:CreateTags with ec2:CreateAction set to
// the creating action, allowed only when the request tags carry the cluster's tags.
func checkEveryTagSpecification(s *state, c awssim.Call) error {
	var specs []map[string]string
	if in, ok := c.Input.(*ec2.CreateLaunchTemplateInput); ok {
		for _, ts := range in.TagSpecifications {
			specs = append(specs, ec2TagMap(ts.Tags))
		}
	} else {
		for _, ms := range s.launchOf(c).tagSpecs {
			specs = append(specs, ms...)
		}
	}
	for _, m := range specs {
		if err := holds(m, "request", s.owned(), s.eksCluster(), anyNodePool); err != nil {
			return err
		}
	}
	return nil
}

// checkLaunchPassRole: launching with an instance profile passes its role to EC2.
func checkLaunchPassRole(s *state, c awssim.Call) error {
	for _, name := range s.launchOf(c).profiles {
		p := s.profiles[name]
		if p == nil {
			return fmt.Errorf("instance profile %s: no recorded request created or read it, so the role it passes is unknown", name)
		}
		if p.role != "" && p.role != s.p.NodeRole {
			return fmt.Errorf("instance profile %s passes role %s; iam:PassRole is allowed only for the node role %s", name, p.role, s.p.NodeRole)
		}
	}
	return nil
}

func ssmName(in any) string {
	if x, ok := in.(*ssm.GetParameterInput); ok {
		return aws.ToString(x.Name)
	}
	return ""
}

func eksClusterName(in any) string {
	if x, ok := in.(*eks.DescribeClusterInput); ok {
		return aws.ToString(x.Name)
	}
	return ""
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
