package awssim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

type iamRole struct {
	name, path, arn, id string
	created             time.Time
	assume              string
	description         *string
	maxSession          int32
	tags                []iamtypes.Tag
	inline              map[string]string
	attached            []string
}

type iamProfile struct {
	name, path, arn, id string
	created             time.Time
	roles               []string
	tags                []iamtypes.Tag
}

type iamPolicyVersion struct {
	id      string
	doc     string
	created time.Time
}

type iamPolicy struct {
	name, path, arn, id string
	description         *string
	created, updated    time.Time
	versions            []*iamPolicyVersion
	defaultVersion      string
	nextVersion         int
	tags                []iamtypes.Tag
	awsManaged          bool
}

type iamState struct {
	roles    map[string]*iamRole
	profiles map[string]*iamProfile
	policies map[string]*iamPolicy // by ARN
}

// awsManagedPolicies are the AWS managed policies the account can attach.
var awsManagedPolicies = []string{
	"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly",
	"AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore", "AmazonEKSClusterPolicy",
	"AmazonEKSVPCResourceController", "AmazonEKSComputePolicy", "AmazonEKSBlockStoragePolicy",
	"AmazonEKSLoadBalancingPolicy", "AmazonEKSNetworkingPolicy", "AdministratorAccess", "ReadOnlyAccess",
	"service-role/AmazonEBSCSIDriverPolicy", "CloudWatchAgentServerPolicy",
}

func (is *iamState) init() {
	is.roles = map[string]*iamRole{}
	is.profiles = map[string]*iamProfile{}
	is.policies = map[string]*iamPolicy{}
	created := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, n := range awsManagedPolicies {
		path, name := "/", n
		if strings.Contains(n, "/") {
			p, nm, _ := strings.Cut(n, "/")
			path, name = "/"+p+"/", nm
		}
		arn := "arn:aws:iam::aws:policy/" + n
		is.policies[arn] = &iamPolicy{name: name, path: path, arn: arn, id: fmt.Sprintf("ANPAAWSMANAGED%06d", i), created: created,
			updated: created, awsManaged: true, defaultVersion: "v1", nextVersion: 2,
			versions: []*iamPolicyVersion{{id: "v1", created: created,
				doc: `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`}}}
	}
}

func (is *iamState) profileByArn(arn string) *iamProfile {
	for _, p := range is.profiles {
		if p.arn == arn {
			return p
		}
	}
	return nil
}

func (s *Server) iamService() *service {
	sv := &service{signingName: "iam", proto: protoQuery, xmlns: "https://iam.amazonaws.com/doc/2010-05-08/",
		version: "2010-05-08", reqTable: iamRequest, respTable: iamResponse}
	sv.register(
		op("CreateRole", s.iamCreateRole), op("GetRole", s.iamGetRole), op("DeleteRole", s.iamDeleteRole),
		op("ListRoles", s.iamListRoles), op("TagRole", s.iamTagRole), op("UntagRole", s.iamUntagRole),
		op("ListRoleTags", s.iamListRoleTags), op("UpdateAssumeRolePolicy", s.iamUpdateAssumeRolePolicy),
		op("PutRolePolicy", s.iamPutRolePolicy), op("GetRolePolicy", s.iamGetRolePolicy),
		op("DeleteRolePolicy", s.iamDeleteRolePolicy), op("ListRolePolicies", s.iamListRolePolicies),
		op("AttachRolePolicy", s.iamAttachRolePolicy), op("DetachRolePolicy", s.iamDetachRolePolicy),
		op("ListAttachedRolePolicies", s.iamListAttachedRolePolicies),
		op("CreateInstanceProfile", s.iamCreateInstanceProfile), op("GetInstanceProfile", s.iamGetInstanceProfile),
		op("DeleteInstanceProfile", s.iamDeleteInstanceProfile), op("AddRoleToInstanceProfile", s.iamAddRoleToInstanceProfile),
		op("RemoveRoleFromInstanceProfile", s.iamRemoveRoleFromInstanceProfile),
		op("TagInstanceProfile", s.iamTagInstanceProfile), op("UntagInstanceProfile", s.iamUntagInstanceProfile),
		op("ListInstanceProfileTags", s.iamListInstanceProfileTags), op("ListInstanceProfiles", s.iamListInstanceProfiles),
		op("ListInstanceProfilesForRole", s.iamListInstanceProfilesForRole),
		op("CreateServiceLinkedRole", s.iamCreateServiceLinkedRole),
		op("CreatePolicy", s.iamCreatePolicy), op("GetPolicy", s.iamGetPolicy), op("DeletePolicy", s.iamDeletePolicy),
		op("GetPolicyVersion", s.iamGetPolicyVersion), op("CreatePolicyVersion", s.iamCreatePolicyVersion),
		op("DeletePolicyVersion", s.iamDeletePolicyVersion), op("ListPolicyVersions", s.iamListPolicyVersions),
		op("ListPolicies", s.iamListPolicies),
	)
	return sv
}

var iamNameRE = regexp.MustCompile(`^[\w+=,.@-]+$`)

func iamValidateName(field, name string, max int) error {
	if name == "" {
		return apiErr(400, "ValidationError", "1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", field)
	}
	if len(name) > max || !iamNameRE.MatchString(name) {
		return apiErr(400, "ValidationError", "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+ and have length less than or equal to %d", name, field, max)
	}
	return nil
}

func iamPath(p *string) (string, error) {
	v := aws.ToString(p)
	if v == "" {
		return "/", nil
	}
	if !strings.HasPrefix(v, "/") || !strings.HasSuffix(v, "/") || len(v) > 512 {
		return "", apiErr(400, "ValidationError", "The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
	}
	return v, nil
}

// validatePolicyDocument checks a policy is a JSON object with a Statement, as IAM does.
func validatePolicyDocument(doc *string) error {
	if aws.ToString(doc) == "" {
		return apiErr(400, "ValidationError", "1 validation error detected: Value null at 'policyDocument' failed to satisfy constraint: Member must not be null")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(*doc), &m); err != nil {
		return apiErr(400, "MalformedPolicyDocument", "This policy contains invalid Json")
	}
	if _, ok := m["Statement"]; !ok {
		return apiErr(400, "MalformedPolicyDocument", "Syntax errors in policy.")
	}
	if v, ok := m["Version"]; ok && v != "2012-10-17" && v != "2008-10-17" {
		return apiErr(400, "MalformedPolicyDocument", "The policy must contain a valid version string")
	}
	return nil
}

// iamEncode is how IAM returns policy documents: URL-encoded (RFC 3986).
// policySize is a document's size as IAM's quotas count it: white space does not count.
func policySize(doc string) int {
	n := 0
	for _, r := range doc {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

func iamEncode(doc string) *string {
	return aws.String(strings.ReplaceAll(url.QueryEscape(doc), "+", "%20"))
}

func noSuchRole(name string) error {
	return apiErr(404, "NoSuchEntity", "The role with name %s cannot be found.", name)
}

func (s *Server) roleOut(r *iamRole, withTags bool) iamtypes.Role {
	out := iamtypes.Role{RoleName: aws.String(r.name), Path: aws.String(r.path), Arn: aws.String(r.arn), RoleId: aws.String(r.id),
		CreateDate: aws.Time(r.created), AssumeRolePolicyDocument: iamEncode(r.assume), Description: r.description,
		MaxSessionDuration: aws.Int32(r.maxSession)}
	if withTags && len(r.tags) > 0 {
		out.Tags = append([]iamtypes.Tag{}, r.tags...)
	}
	return out
}

func (s *Server) profileOut(p *iamProfile) iamtypes.InstanceProfile {
	out := iamtypes.InstanceProfile{InstanceProfileName: aws.String(p.name), Path: aws.String(p.path), Arn: aws.String(p.arn),
		InstanceProfileId: aws.String(p.id), CreateDate: aws.Time(p.created), Roles: []iamtypes.Role{}}
	for _, rn := range p.roles {
		if r := s.st.iam.roles[rn]; r != nil {
			out.Roles = append(out.Roles, s.roleOut(r, false))
		}
	}
	if len(p.tags) > 0 {
		out.Tags = append([]iamtypes.Tag{}, p.tags...)
	}
	return out
}

func iamSetTags(tags *[]iamtypes.Tag, add []iamtypes.Tag) error {
	for _, t := range add {
		k := aws.ToString(t.Key)
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return apiErr(400, "InvalidInput", "User-defined tag keys can't start with 'aws:'.")
		}
		found := false
		for i := range *tags {
			if aws.ToString((*tags)[i].Key) == k {
				(*tags)[i].Value = aws.String(aws.ToString(t.Value))
				found = true
			}
		}
		if !found {
			*tags = append(*tags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(aws.ToString(t.Value))})
		}
	}
	if len(*tags) > 50 {
		return apiErr(409, "LimitExceeded", "Cannot exceed quota for TagsPerRole: 50.")
	}
	sort.Slice(*tags, func(i, j int) bool { return aws.ToString((*tags)[i].Key) < aws.ToString((*tags)[j].Key) })
	return nil
}

func iamUntag(tags *[]iamtypes.Tag, keys []string) {
	kept := (*tags)[:0]
	for _, t := range *tags {
		if !contains(keys, aws.ToString(t.Key)) {
			kept = append(kept, t)
		}
	}
	*tags = kept
}

// iamPage paginates IAM lists with Marker/MaxItems (default 100).
func iamPage[T any](items []T, marker *string, maxItems *int32) ([]T, bool, *string, error) {
	off := 0
	if m := aws.ToString(marker); m != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(m, "m"))
		if err != nil || n < 0 || n > len(items) {
			return nil, false, nil, apiErr(400, "InvalidInput", "Invalid Marker.")
		}
		off = n
	}
	limit := 100
	if maxItems != nil && *maxItems > 0 {
		limit = int(*maxItems)
	}
	if off+limit >= len(items) {
		return items[off:], false, nil, nil
	}
	return items[off : off+limit], true, aws.String("m" + strconv.Itoa(off+limit)), nil
}

func (s *Server) iamCreateRole(rc *reqCtx, in *iam.CreateRoleInput) (any, error) {
	name := aws.ToString(in.RoleName)
	if err := iamValidateName("roleName", name, 64); err != nil {
		return nil, err
	}
	path, err := iamPath(in.Path)
	if err != nil {
		return nil, err
	}
	if err := validatePolicyDocument(in.AssumeRolePolicyDocument); err != nil {
		return nil, err
	}
	maxSession := int32(3600)
	if in.MaxSessionDuration != nil {
		if *in.MaxSessionDuration < 3600 || *in.MaxSessionDuration > 43200 {
			return nil, apiErr(400, "ValidationError", "1 validation error detected: Value '%d' at 'maxSessionDuration' failed to satisfy constraint: Member must have value between 3600 and 43200", *in.MaxSessionDuration)
		}
		maxSession = *in.MaxSessionDuration
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for existing := range s.st.iam.roles {
		if strings.EqualFold(existing, name) {
			return nil, apiErr(409, "EntityAlreadyExists", "Role with name %s already exists.", name)
		}
	}
	r := &iamRole{name: name, path: path, arn: fmt.Sprintf("arn:aws:iam::%s:role%s%s", s.opts.AccountID, path, name),
		id: s.st.ids.upperID("AROA"), created: rc.now.UTC().Truncate(time.Second), assume: *in.AssumeRolePolicyDocument,
		description: in.Description, maxSession: maxSession, inline: map[string]string{}}
	if err := iamSetTags(&r.tags, in.Tags); err != nil {
		return nil, err
	}
	s.st.iam.roles[name] = r
	return &iam.CreateRoleOutput{Role: ptrTo(s.roleOut(r, true))}, nil
}

func (s *Server) iamGetRole(rc *reqCtx, in *iam.GetRoleInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	out := s.roleOut(r, true)
	out.RoleLastUsed = &iamtypes.RoleLastUsed{}
	return &iam.GetRoleOutput{Role: &out}, nil
}

func (s *Server) iamDeleteRole(rc *reqCtx, in *iam.DeleteRoleInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := aws.ToString(in.RoleName)
	r := s.st.iam.roles[name]
	if r == nil {
		return nil, noSuchRole(name)
	}
	for _, p := range s.st.iam.profiles {
		if contains(p.roles, name) {
			return nil, apiErr(409, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
		}
	}
	if len(r.attached) > 0 {
		return nil, apiErr(409, "DeleteConflict", "Cannot delete entity, must detach all policies first.")
	}
	if len(r.inline) > 0 {
		return nil, apiErr(409, "DeleteConflict", "Cannot delete entity, must delete policies first.")
	}
	delete(s.st.iam.roles, name)
	return &iam.DeleteRoleOutput{}, nil
}

func (s *Server) iamListRoles(rc *reqCtx, in *iam.ListRolesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []iamtypes.Role
	for _, n := range sortedKeys(s.st.iam.roles) {
		r := s.st.iam.roles[n]
		if p := aws.ToString(in.PathPrefix); p != "" && !strings.HasPrefix(r.path, p) {
			continue
		}
		all = append(all, s.roleOut(r, false))
	}
	items, trunc, marker, err := iamPage(all, in.Marker, in.MaxItems)
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []iamtypes.Role{}
	}
	return &iam.ListRolesOutput{Roles: items, IsTruncated: trunc, Marker: marker}, nil
}

func (s *Server) iamTagRole(rc *reqCtx, in *iam.TagRoleInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	return &iam.TagRoleOutput{}, iamSetTags(&r.tags, in.Tags)
}

func (s *Server) iamUntagRole(rc *reqCtx, in *iam.UntagRoleInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	iamUntag(&r.tags, in.TagKeys)
	return &iam.UntagRoleOutput{}, nil
}

func (s *Server) iamListRoleTags(rc *reqCtx, in *iam.ListRoleTagsInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	items, trunc, marker, err := iamPage(append([]iamtypes.Tag{}, r.tags...), in.Marker, in.MaxItems)
	return &iam.ListRoleTagsOutput{Tags: items, IsTruncated: trunc, Marker: marker}, err
}

func (s *Server) iamUpdateAssumeRolePolicy(rc *reqCtx, in *iam.UpdateAssumeRolePolicyInput) (any, error) {
	if err := validatePolicyDocument(in.PolicyDocument); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	r.assume = *in.PolicyDocument
	return &iam.UpdateAssumeRolePolicyOutput{}, nil
}

func (s *Server) iamPutRolePolicy(rc *reqCtx, in *iam.PutRolePolicyInput) (any, error) {
	if err := iamValidateName("policyName", aws.ToString(in.PolicyName), 128); err != nil {
		return nil, err
	}
	if err := validatePolicyDocument(in.PolicyDocument); err != nil {
		return nil, err
	}
	if policySize(*in.PolicyDocument) > 10240 {
		return nil, apiErr(409, "LimitExceeded", "Maximum policy size of 10240 bytes exceeded for role %s", aws.ToString(in.RoleName))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	r.inline[*in.PolicyName] = *in.PolicyDocument
	return &iam.PutRolePolicyOutput{}, nil
}

func (s *Server) iamGetRolePolicy(rc *reqCtx, in *iam.GetRolePolicyInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	doc, ok := r.inline[aws.ToString(in.PolicyName)]
	if !ok {
		return nil, apiErr(404, "NoSuchEntity", "The role policy with name %s cannot be found.", aws.ToString(in.PolicyName))
	}
	return &iam.GetRolePolicyOutput{RoleName: aws.String(r.name), PolicyName: in.PolicyName, PolicyDocument: iamEncode(doc)}, nil
}

func (s *Server) iamDeleteRolePolicy(rc *reqCtx, in *iam.DeleteRolePolicyInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	if _, ok := r.inline[aws.ToString(in.PolicyName)]; !ok {
		return nil, apiErr(404, "NoSuchEntity", "The role policy with name %s cannot be found.", aws.ToString(in.PolicyName))
	}
	delete(r.inline, aws.ToString(in.PolicyName))
	return &iam.DeleteRolePolicyOutput{}, nil
}

func (s *Server) iamListRolePolicies(rc *reqCtx, in *iam.ListRolePoliciesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	items, trunc, marker, err := iamPage(sortedKeys(r.inline), in.Marker, in.MaxItems)
	if items == nil {
		items = []string{}
	}
	return &iam.ListRolePoliciesOutput{PolicyNames: items, IsTruncated: trunc, Marker: marker}, err
}

func (s *Server) iamAttachRolePolicy(rc *reqCtx, in *iam.AttachRolePolicyInput) (any, error) {
	arn := aws.ToString(in.PolicyArn)
	if !strings.HasPrefix(arn, "arn:aws:iam::") {
		return nil, apiErr(400, "InvalidInput", "ARN %s is not valid.", arn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	if s.st.iam.policies[arn] == nil {
		return nil, apiErr(404, "NoSuchEntity", "Policy %s does not exist or is not attachable.", arn)
	}
	if !contains(r.attached, arn) {
		if len(r.attached) >= 20 {
			return nil, apiErr(409, "LimitExceeded", "Cannot exceed quota for PoliciesPerRole: 20")
		}
		r.attached = append(r.attached, arn)
	}
	return &iam.AttachRolePolicyOutput{}, nil
}

func (s *Server) iamDetachRolePolicy(rc *reqCtx, in *iam.DetachRolePolicyInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	arn := aws.ToString(in.PolicyArn)
	i := indexOf(r.attached, arn)
	if i < 0 {
		return nil, apiErr(404, "NoSuchEntity", "Policy %s was not found.", arn)
	}
	r.attached = append(r.attached[:i], r.attached[i+1:]...)
	return &iam.DetachRolePolicyOutput{}, nil
}

func indexOf(list []string, v string) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

func (s *Server) iamListAttachedRolePolicies(rc *reqCtx, in *iam.ListAttachedRolePoliciesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	all := []iamtypes.AttachedPolicy{}
	for _, arn := range r.attached {
		p := s.st.iam.policies[arn]
		if p == nil {
			continue
		}
		if pp := aws.ToString(in.PathPrefix); pp != "" && !strings.HasPrefix(p.path, pp) {
			continue
		}
		all = append(all, iamtypes.AttachedPolicy{PolicyArn: aws.String(arn), PolicyName: aws.String(p.name)})
	}
	items, trunc, marker, err := iamPage(all, in.Marker, in.MaxItems)
	return &iam.ListAttachedRolePoliciesOutput{AttachedPolicies: items, IsTruncated: trunc, Marker: marker}, err
}

func noSuchProfile(name string) error {
	return apiErr(404, "NoSuchEntity", "Instance Profile %s cannot be found.", name)
}

func (s *Server) iamCreateInstanceProfile(rc *reqCtx, in *iam.CreateInstanceProfileInput) (any, error) {
	name := aws.ToString(in.InstanceProfileName)
	if err := iamValidateName("instanceProfileName", name, 128); err != nil {
		return nil, err
	}
	path, err := iamPath(in.Path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for existing := range s.st.iam.profiles {
		if strings.EqualFold(existing, name) {
			return nil, apiErr(409, "EntityAlreadyExists", "Instance Profile %s already exists.", name)
		}
	}
	p := &iamProfile{name: name, path: path, arn: fmt.Sprintf("arn:aws:iam::%s:instance-profile%s%s", s.opts.AccountID, path, name),
		id: s.st.ids.upperID("AIPA"), created: rc.now.UTC().Truncate(time.Second)}
	if err := iamSetTags(&p.tags, in.Tags); err != nil {
		return nil, err
	}
	s.st.iam.profiles[name] = p
	return &iam.CreateInstanceProfileOutput{InstanceProfile: ptrTo(s.profileOut(p))}, nil
}

func (s *Server) iamGetInstanceProfile(rc *reqCtx, in *iam.GetInstanceProfileInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.profiles[aws.ToString(in.InstanceProfileName)]
	if p == nil {
		return nil, noSuchProfile(aws.ToString(in.InstanceProfileName))
	}
	return &iam.GetInstanceProfileOutput{InstanceProfile: ptrTo(s.profileOut(p))}, nil
}

func (s *Server) iamDeleteInstanceProfile(rc *reqCtx, in *iam.DeleteInstanceProfileInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := aws.ToString(in.InstanceProfileName)
	p := s.st.iam.profiles[name]
	if p == nil {
		return nil, noSuchProfile(name)
	}
	if len(p.roles) > 0 {
		return nil, apiErr(409, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	delete(s.st.iam.profiles, name)
	return &iam.DeleteInstanceProfileOutput{}, nil
}

func (s *Server) iamAddRoleToInstanceProfile(rc *reqCtx, in *iam.AddRoleToInstanceProfileInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.profiles[aws.ToString(in.InstanceProfileName)]
	if p == nil {
		return nil, noSuchProfile(aws.ToString(in.InstanceProfileName))
	}
	r := s.st.iam.roles[aws.ToString(in.RoleName)]
	if r == nil {
		return nil, noSuchRole(aws.ToString(in.RoleName))
	}
	if len(p.roles) > 0 {
		return nil, apiErr(409, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	p.roles = append(p.roles, r.name)
	return &iam.AddRoleToInstanceProfileOutput{}, nil
}

func (s *Server) iamRemoveRoleFromInstanceProfile(rc *reqCtx, in *iam.RemoveRoleFromInstanceProfileInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.profiles[aws.ToString(in.InstanceProfileName)]
	if p == nil {
		return nil, noSuchProfile(aws.ToString(in.InstanceProfileName))
	}
	rn := aws.ToString(in.RoleName)
	if s.st.iam.roles[rn] == nil {
		return nil, noSuchRole(rn)
	}
	i := indexOf(p.roles, rn)
	if i < 0 {
		return nil, apiErr(404, "NoSuchEntity", "The role with name %s cannot be found in instance profile %s.", rn, p.name)
	}
	p.roles = append(p.roles[:i], p.roles[i+1:]...)
	return &iam.RemoveRoleFromInstanceProfileOutput{}, nil
}

func (s *Server) iamTagInstanceProfile(rc *reqCtx, in *iam.TagInstanceProfileInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.profiles[aws.ToString(in.InstanceProfileName)]
	if p == nil {
		return nil, noSuchProfile(aws.ToString(in.InstanceProfileName))
	}
	return &iam.TagInstanceProfileOutput{}, iamSetTags(&p.tags, in.Tags)
}

func (s *Server) iamUntagInstanceProfile(rc *reqCtx, in *iam.UntagInstanceProfileInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.profiles[aws.ToString(in.InstanceProfileName)]
	if p == nil {
		return nil, noSuchProfile(aws.ToString(in.InstanceProfileName))
	}
	iamUntag(&p.tags, in.TagKeys)
	return &iam.UntagInstanceProfileOutput{}, nil
}

func (s *Server) iamListInstanceProfileTags(rc *reqCtx, in *iam.ListInstanceProfileTagsInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.profiles[aws.ToString(in.InstanceProfileName)]
	if p == nil {
		return nil, noSuchProfile(aws.ToString(in.InstanceProfileName))
	}
	items, trunc, marker, err := iamPage(append([]iamtypes.Tag{}, p.tags...), in.Marker, in.MaxItems)
	return &iam.ListInstanceProfileTagsOutput{Tags: items, IsTruncated: trunc, Marker: marker}, err
}

func (s *Server) iamListInstanceProfiles(rc *reqCtx, in *iam.ListInstanceProfilesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := []iamtypes.InstanceProfile{}
	for _, n := range sortedKeys(s.st.iam.profiles) {
		p := s.st.iam.profiles[n]
		if pp := aws.ToString(in.PathPrefix); pp != "" && !strings.HasPrefix(p.path, pp) {
			continue
		}
		o := s.profileOut(p)
		o.Tags = nil
		all = append(all, o)
	}
	items, trunc, marker, err := iamPage(all, in.Marker, in.MaxItems)
	return &iam.ListInstanceProfilesOutput{InstanceProfiles: items, IsTruncated: trunc, Marker: marker}, err
}

func (s *Server) iamListInstanceProfilesForRole(rc *reqCtx, in *iam.ListInstanceProfilesForRoleInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := aws.ToString(in.RoleName)
	if s.st.iam.roles[rn] == nil {
		return nil, noSuchRole(rn)
	}
	all := []iamtypes.InstanceProfile{}
	for _, n := range sortedKeys(s.st.iam.profiles) {
		p := s.st.iam.profiles[n]
		if contains(p.roles, rn) {
			o := s.profileOut(p)
			o.Tags = nil
			all = append(all, o)
		}
	}
	items, trunc, marker, err := iamPage(all, in.Marker, in.MaxItems)
	return &iam.ListInstanceProfilesForRoleOutput{InstanceProfiles: items, IsTruncated: trunc, Marker: marker}, err
}

// serviceLinkedRoles names the roles CreateServiceLinkedRole makes per service principal.
var serviceLinkedRoles = map[string]string{
	"spot.amazonaws.com":                 "AWSServiceRoleForEC2Spot",
	"spotfleet.amazonaws.com":            "AWSServiceRoleForEC2SpotFleet",
	"ec2fleet.amazonaws.com":             "AWSServiceRoleForEC2Fleet",
	"eks.amazonaws.com":                  "AWSServiceRoleForAmazonEKS",
	"eks-nodegroup.amazonaws.com":        "AWSServiceRoleForAmazonEKSNodegroup",
	"autoscaling.amazonaws.com":          "AWSServiceRoleForAutoScaling",
	"elasticloadbalancing.amazonaws.com": "AWSServiceRoleForElasticLoadBalancing",
}

func (s *Server) iamCreateServiceLinkedRole(rc *reqCtx, in *iam.CreateServiceLinkedRoleInput) (any, error) {
	svc := aws.ToString(in.AWSServiceName)
	name, ok := serviceLinkedRoles[svc]
	if !ok {
		return nil, apiErr(400, "InvalidInput", "Invalid service name: %s", svc)
	}
	if suffix := aws.ToString(in.CustomSuffix); suffix != "" {
		name += "_" + suffix
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.iam.roles[name] != nil {
		return nil, apiErr(400, "InvalidInput", "Service role name %s has been taken in this account, please try a different suffix.", name)
	}
	path := "/aws-service-role/" + svc + "/"
	r := &iamRole{name: name, path: path, arn: fmt.Sprintf("arn:aws:iam::%s:role%s%s", s.opts.AccountID, path, name),
		id: s.st.ids.upperID("AROA"), created: rc.now.UTC().Truncate(time.Second), maxSession: 3600, inline: map[string]string{},
		assume:      fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["%s"]},"Action":["sts:AssumeRole"]}]}`, svc),
		description: in.Description}
	s.st.iam.roles[name] = r
	return &iam.CreateServiceLinkedRoleOutput{Role: ptrTo(s.roleOut(r, false))}, nil
}

// ---- customer managed policies ----

func (s *Server) policyOut(p *iamPolicy) iamtypes.Policy {
	attached := int32(0)
	for _, r := range s.st.iam.roles {
		if contains(r.attached, p.arn) {
			attached++
		}
	}
	out := iamtypes.Policy{PolicyName: aws.String(p.name), PolicyId: aws.String(p.id), Arn: aws.String(p.arn), Path: aws.String(p.path),
		DefaultVersionId: aws.String(p.defaultVersion), AttachmentCount: aws.Int32(attached), PermissionsBoundaryUsageCount: aws.Int32(0),
		IsAttachable: true, Description: p.description, CreateDate: aws.Time(p.created), UpdateDate: aws.Time(p.updated)}
	if len(p.tags) > 0 {
		out.Tags = append([]iamtypes.Tag{}, p.tags...)
	}
	return out
}

func noSuchPolicy(arn string) error {
	return apiErr(404, "NoSuchEntity", "Policy %s does not exist or is not attachable.", arn)
}

func (s *Server) iamCreatePolicy(rc *reqCtx, in *iam.CreatePolicyInput) (any, error) {
	name := aws.ToString(in.PolicyName)
	if err := iamValidateName("policyName", name, 128); err != nil {
		return nil, err
	}
	path, err := iamPath(in.Path)
	if err != nil {
		return nil, err
	}
	if err := validatePolicyDocument(in.PolicyDocument); err != nil {
		return nil, err
	}
	if policySize(*in.PolicyDocument) > 6144 {
		return nil, apiErr(409, "LimitExceeded", "Cannot exceed quota for PolicySize: 6144")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	arn := fmt.Sprintf("arn:aws:iam::%s:policy%s%s", s.opts.AccountID, path, name)
	for _, p := range s.st.iam.policies {
		if !p.awsManaged && strings.EqualFold(p.name, name) {
			return nil, apiErr(409, "EntityAlreadyExists", "A policy called %s already exists. Duplicate names are not allowed.", name)
		}
	}
	now := rc.now.UTC().Truncate(time.Second)
	p := &iamPolicy{name: name, path: path, arn: arn, id: s.st.ids.upperID("ANPA"), description: in.Description, created: now,
		updated: now, defaultVersion: "v1", nextVersion: 2, versions: []*iamPolicyVersion{{id: "v1", doc: *in.PolicyDocument, created: now}}}
	if err := iamSetTags(&p.tags, in.Tags); err != nil {
		return nil, err
	}
	s.st.iam.policies[arn] = p
	out := s.policyOut(p)
	return &iam.CreatePolicyOutput{Policy: &out}, nil
}

func (s *Server) iamGetPolicy(rc *reqCtx, in *iam.GetPolicyInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.policies[aws.ToString(in.PolicyArn)]
	if p == nil {
		return nil, noSuchPolicy(aws.ToString(in.PolicyArn))
	}
	out := s.policyOut(p)
	return &iam.GetPolicyOutput{Policy: &out}, nil
}

func (s *Server) iamDeletePolicy(rc *reqCtx, in *iam.DeletePolicyInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	arn := aws.ToString(in.PolicyArn)
	p := s.st.iam.policies[arn]
	if p == nil {
		return nil, noSuchPolicy(arn)
	}
	if p.awsManaged {
		return nil, apiErr(400, "InvalidInput", "Cannot delete an AWS managed policy.")
	}
	if aws.ToInt32(s.policyOut(p).AttachmentCount) > 0 {
		return nil, apiErr(409, "DeleteConflict", "Cannot delete a policy attached to entities.")
	}
	if len(p.versions) > 1 {
		return nil, apiErr(409, "DeleteConflict", "This policy has more than one version. Before you delete a policy, you must delete the policy's versions. The default version is deleted with the policy.")
	}
	delete(s.st.iam.policies, arn)
	return &iam.DeletePolicyOutput{}, nil
}

func (p *iamPolicy) version(id string) *iamPolicyVersion {
	for _, v := range p.versions {
		if v.id == id {
			return v
		}
	}
	return nil
}

func (s *Server) policyVersionOut(p *iamPolicy, v *iamPolicyVersion, withDoc bool) iamtypes.PolicyVersion {
	out := iamtypes.PolicyVersion{VersionId: aws.String(v.id), IsDefaultVersion: v.id == p.defaultVersion, CreateDate: aws.Time(v.created)}
	if withDoc {
		out.Document = iamEncode(v.doc)
	}
	return out
}

func (s *Server) iamGetPolicyVersion(rc *reqCtx, in *iam.GetPolicyVersionInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.policies[aws.ToString(in.PolicyArn)]
	if p == nil {
		return nil, noSuchPolicy(aws.ToString(in.PolicyArn))
	}
	v := p.version(aws.ToString(in.VersionId))
	if v == nil {
		return nil, apiErr(404, "NoSuchEntity", "Policy %s version %s does not exist or is not attachable.", p.arn, aws.ToString(in.VersionId))
	}
	out := s.policyVersionOut(p, v, true)
	return &iam.GetPolicyVersionOutput{PolicyVersion: &out}, nil
}

func (s *Server) iamCreatePolicyVersion(rc *reqCtx, in *iam.CreatePolicyVersionInput) (any, error) {
	if err := validatePolicyDocument(in.PolicyDocument); err != nil {
		return nil, err
	}
	if policySize(*in.PolicyDocument) > 6144 {
		return nil, apiErr(409, "LimitExceeded", "Cannot exceed quota for PolicySize: 6144")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.policies[aws.ToString(in.PolicyArn)]
	if p == nil {
		return nil, noSuchPolicy(aws.ToString(in.PolicyArn))
	}
	if p.awsManaged {
		return nil, apiErr(400, "InvalidInput", "Cannot modify an AWS managed policy.")
	}
	if len(p.versions) >= 5 {
		return nil, apiErr(409, "LimitExceeded", "A managed policy can have up to 5 versions. Before you create a new version, you must delete an existing version.")
	}
	now := rc.now.UTC().Truncate(time.Second)
	v := &iamPolicyVersion{id: fmt.Sprintf("v%d", p.nextVersion), doc: *in.PolicyDocument, created: now}
	p.nextVersion++
	p.versions = append(p.versions, v)
	if in.SetAsDefault {
		p.defaultVersion = v.id
		p.updated = now
	}
	out := s.policyVersionOut(p, v, false)
	return &iam.CreatePolicyVersionOutput{PolicyVersion: &out}, nil
}

func (s *Server) iamDeletePolicyVersion(rc *reqCtx, in *iam.DeletePolicyVersionInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.policies[aws.ToString(in.PolicyArn)]
	if p == nil {
		return nil, noSuchPolicy(aws.ToString(in.PolicyArn))
	}
	id := aws.ToString(in.VersionId)
	if p.version(id) == nil {
		return nil, apiErr(404, "NoSuchEntity", "Policy %s version %s does not exist or is not attachable.", p.arn, id)
	}
	if id == p.defaultVersion {
		return nil, apiErr(409, "DeleteConflict", "Cannot delete the default version of a policy.")
	}
	kept := p.versions[:0]
	for _, v := range p.versions {
		if v.id != id {
			kept = append(kept, v)
		}
	}
	p.versions = kept
	return &iam.DeletePolicyVersionOutput{}, nil
}

func (s *Server) iamListPolicyVersions(rc *reqCtx, in *iam.ListPolicyVersionsInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.iam.policies[aws.ToString(in.PolicyArn)]
	if p == nil {
		return nil, noSuchPolicy(aws.ToString(in.PolicyArn))
	}
	var all []iamtypes.PolicyVersion
	for i := len(p.versions) - 1; i >= 0; i-- {
		all = append(all, s.policyVersionOut(p, p.versions[i], false))
	}
	items, trunc, marker, err := iamPage(all, in.Marker, in.MaxItems)
	return &iam.ListPolicyVersionsOutput{Versions: items, IsTruncated: trunc, Marker: marker}, err
}

func (s *Server) iamListPolicies(rc *reqCtx, in *iam.ListPoliciesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := []iamtypes.Policy{}
	for _, arn := range sortedKeys(s.st.iam.policies) {
		p := s.st.iam.policies[arn]
		switch in.Scope {
		case iamtypes.PolicyScopeTypeAws:
			if !p.awsManaged {
				continue
			}
		case iamtypes.PolicyScopeTypeLocal:
			if p.awsManaged {
				continue
			}
		}
		if pp := aws.ToString(in.PathPrefix); pp != "" && !strings.HasPrefix(p.path, pp) {
			continue
		}
		o := s.policyOut(p)
		if in.OnlyAttached && aws.ToInt32(o.AttachmentCount) == 0 {
			continue
		}
		o.Tags = nil
		all = append(all, o)
	}
	items, trunc, marker, err := iamPage(all, in.Marker, in.MaxItems)
	return &iam.ListPoliciesOutput{Policies: items, IsTruncated: trunc, Marker: marker}, err
}
