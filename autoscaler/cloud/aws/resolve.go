package aws

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
)

// subnet is a resolved subnet.
type subnet struct {
	ID, Zone, ZoneID string
	// FreeIPs is the subnet's available IPv4 address count; launches prefer the emptiest subnet
	// of a zone.
	FreeIPs int32
}

// securityGroup is a resolved security group.
type securityGroup struct{ ID, Name string }

// image is a resolved AMI.
type image struct {
	ID, Name string
	// Arch is the Kubernetes architecture (amd64, arm64).
	Arch    string
	Created string
	// Deprecated is true once EC2's deprecation time of the image has passed.
	Deprecated bool
}

// tagFilters turns a selector term's tags into EC2 filters; "*" matches any value of the key.
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Filter, 0, len(keys))
	for _, k := range keys {
		if v := tags[k]; v == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return out
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// subnets resolves spec.subnetSelectorTerms: one DescribeSubnets per term (terms are ORed, the
// fields of a term ANDed), sorted by zone then id.
func (p *Provider) subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]subnet, error) {
	seen := map[string]bool{}
	var out []subnet
	for i, t := range nc.Spec.SubnetSelectorTerms {
		filters := tagFilters(t.Tags)
		if t.ID != "" {
			filters = append(filters, filter("subnet-id", t.ID))
		}
		if len(filters) == 0 {
			return nil, awserr.Invalidf("EC2NodeClass %s: spec.subnetSelectorTerms[%d] is empty; give tags or an id", nc.Name, i)
		}
		filters = append(filters, filter("state", "available"))
		pg := ec2.NewDescribeSubnetsPaginator(p.ec2, &ec2.DescribeSubnetsInput{Filters: filters})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %s: resolving spec.subnetSelectorTerms[%d]: %w", nc.Name, i, err)
			}
			for _, s := range page.Subnets {
				id := aws.ToString(s.SubnetId)
				if seen[id] {
					continue
				}
				seen[id] = true
				out = append(out, subnet{ID: id, Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId),
					FreeIPs: aws.ToInt32(s.AvailableIpAddressCount)})
			}
		}
	}
	if len(out) == 0 {
		return nil, awserr.Invalidf("EC2NodeClass %s: spec.subnetSelectorTerms match no available subnet; tag the cluster's subnets (for example karpenter.sh/discovery=%s) or fix the terms", nc.Name, p.opts.ClusterName)
	}
	slices.SortFunc(out, func(a, b subnet) int { return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// securityGroups resolves spec.securityGroupSelectorTerms, sorted by id.
func (p *Provider) securityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]securityGroup, error) {
	seen := map[string]bool{}
	var out []securityGroup
	for i, t := range nc.Spec.SecurityGroupSelectorTerms {
		filters := tagFilters(t.Tags)
		if t.ID != "" {
			filters = append(filters, filter("group-id", t.ID))
		}
		if t.Name != "" {
			filters = append(filters, filter("group-name", t.Name))
		}
		if len(filters) == 0 {
			return nil, awserr.Invalidf("EC2NodeClass %s: spec.securityGroupSelectorTerms[%d] is empty; give tags, an id or a name", nc.Name, i)
		}
		pg := ec2.NewDescribeSecurityGroupsPaginator(p.ec2, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %s: resolving spec.securityGroupSelectorTerms[%d]: %w", nc.Name, i, err)
			}
			for _, g := range page.SecurityGroups {
				id := aws.ToString(g.GroupId)
				if !seen[id] {
					seen[id] = true
					out = append(out, securityGroup{ID: id, Name: aws.ToString(g.GroupName)})
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, awserr.Invalidf("EC2NodeClass %s: spec.securityGroupSelectorTerms match no security group; tag the node security group (for example karpenter.sh/discovery=%s) or fix the terms", nc.Name, p.opts.ClusterName)
	}
	slices.SortFunc(out, func(a, b securityGroup) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// eksArch maps Kubernetes architectures to the directory names of the EKS AMI parameters.
var eksArch = map[string]string{"amd64": "x86_64", "arm64": "arm64"}

// aliasParameters returns the SSM parameters holding the AMI ids an alias term selects, one per
// architecture, for the standard (non-accelerated) variant of each family, as Karpenter reads
// them: AL2023 and AL2 from EKS's optimized-ami tree (al2023@latest / al2@latest read the
// "recommended" release, al2023@vYYYYMMDD / al2@vYYYYMMDD a pinned one), Bottlerocket from its
// own tree (bottlerocket@latest, bottlerocket@vX.Y.Z or X.Y.Z).
func aliasParameters(alias, k8sVersion string) ([]string, error) {
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

// images resolves spec.amiSelectorTerms to the newest image per architecture (the term order
// does not matter, as in Karpenter). Sorted by architecture.
func (p *Provider) images(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) ([]image, error) {
	var found []ec2types.Image
	for i, t := range nc.Spec.AMISelectorTerms {
		field := fmt.Sprintf("EC2NodeClass %s: spec.amiSelectorTerms[%d]", nc.Name, i)
		var params []string
		switch {
		case t.Alias != "":
			ps, err := aliasParameters(t.Alias, k8sVersion)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", field, err)
			}
			params = ps
		case t.SSMParameter != "":
			params = []string{t.SSMParameter}
		}
		in := &ec2.DescribeImagesInput{Filters: tagFilters(t.Tags)}
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
			in.Filters = append(in.Filters, filter("name", t.Name))
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
	best := map[string]image{}
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
		cand := image{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch, Created: aws.ToString(im.CreationDate)}
		if t, err := time.Parse(time.RFC3339, aws.ToString(im.DeprecationTime)); err == nil && !p.opts.Now().Before(t) {
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
	out := make([]image, 0, len(best))
	for _, im := range best {
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b image) int { return cmp.Compare(a.Arch, b.Arch) })
	return out, nil
}

// Subnets returns what the class's spec.subnetSelectorTerms select now, as status.subnets
// shows it: sorted by zone, then id. An error matching awserr.ErrInvalidClass means the terms match
// no available subnet.
func (p *Provider) Subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, error) {
	sns, err := p.subnets(ctx, nc)
	if err != nil {
		return nil, err
	}
	out := make([]awsv1.Subnet, len(sns))
	for i, s := range sns {
		out[i] = awsv1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID}
	}
	return out, nil
}

// SecurityGroups returns what the class's spec.securityGroupSelectorTerms select now, sorted
// by id. An error matching awserr.ErrInvalidClass means the terms match no group.
func (p *Provider) SecurityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, error) {
	sgs, err := p.securityGroups(ctx, nc)
	if err != nil {
		return nil, err
	}
	out := make([]awsv1.SecurityGroup, len(sgs))
	for i, g := range sgs {
		out[i] = awsv1.SecurityGroup{ID: g.ID, Name: g.Name}
	}
	return out, nil
}

// AMIs returns the images the class's spec.amiSelectorTerms select now for the cluster's
// Kubernetes version: the newest per architecture, each with the kubernetes.io/arch
// requirement it suits, sorted by architecture. An error matching awserr.ErrInvalidClass means the
// terms match no image.
func (p *Provider) AMIs(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.AMI, error) {
	if err := p.cluster(ctx); err != nil {
		return nil, err
	}
	ims, err := p.images(ctx, nc, p.clusterFacts().KubernetesVersion)
	if err != nil {
		return nil, err
	}
	out := make([]awsv1.AMI, len(ims))
	for i, im := range ims {
		out[i] = awsv1.AMI{ID: im.ID, Name: im.Name, Deprecated: im.Deprecated, Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{im.Arch}}}}
	}
	return out, nil
}
