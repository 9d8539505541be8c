package ensure

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awstags"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/internal/iampolicy"
)

const (
	kindRole    = "IAM role"
	kindPolicy  = "IAM policy"
	kindProfile = "IAM instance profile"
)

func (e *ensurer) nodeRoles(ctx context.Context) error {
	for _, role := range e.r.NodeRoles {
		if err := e.role(ctx, role); err != nil {
			return err
		}
	}
	return nil
}

func (e *ensurer) controllerRole(ctx context.Context) error { return e.role(ctx, e.r.ControllerRole) }

// role creates a role with its trust policy and managed policies, or corrects an owned one.
func (e *ensurer) role(ctx context.Context, want prereq.Role) error {
	out, err := e.c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(want.Name)})
	if awserr.Code(err) == "NoSuchEntity" {
		if !e.change(Create, kindRole, want.Name) {
			return nil
		}
		if _, err := e.c.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(want.Name), Path: aws.String(want.Path),
			AssumeRolePolicyDocument: aws.String(want.Trust.JSON()), Tags: awstags.IAM(want.Tags)}); err != nil {
			return failed("creating IAM role "+want.Name, err)
		}
		for _, arn := range want.ManagedPolicyARNs {
			if _, err := e.c.IAM.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(want.Name), PolicyArn: aws.String(arn)}); err != nil {
				return failed("attaching "+arn+" to IAM role "+want.Name, err)
			}
		}
		return nil
	}
	if err != nil {
		return failed("reading IAM role "+want.Name, err)
	}
	if path := aws.ToString(out.Role.Path); path != want.Path {
		// The controller policy lets the controller pass the role at the path named only.
		e.change(Keep, kindRole, want.Name, fmt.Sprintf("path %s, not %s as named: IAM cannot move a role; name it with its path (%s%s) wherever it is named", path, want.Path, strings.TrimPrefix(path, "/"), want.Name))
	}
	diffs := documentDiff("trust policy: ", aws.ToString(out.Role.AssumeRolePolicyDocument), want.Trust)
	trustChanged := len(diffs) > 0
	attached, err := e.attached(ctx, want.Name)
	if err != nil {
		return err
	}
	missing, extra := setDiff(want.ManagedPolicyARNs, attached)
	for _, arn := range missing {
		diffs = append(diffs, "+ attach "+arn)
	}
	for _, arn := range extra {
		diffs = append(diffs, "- detach "+arn)
	}
	if len(diffs) == 0 {
		return nil
	}
	if !e.owned(awstags.FromIAM(out.Role.Tags)) {
		e.notOwned(kindRole, want.Name, diffs)
		return nil
	}
	if !e.change(Update, kindRole, want.Name, diffs...) {
		return nil
	}
	if trustChanged {
		if _, err := e.c.IAM.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(want.Name), PolicyDocument: aws.String(want.Trust.JSON())}); err != nil {
			return failed("updating the trust policy of IAM role "+want.Name, err)
		}
	}
	for _, arn := range missing {
		if _, err := e.c.IAM.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(want.Name), PolicyArn: aws.String(arn)}); err != nil {
			return failed("attaching "+arn+" to IAM role "+want.Name, err)
		}
	}
	for _, arn := range extra {
		if _, err := e.c.IAM.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(want.Name), PolicyArn: aws.String(arn)}); err != nil {
			return failed("detaching "+arn+" from IAM role "+want.Name, err)
		}
	}
	return nil
}

func (e *ensurer) attached(ctx context.Context, role string) ([]string, error) {
	var arns []string
	p := iam.NewListAttachedRolePoliciesPaginator(e.c.IAM, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(role)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, failed("listing the policies of IAM role "+role, err)
		}
		for _, ap := range page.AttachedPolicies {
			arns = append(arns, aws.ToString(ap.PolicyArn))
		}
	}
	return arns, nil
}

// controllerPolicies creates each of the controller's policies, or makes its document the
// default version.
func (e *ensurer) controllerPolicies(ctx context.Context) error {
	for i, want := range e.r.ControllerPolicies {
		if err := e.controllerPolicy(ctx, want, e.r.ControllerRole.ManagedPolicyARNs[i]); err != nil {
			return err
		}
	}
	return nil
}

// controllerPolicy creates the policy, or makes its document the default version.
func (e *ensurer) controllerPolicy(ctx context.Context, want prereq.Policy, arn string) error {
	out, err := e.c.IAM.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(arn)})
	if awserr.Code(err) == "NoSuchEntity" {
		if !e.change(Create, kindPolicy, want.Name) {
			return nil
		}
		_, err := e.c.IAM.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String(want.Name), PolicyDocument: aws.String(want.Document.JSON()), Tags: awstags.IAM(want.Tags)})
		if err != nil {
			return failed("creating IAM policy "+want.Name, err)
		}
		return nil
	}
	if err != nil {
		return failed("reading IAM policy "+want.Name, err)
	}
	v, err := e.c.IAM.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String(arn), VersionId: out.Policy.DefaultVersionId})
	if err != nil {
		return failed("reading the document of IAM policy "+want.Name, err)
	}
	diffs := documentDiff("", aws.ToString(v.PolicyVersion.Document), want.Document)
	if len(diffs) == 0 {
		return nil
	}
	if !e.owned(awstags.FromIAM(out.Policy.Tags)) {
		e.notOwned(kindPolicy, want.Name, diffs)
		return nil
	}
	if !e.change(Update, kindPolicy, want.Name, append([]string{"a new default version of the document:"}, diffs...)...) {
		return nil
	}
	if err := e.makeRoomForVersion(ctx, arn); err != nil {
		return err
	}
	if _, err := e.c.IAM.CreatePolicyVersion(ctx, &iam.CreatePolicyVersionInput{PolicyArn: aws.String(arn),
		PolicyDocument: aws.String(want.Document.JSON()), SetAsDefault: true}); err != nil {
		return failed("updating IAM policy "+want.Name, err)
	}
	return nil
}

// makeRoomForVersion deletes the oldest non-default version when the policy has IAM's five.
func (e *ensurer) makeRoomForVersion(ctx context.Context, arn string) error {
	out, err := e.c.IAM.ListPolicyVersions(ctx, &iam.ListPolicyVersionsInput{PolicyArn: aws.String(arn)})
	if err != nil {
		return failed("listing the versions of "+arn, err)
	}
	if len(out.Versions) < 5 {
		return nil
	}
	var oldest *iamtypes.PolicyVersion
	for i, v := range out.Versions {
		if !v.IsDefaultVersion && (oldest == nil || aws.ToTime(v.CreateDate).Before(aws.ToTime(oldest.CreateDate))) {
			oldest = &out.Versions[i]
		}
	}
	if oldest == nil {
		return nil
	}
	_, err = e.c.IAM.DeletePolicyVersion(ctx, &iam.DeletePolicyVersionInput{PolicyArn: aws.String(arn), VersionId: oldest.VersionId})
	if err != nil {
		return failed("deleting the oldest version of "+arn, err)
	}
	return nil
}

// ownedProfile: karpool's own tag, or the tags the controller gives the profiles it makes.
func (e *ensurer) ownedProfile(tags map[string]string) bool {
	return e.owned(tags) || tags[prereq.ClusterOwnedTag(e.s.ClusterName)] == "owned" && tags[prereq.TagRegion] == e.s.Region && tags[prereq.TagNodeClass] != ""
}

func (e *ensurer) instanceProfiles(ctx context.Context) error {
	for _, want := range e.r.InstanceProfiles {
		out, err := e.c.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(want.Name)})
		if awserr.Code(err) == "NoSuchEntity" {
			if !e.change(Create, kindProfile, want.Name, "role "+want.Role, "for EC2NodeClass "+want.NodeClass) {
				continue
			}
			if _, err := e.c.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(want.Name), Tags: awstags.IAM(want.Tags)}); err != nil {
				return failed("creating IAM instance profile "+want.Name, err)
			}
			if _, err := e.c.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(want.Name), RoleName: aws.String(want.Role)}); err != nil {
				return failed("adding role "+want.Role+" to IAM instance profile "+want.Name, err)
			}
			continue
		}
		if err != nil {
			return failed("reading IAM instance profile "+want.Name, err)
		}
		var roles []string
		for _, r := range out.InstanceProfile.Roles {
			roles = append(roles, aws.ToString(r.RoleName))
		}
		if slices.Equal(roles, []string{want.Role}) {
			continue
		}
		diff := fmt.Sprintf("role: %s → %s", strings.Join(roles, ", "), want.Role)
		if !e.ownedProfile(awstags.FromIAM(out.InstanceProfile.Tags)) {
			e.notOwned(kindProfile, want.Name, []string{diff})
			continue
		}
		if !e.change(Update, kindProfile, want.Name, diff) {
			continue
		}
		if err := e.emptyProfile(ctx, want.Name, roles); err != nil {
			return err
		}
		if _, err := e.c.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(want.Name), RoleName: aws.String(want.Role)}); err != nil {
			return failed("adding role "+want.Role+" to IAM instance profile "+want.Name, err)
		}
	}
	return nil
}

func (e *ensurer) emptyProfile(ctx context.Context, name string, roles []string) error {
	for _, r := range roles {
		if _, err := e.c.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(r)}); err != nil {
			return failed("removing role "+r+" from IAM instance profile "+name, err)
		}
	}
	return nil
}

// pruneInstanceProfiles deletes the cluster's profiles (by name: <cluster>_<hash>) of classes
// that are gone.
func (e *ensurer) pruneInstanceProfiles(ctx context.Context) error {
	want := map[string]bool{}
	for _, p := range e.r.InstanceProfiles {
		want[p.Name] = true
	}
	p := iam.NewListInstanceProfilesPaginator(e.c.IAM, &iam.ListInstanceProfilesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return failed("listing IAM instance profiles", err)
		}
		for _, ip := range page.InstanceProfiles {
			name := aws.ToString(ip.InstanceProfileName)
			if want[name] || !strings.HasPrefix(name, e.s.ClusterName+"_") {
				continue
			}
			// The listing has no tags.
			out, err := e.c.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
			if err != nil {
				return failed("reading IAM instance profile "+name, err)
			}
			if !e.ownedProfile(awstags.FromIAM(out.InstanceProfile.Tags)) || !e.change(Delete, kindProfile, name, "its EC2NodeClass is gone") {
				continue
			}
			var roles []string
			for _, r := range out.InstanceProfile.Roles {
				roles = append(roles, aws.ToString(r.RoleName))
			}
			if err := e.emptyProfile(ctx, name, roles); err != nil {
				return err
			}
			if _, err := e.c.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
				return failed("deleting IAM instance profile "+name, err)
			}
		}
	}
	return nil
}

// serviceLinkedRoles creates the spot service-linked role when the account has none.
func (e *ensurer) serviceLinkedRoles(ctx context.Context) error {
	for _, svc := range e.r.ServiceLinkedRoles {
		name := "AWSServiceRoleForEC2Spot"
		if svc != "spot.amazonaws.com" {
			return fmt.Errorf("service-linked role for %s: karpool knows only spot.amazonaws.com", svc)
		}
		_, err := e.c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if awserr.Code(err) != "NoSuchEntity" {
			if err != nil {
				return failed("reading IAM role "+name, err)
			}
			continue
		}
		if !e.change(Create, "IAM service-linked role", name, "for "+svc) {
			continue
		}
		if _, err := e.c.IAM.CreateServiceLinkedRole(ctx, &iam.CreateServiceLinkedRoleInput{AWSServiceName: aws.String(svc)}); err != nil && awserr.Code(err) != "InvalidInput" {
			return failed("creating the service-linked role for "+svc, err)
		}
	}
	return nil
}

// documentDiff compares a policy document as IAM returns it (URL-encoded) with the desired one:
// nothing when they are equal, else what differs, each line prefixed; a document karpool cannot
// read differs as a whole.
func documentDiff(prefix, encoded string, want iampolicy.Document) []string {
	text, err := url.QueryUnescape(encoded)
	if err != nil {
		text = encoded
	}
	have, err := iampolicy.Parse(text)
	switch {
	case err != nil:
		return []string{prefix + "replaced (the current one does not parse: " + err.Error() + ")"}
	case iampolicy.Equal(have, want):
		return nil
	}
	lines := iampolicy.Diff(have, want)
	if len(lines) == 0 {
		lines = []string{"Version " + have.Version + " → " + want.Version}
	}
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return lines
}

// setDiff returns what want has and have lacks, and what have has beyond want.
func setDiff(want, have []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	for _, h := range have {
		if !slices.Contains(want, h) {
			extra = append(extra, h)
		}
	}
	return missing, extra
}
