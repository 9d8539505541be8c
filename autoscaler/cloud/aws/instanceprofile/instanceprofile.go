// Package instanceprofile manages the IAM instance profile of each EC2NodeClass with spec.role:
// created with the class's name-derived name and this cluster's ownership tags, kept holding the
// class's role, deleted with the class. The EC2NodeClass controller is its one writer; a launch
// only reads the profile the controller recorded in the class's status.
package instanceprofile

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awstags"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
)

// ErrNotOwned is matched by errors about an instance profile that has karpool's name for a
// class but not its ownership tags: karpool leaves such a profile alone. They match
// awserr.ErrInvalidClass too.
var ErrNotOwned = errors.New("instance profile is not owned by this cluster")

// Provider manages the instance profiles of one cluster in one region.
type Provider struct {
	iam             *iam.Client
	cluster, region string
}

// New returns the provider of the cluster's instance profiles in region.
func New(client *iam.Client, cluster, region string) *Provider {
	return &Provider{iam: client, cluster: cluster, region: region}
}

// Name is the name of the instance profile karpool manages for an EC2NodeClass with spec.role
// (prereq.InstanceProfileName, which the AWS prerequisites render too).
func (p *Provider) Name(class string) string {
	return prereq.InstanceProfileName(p.cluster, p.region, class)
}

// owned reports whether a profile carries the tags that make it this cluster's: the controller
// policy only lets karpool change profiles tagged so.
func (p *Provider) owned(tags []iamtypes.Tag) bool {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m[prereq.ClusterOwnedTag(p.cluster)] == "owned" && m[corev1.LabelTopologyRegion] == p.region && m[awsv1.LabelNodeClass] != ""
}

// roleName strips an IAM path from spec.role ("path/to/Role" → "Role"):
// AddRoleToInstanceProfile takes the bare name.
func roleName(role string) string {
	return role[strings.LastIndex(role, "/")+1:]
}

// Ensure returns the instance profile nodes of the class launch with. With
// spec.instanceProfile it checks that the profile exists. With spec.role it creates the profile
// named Name(class) when missing (tagged kubernetes.io/cluster/<cluster>=owned,
// eks:eks-cluster-name, topology.kubernetes.io/region and karpenter.k8s.aws/ec2nodeclass, plus
// the class's tags), adds the tags the class gained since, and puts the role in it, replacing
// another role. Calling it again is cheap when nothing changed (one GetInstanceProfile).
func (p *Provider) Ensure(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if name := aws.ToString(nc.Spec.InstanceProfile); name != "" {
		_, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
		if awserr.Code(err) == "NoSuchEntity" {
			return "", awserr.Invalidf("EC2NodeClass %s: spec.instanceProfile: instance profile %q does not exist; create it (with the node role in it) or set spec.role instead", nc.Name, name)
		}
		if err != nil {
			return "", fmt.Errorf("EC2NodeClass %s: reading instance profile %q: %w", nc.Name, name, err)
		}
		return name, nil
	}
	if nc.Spec.Role == "" {
		return "", awserr.Invalidf("EC2NodeClass %s: set spec.role (karpool then manages an instance profile) or spec.instanceProfile", nc.Name)
	}
	name := p.Name(nc.Name)
	want := prereq.InstanceProfileTags(p.cluster, p.region, nc.Name, nc.Spec.Tags)
	role := roleName(nc.Spec.Role)

	var profile *iamtypes.InstanceProfile
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	switch {
	case err == nil:
		profile = out.InstanceProfile
	case awserr.Code(err) == "NoSuchEntity":
		created, cerr := p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: awstags.IAM(want)})
		switch {
		case cerr == nil:
			profile = created.InstanceProfile
		case awserr.Code(cerr) == "EntityAlreadyExists":
			// Another replica created it in between.
			if out, err = p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
				return "", fmt.Errorf("EC2NodeClass %s: reading instance profile %s: %w", nc.Name, name, err)
			}
			profile = out.InstanceProfile
		default:
			return "", fmt.Errorf("EC2NodeClass %s: creating instance profile %s: %w", nc.Name, name, cerr)
		}
	default:
		return "", fmt.Errorf("EC2NodeClass %s: reading instance profile %s: %w", nc.Name, name, err)
	}
	if !p.owned(profile.Tags) {
		return "", awserr.InvalidAlso(ErrNotOwned, "EC2NodeClass %s: instance profile %s exists but is not tagged %s=owned, %s=%s and %s; karpool changes only profiles it created: delete it or set spec.instanceProfile",
			nc.Name, name, prereq.ClusterOwnedTag(p.cluster), corev1.LabelTopologyRegion, p.region, awsv1.LabelNodeClass)
	}
	have := map[string]string{}
	for _, t := range profile.Tags {
		have[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	missing := false
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			missing = true
		}
	}
	if missing {
		if _, err := p.iam.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: awstags.IAM(want)}); err != nil {
			return "", fmt.Errorf("EC2NodeClass %s: tagging instance profile %s: %w", nc.Name, name, err)
		}
	}
	// A profile holds at most one role.
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			return name, nil
		}
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && awserr.Code(err) != "NoSuchEntity" {
			return "", fmt.Errorf("EC2NodeClass %s: removing the previous role %s from instance profile %s: %w", nc.Name, aws.ToString(r.RoleName), name, err)
		}
	}
	_, err = p.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	switch {
	case err == nil:
	case awserr.Code(err) == "NoSuchEntity":
		return "", awserr.Invalidf("EC2NodeClass %s: spec.role: IAM role %q does not exist; create the node role (for example KarpenterNodeRole-%s) or fix the name", nc.Name, role, p.cluster)
	case awserr.Code(err) == "LimitExceeded":
		// Another replica added a role in between; the next call sees which.
		return "", fmt.Errorf("EC2NodeClass %s: instance profile %s changed while adding role %s, retry: %w", nc.Name, name, role, err)
	default:
		return "", fmt.Errorf("EC2NodeClass %s: adding role %s to instance profile %s: %w", nc.Name, role, name, err)
	}
	return name, nil
}

// Delete deletes the instance profile karpool created for the class (removing
// its role first). A profile that does not exist, or that lacks this cluster's ownership tags,
// is left alone without error. Call it once no instance uses the profile any more.
func (p *Provider) Delete(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	name := p.Name(nc.Name)
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if awserr.Code(err) == "NoSuchEntity" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("EC2NodeClass %s: reading instance profile %s: %w", nc.Name, name, err)
	}
	if !p.owned(out.InstanceProfile.Tags) {
		return nil
	}
	for _, r := range out.InstanceProfile.Roles {
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && awserr.Code(err) != "NoSuchEntity" {
			return fmt.Errorf("EC2NodeClass %s: removing role %s from instance profile %s: %w", nc.Name, aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && awserr.Code(err) != "NoSuchEntity" {
		return fmt.Errorf("EC2NodeClass %s: deleting instance profile %s: %w", nc.Name, name, err)
	}
	return nil
}
