// Package amifamily resolves an EC2NodeClass's spec.amiSelectorTerms to the newest image per
// architecture: aliases through the SSM parameters EKS and Bottlerocket publish, ids, names,
// owners, tags and SSM parameters through EC2 DescribeImages.
package amifamily

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/ec2filter"
)

// Image is a resolved AMI.
type Image struct {
	ID, Name string
	// Arch is the Kubernetes architecture (amd64, arm64).
	Arch    string
	Created string
	// Deprecated is true once EC2's deprecation time of the image has passed.
	Deprecated bool
}

// Provider resolves the images of a cluster's classes.
type Provider struct {
	ec2 *ec2.Client
	ssm *ssm.Client
	now func() time.Time
}

// New returns the provider; now says when an image's deprecation time has passed.
func New(ec2Client *ec2.Client, ssmClient *ssm.Client, now func() time.Time) *Provider {
	return &Provider{ec2: ec2Client, ssm: ssmClient, now: now}
}

// eksArch maps Kubernetes architectures to the directory names of the EKS AMI parameters.
var eksArch = map[string]string{"amd64": "x86_64", "arm64": "arm64"}

// AliasParameters returns the SSM parameters holding the AMI ids an alias term selects, one per
// architecture, for the standard (non-accelerated) variant of each family, as Karpenter reads
// them: AL2023 and AL2 from EKS's optimized-ami tree (al2023@latest / al2@latest read the
// "recommended" release, al2023@vYYYYMMDD / al2@vYYYYMMDD a pinned one), Bottlerocket from its
// own tree (bottlerocket@latest, bottlerocket@vX.Y.Z or X.Y.Z).
func AliasParameters(alias, k8sVersion string) ([]string, error) {
	family, version, _ := strings.Cut(alias, "@")
	latest := version == "" || version == awsv1.AliasVersionLatest
	var out []string
	switch strings.ToLower(family) {
	case awsv1.AliasFamilyAL2023:
		for _, arch := range []string{"amd64", "arm64"} {
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/standard", k8sVersion, eksArch[arch])
			if latest {
				out = append(out, base+"/recommended/image_id")
			} else {
				out = append(out, fmt.Sprintf("%s/amazon-eks-node-al2023-%s-standard-%s-%s/image_id", base, eksArch[arch], k8sVersion, version))
			}
		}
	case awsv1.AliasFamilyAL2:
		for _, d := range []struct{ dir, prefix string }{{"amazon-linux-2", "amazon-eks-node"}, {"amazon-linux-2-arm64", "amazon-eks-arm64-node"}} {
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s", k8sVersion, d.dir)
			if latest {
				out = append(out, base+"/recommended/image_id")
			} else {
				out = append(out, fmt.Sprintf("%s/%s-%s-%s/image_id", base, d.prefix, k8sVersion, version))
			}
		}
	case awsv1.AliasFamilyBottlerocket:
		// Bottlerocket releases are tagged vX.Y.Z on GitHub; the parameter path has no "v".
		v := strings.TrimPrefix(version, "v")
		if latest {
			v = awsv1.AliasVersionLatest
		}
		for _, arch := range []string{"amd64", "arm64"} {
			out = append(out, fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/%s/%s/image_id", k8sVersion, eksArch[arch], v))
		}
	default:
		return nil, awserr.Invalidf("alias %q: karpool launches al2023, al2 and bottlerocket aliases (Windows is not supported); select the AMI by id, name or tags otherwise", alias)
	}
	return out, nil
}

// List resolves spec.amiSelectorTerms to the newest image per architecture (the term order
// does not matter, as in Karpenter). Sorted by architecture.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) ([]Image, error) {
	var found []ec2types.Image
	for i, t := range nc.Spec.AMISelectorTerms {
		field := fmt.Sprintf("EC2NodeClass %s: spec.amiSelectorTerms[%d]", nc.Name, i)
		var params []string
		switch {
		case t.Alias != "":
			ps, err := AliasParameters(t.Alias, k8sVersion)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", field, err)
			}
			params = ps
		case t.SSMParameter != "":
			params = []string{t.SSMParameter}
		}
		in := &ec2.DescribeImagesInput{Filters: ec2filter.Tags(t.Tags)}
		for _, name := range params {
			out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
			if err != nil {
				if t.Alias != "" && awserr.Code(err) == "ParameterNotFound" {
					// EKS does not publish every architecture for every release.
					continue
				}
				if t.SSMParameter != "" && awserr.Code(err) == "ParameterNotFound" {
					return nil, awserr.Invalidf("%s: SSM parameter %s does not exist; fix ssmParameter", field, name)
				}
				return nil, fmt.Errorf("%s: reading SSM parameter %s: %w", field, name, err)
			}
			in.ImageIds = append(in.ImageIds, aws.ToString(out.Parameter.Value))
		}
		if len(params) > 0 && len(in.ImageIds) == 0 {
			hint := "check the version"
			if fam, _, _ := strings.Cut(strings.ToLower(t.Alias), "@"); fam == awsv1.AliasFamilyAL2 {
				hint = "EKS publishes AL2 AMIs up to Kubernetes 1.32; use al2023@latest on newer clusters"
			}
			return nil, awserr.Invalidf("%s: no AMI published for %q (Kubernetes %s); %s", field, t.Alias, k8sVersion, hint)
		}
		if t.ID != "" {
			in.ImageIds = append(in.ImageIds, t.ID)
		}
		if t.Name != "" {
			in.Filters = append(in.Filters, ec2filter.New("name", t.Name))
		}
		if t.Owner != "" {
			in.Owners = []string{t.Owner}
		} else if t.Name != "" && t.ID == "" {
			// A bare name could match anyone's public image; Karpenter restricts it to self
			// and Amazon the same way.
			in.Owners = []string{"self", "amazon"}
		}
		if len(in.ImageIds) == 0 && len(in.Filters) == 0 {
			return nil, awserr.Invalidf("%s: the term selects nothing; give an alias, id, name, tags or ssmParameter", field)
		}
		pg := ec2.NewDescribeImagesPaginator(p.ec2, in)
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", field, err)
			}
			found = append(found, page.Images...)
		}
	}
	best := map[string]Image{}
	for _, im := range found {
		arch := ""
		switch im.Architecture {
		case ec2types.ArchitectureValuesX8664:
			arch = "amd64"
		case ec2types.ArchitectureValuesArm64:
			arch = "arm64"
		default:
			continue
		}
		cand := Image{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch, Created: aws.ToString(im.CreationDate)}
		if t, err := time.Parse(time.RFC3339, aws.ToString(im.DeprecationTime)); err == nil && !p.now().Before(t) {
			cand.Deprecated = true
		}
		cur, ok := best[arch]
		if !ok || cand.Created > cur.Created || (cand.Created == cur.Created && cand.ID > cur.ID) {
			best[arch] = cand
		}
	}
	if len(best) == 0 {
		return nil, awserr.Invalidf("EC2NodeClass %s: spec.amiSelectorTerms match no x86_64 or arm64 image; check the ids, names, tags and owners", nc.Name)
	}
	out := make([]Image, 0, len(best))
	for _, im := range best {
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b Image) int { return cmp.Compare(a.Arch, b.Arch) })
	return out, nil
}
