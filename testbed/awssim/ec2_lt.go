package awssim

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

type launchTemplate struct {
	id, name       string
	created        time.Time
	tags           []ec2types.Tag
	versions       []*ltVersion
	defaultVersion int64
}

type ltVersion struct {
	number      int64
	data        ec2types.RequestLaunchTemplateData
	description string
	created     time.Time
}

var ltNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

// maxUserData is EC2's limit on decoded user data.
const maxUserData = 16 * 1024

func validateUserData(ud *string) error {
	if ud == nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(*ud)
	if err != nil {
		return apiErr(400, "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
	}
	if len(b) > maxUserData {
		return apiErr(400, "InvalidParameterValue", "User data is limited to 16384 bytes")
	}
	return nil
}

func (s *Server) ltSummary(lt *launchTemplate) ec2types.LaunchTemplate {
	return ec2types.LaunchTemplate{
		LaunchTemplateId: aws.String(lt.id), LaunchTemplateName: aws.String(lt.name), CreateTime: aws.Time(lt.created),
		CreatedBy: aws.String("arn:aws:iam::" + s.opts.AccountID + ":root"), DefaultVersionNumber: aws.Int64(lt.defaultVersion),
		LatestVersionNumber: aws.Int64(lt.versions[len(lt.versions)-1].number), Tags: cloneTags(lt.tags),
	}
}

func (st *state) ltByName(name string) *launchTemplate {
	for _, lt := range st.lts {
		if lt.name == name {
			return lt
		}
	}
	return nil
}

// resolveLT finds a launch template version by id or name and version ($Default, $Latest or a
// number; default $Default).
func (st *state) resolveLT(id, name, version *string) (*launchTemplate, *ltVersion, *apiError) {
	var lt *launchTemplate
	switch {
	case aws.ToString(id) != "":
		lt = st.lts[*id]
		if lt == nil {
			return nil, nil, apiErr(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", *id)
		}
	case aws.ToString(name) != "":
		lt = st.ltByName(*name)
		if lt == nil {
			return nil, nil, apiErr(400, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", *name)
		}
	default:
		return nil, nil, apiErr(400, "MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId")
	}
	v := aws.ToString(version)
	want := lt.defaultVersion
	switch v {
	case "", "$Default":
	case "$Latest":
		want = lt.versions[len(lt.versions)-1].number
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, nil, apiErr(400, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s", v, lt.id)
		}
		want = n
	}
	for _, ver := range lt.versions {
		if ver.number == want {
			return lt, ver, nil
		}
	}
	return nil, nil, apiErr(400, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s", v, lt.id)
}

func (s *Server) createLaunchTemplate(rc *reqCtx, in *ec2.CreateLaunchTemplateInput) (any, error) {
	name := aws.ToString(in.LaunchTemplateName)
	if name == "" {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter LaunchTemplateName")
	}
	if !ltNameRE.MatchString(name) {
		return nil, apiErr(400, "InvalidLaunchTemplateName.MalformedException", "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	}
	if in.LaunchTemplateData == nil {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter LaunchTemplateData")
	}
	if err := validateUserData(in.LaunchTemplateData.UserData); err != nil {
		return nil, err
	}
	var tags []ec2types.Tag
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType != ec2types.ResourceTypeLaunchTemplate {
			return nil, apiErr(400, "InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", ts.ResourceType)
		}
		if err := validateTagKeys(ts.Tags); err != nil {
			return nil, err
		}
		setTags(&tags, ts.Tags)
	}
	for _, ts := range in.LaunchTemplateData.TagSpecifications {
		switch ts.ResourceType {
		case ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeNetworkInterface,
			ec2types.ResourceTypeSpotInstancesRequest, ec2types.ResourceTypeElasticGpu:
		default:
			return nil, apiErr(400, "InvalidParameterValue", "'%s' is not a valid taggable resource type.", ts.ResourceType)
		}
		if err := validateTagKeys(ts.Tags); err != nil {
			return nil, err
		}
	}
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok := aws.ToString(in.ClientToken); tok != "" {
		if prev, ok := s.st.tokens["CreateLaunchTemplate/"+tok]; ok {
			return prev, nil
		}
	}
	if s.st.ltByName(name) != nil {
		return nil, apiErr(400, "InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	lt := &launchTemplate{id: s.st.ids.id("lt"), name: name, created: rc.now, tags: tags, defaultVersion: 1}
	lt.versions = []*ltVersion{{number: 1, data: *in.LaunchTemplateData, description: aws.ToString(in.VersionDescription), created: rc.now}}
	s.st.lts[lt.id] = lt
	out := &ec2.CreateLaunchTemplateOutput{LaunchTemplate: ptrTo(s.ltSummary(lt))}
	if tok := aws.ToString(in.ClientToken); tok != "" {
		s.st.tokens["CreateLaunchTemplate/"+tok] = out
	}
	return out, nil
}

func ptrTo[T any](v T) *T { return &v }

func (s *Server) deleteLaunchTemplate(rc *reqCtx, in *ec2.DeleteLaunchTemplateInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, _, err := s.st.resolveLT(in.LaunchTemplateId, in.LaunchTemplateName, nil)
	if err != nil {
		return nil, err
	}
	delete(s.st.lts, lt.id)
	return &ec2.DeleteLaunchTemplateOutput{LaunchTemplate: ptrTo(s.ltSummary(lt))}, nil
}

func (s *Server) describeLaunchTemplates(rc *reqCtx, in *ec2.DescribeLaunchTemplatesInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.LaunchTemplateIds {
		if s.st.lts[id] == nil {
			return nil, apiErr(400, "InvalidLaunchTemplateId.NotFound", "At least one of the launch templates specified in the request does not exist.")
		}
	}
	for _, n := range in.LaunchTemplateNames {
		if s.st.ltByName(n) == nil {
			return nil, apiErr(400, "InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
	}
	out := &ec2.DescribeLaunchTemplatesOutput{LaunchTemplates: []ec2types.LaunchTemplate{}}
	for _, id := range sortedKeys(s.st.lts) {
		lt := s.st.lts[id]
		if len(in.LaunchTemplateIds) > 0 && !contains(in.LaunchTemplateIds, lt.id) {
			continue
		}
		if len(in.LaunchTemplateNames) > 0 && !contains(in.LaunchTemplateNames, lt.name) {
			continue
		}
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "launch-template-name":
				return []string{lt.name}, true
			case "create-time":
				return []string{lt.created.UTC().Format("2006-01-02T15:04:05.000Z")}, true
			}
			return tagFilter(lt.tags, name)
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.LaunchTemplates = append(out.LaunchTemplates, s.ltSummary(lt))
		}
	}
	var err error
	out.LaunchTemplates, out.NextToken, err = page(out.LaunchTemplates, in.MaxResults, in.NextToken, 0)
	return out, err
}

func (s *Server) describeLaunchTemplateVersions(rc *reqCtx, in *ec2.DescribeLaunchTemplateVersionsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, _, err := s.st.resolveLT(in.LaunchTemplateId, in.LaunchTemplateName, nil)
	if err != nil {
		return nil, err
	}
	out := &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{}}
	var vers []*ltVersion
	if len(in.Versions) == 0 {
		vers = lt.versions
	} else {
		for _, v := range in.Versions {
			_, ver, err := s.st.resolveLT(aws.String(lt.id), nil, aws.String(v))
			if err != nil {
				return nil, err
			}
			vers = append(vers, ver)
		}
	}
	for _, ver := range vers {
		data := &ec2types.ResponseLaunchTemplateData{}
		convertByName(data, &ver.data)
		out.LaunchTemplateVersions = append(out.LaunchTemplateVersions, ec2types.LaunchTemplateVersion{
			LaunchTemplateId: aws.String(lt.id), LaunchTemplateName: aws.String(lt.name), VersionNumber: aws.Int64(ver.number),
			VersionDescription: nilIfEmpty(ver.description), CreateTime: aws.Time(ver.created),
			CreatedBy: aws.String("arn:aws:iam::" + s.opts.AccountID + ":root"), DefaultVersion: aws.Bool(ver.number == lt.defaultVersion),
			LaunchTemplateData: data,
		})
	}
	var perr error
	out.LaunchTemplateVersions, out.NextToken, perr = page(out.LaunchTemplateVersions, in.MaxResults, in.NextToken, 0)
	return out, perr
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
