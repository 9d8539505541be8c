// Package amifamily resolves an EC2NodeClass's spec.amiSelectorTerms to the newest image per
// architecture and accelerator variant: aliases through the SSM parameters EKS and
// Bottlerocket publish (standard, NVIDIA and Neuron images), ids, names, owners, tags and SSM
// parameters through EC2 DescribeImages.
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
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
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
	// Variants are the accelerator variants an alias image is built for (VariantStandard,
	// VariantNvidia, VariantNeuron): it suits the instance types of any of them. Empty for an
	// image selected otherwise, which suits every type of its architecture.
	Variants []string
}

// The variants of the EKS-optimized and Bottlerocket images, as Karpenter names them.
const (
	VariantStandard = "standard"
	VariantNvidia   = "nvidia"
	VariantNeuron   = "neuron"
	// VariantWindows prefixes the Windows build a Windows image is ("windows-10.0.20348").
	VariantWindows = "windows-"
)

// Suits reports whether a node of an instance type with these labels can run the image: its
// architecture, and, for an alias image, the variant the type needs as Karpenter decides it —
// NVIDIA for a type with GPUs, Neuron for one with accelerators, standard for the others.
func (im *Image) Suits(labels map[string]string) bool {
	if labels[corev1.LabelArchStable] != im.Arch {
		return false
	}
	if len(im.Variants) == 0 {
		return true
	}
	_, gpu := labels[awsv1.LabelInstanceGPUCount]
	_, accel := labels[awsv1.LabelInstanceAcceleratorCount]
	return slices.ContainsFunc(im.Variants, func(v string) bool {
		if build, ok := strings.CutPrefix(v, VariantWindows); ok {
			return labels[corev1.LabelOSStable] == string(corev1.Windows) && labels[corev1.LabelWindowsBuild] == build
		}
		switch v {
		case VariantNvidia:
			return gpu
		case VariantNeuron:
			return accel
		}
		return !gpu && !accel
	})
}

// Requirements are the node requirements of each variant, as status.amis lists them (an image
// of several variants is listed once per variant).
func (im *Image) Requirements() [][]corev1.NodeSelectorRequirement {
	arch := corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{im.Arch}}
	if len(im.Variants) == 0 {
		return [][]corev1.NodeSelectorRequirement{{arch}}
	}
	var out [][]corev1.NodeSelectorRequirement
	for _, v := range im.Variants {
		if build, ok := strings.CutPrefix(v, VariantWindows); ok {
			// Karpenter's requirements of a Windows image: the OS and the build.
			out = append(out, []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}},
				{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{build}}})
			continue
		}
		switch v {
		case VariantNvidia:
			out = append(out, []corev1.NodeSelectorRequirement{arch, {Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}})
		case VariantNeuron:
			out = append(out, []corev1.NodeSelectorRequirement{arch, {Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}})
		default:
			out = append(out, []corev1.NodeSelectorRequirement{arch, {Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
				{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist}})
		}
	}
	return out
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

// Parameter is an SSM parameter holding the id of an alias's image, with what that image is.
type Parameter struct {
	Name     string
	Arch     string
	Variants []string
}

// AliasParameters returns the SSM parameters holding the AMI ids an alias term selects, per
// architecture and accelerator variant, as Karpenter reads them: AL2023 from EKS's
// optimized-ami tree (standard, NVIDIA and, on x86_64, Neuron images), AL2 from the same tree
// (its GPU image serves NVIDIA and Neuron types), Bottlerocket from its own tree (the standard
// x86_64 image also serves Neuron; NVIDIA images are a separate variant). al2023@latest reads the
// "recommended" release, al2023@vYYYYMMDD a pinned one; bottlerocket@vX.Y.Z or X.Y.Z.
func AliasParameters(alias, k8sVersion string) ([]Parameter, error) {
	family, version, _ := strings.Cut(alias, "@")
	latest := version == "" || version == awsv1.AliasVersionLatest
	switch strings.ToLower(family) {
	case awsv1.AliasFamilyAL2023:
		return al2023Parameters(k8sVersion, version, latest), nil
	case awsv1.AliasFamilyAL2:
		return al2Parameters(k8sVersion, version, latest), nil
	case awsv1.AliasFamilyBottlerocket:
		// Bottlerocket releases are tagged vX.Y.Z on GitHub; the parameter path has no "v".
		v := strings.TrimPrefix(version, "v")
		if latest {
			v = awsv1.AliasVersionLatest
		}
		p := func(suffix, arch string, variants ...string) Parameter {
			return Parameter{Name: fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", k8sVersion, suffix, eksArch[arch], v), Arch: arch, Variants: variants}
		}
		return []Parameter{p("", "amd64", VariantStandard, VariantNeuron), p("", "arm64", VariantStandard),
			p("-nvidia", "amd64", VariantNvidia), p("-nvidia", "arm64", VariantNvidia)}, nil
	case awsv1.AliasFamilyWindows2019, awsv1.AliasFamilyWindows2022, awsv1.AliasFamilyWindows2025:
		if !latest {
			return nil, awserr.Invalidf("alias %q: Windows aliases take @latest only", alias)
		}
		year := strings.TrimPrefix(strings.ToLower(family), "windows")
		build, _ := catalog.WindowsBuild("Windows" + year)
		// Only the Core edition, x86_64, as Karpenter reads it.
		return []Parameter{{Name: fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, k8sVersion),
			Arch: "amd64", Variants: []string{VariantWindows + build}}}, nil
	}
	return nil, awserr.Invalidf("alias %q: not an alias family (al2023, al2, bottlerocket, windows2019, windows2022, windows2025); select the AMI by id, name or tags otherwise", alias)
}

// eksArch maps Kubernetes architectures to the directory names of the AMI parameters.
var eksArch = map[string]string{"amd64": "x86_64", "arm64": "arm64"}

func al2023Parameters(k8sVersion, version string, latest bool) []Parameter {
	var out []Parameter
	for _, c := range []struct{ arch, variant string }{{"amd64", VariantStandard}, {"amd64", VariantNvidia}, {"amd64", VariantNeuron},
		{"arm64", VariantStandard}, {"arm64", VariantNvidia}} {
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s", k8sVersion, eksArch[c.arch], c.variant)
		name := base + "/recommended/image_id"
		if !latest {
			name = fmt.Sprintf("%s/amazon-eks-node-al2023-%s-%s-%s-%s/image_id", base, eksArch[c.arch], c.variant, k8sVersion, version)
		}
		out = append(out, Parameter{Name: name, Arch: c.arch, Variants: []string{c.variant}})
	}
	return out
}

func al2Parameters(k8sVersion, version string, latest bool) []Parameter {
	var out []Parameter
	for _, d := range []struct {
		dir, prefix, arch string
		variants          []string
	}{
		{"amazon-linux-2", "amazon-eks-node", "amd64", []string{VariantStandard}},
		{"amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", []string{VariantStandard}},
		{"amazon-linux-2-gpu", "amazon-eks-gpu-node", "amd64", []string{VariantNvidia, VariantNeuron}},
	} {
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s", k8sVersion, d.dir)
		name := base + "/recommended/image_id"
		if !latest {
			name = fmt.Sprintf("%s/%s-%s-%s/image_id", base, d.prefix, k8sVersion, version)
		}
		out = append(out, Parameter{Name: name, Arch: d.arch, Variants: d.variants})
	}
	return out
}

// List resolves spec.amiSelectorTerms to the newest image per architecture and, for alias
// images, per variant (the term order does not matter, as in Karpenter). Sorted by
// architecture, then variants.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) ([]Image, error) {
	var found []ec2types.Image
	variants := map[string][]string{}
	for i, t := range nc.Spec.AMISelectorTerms {
		field := fmt.Sprintf("EC2NodeClass %s: spec.amiSelectorTerms[%d]", nc.Name, i)
		in, err := p.termInput(ctx, field, t, k8sVersion, variants)
		if err != nil {
			return nil, err
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
	out := newest(found, variants, p.now())
	if len(out) == 0 {
		return nil, awserr.Invalidf("EC2NodeClass %s: spec.amiSelectorTerms match no x86_64 or arm64 image; check the ids, names, tags and owners", nc.Name)
	}
	return out, nil
}

// termInput is the DescribeImages request of one term. Alias and SSM parameter terms are read
// from SSM first; the variants of each alias image are recorded by id.
func (p *Provider) termInput(ctx context.Context, field string, t awsv1.AMISelectorTerm, k8sVersion string, variants map[string][]string) (*ec2.DescribeImagesInput, error) {
	var params []Parameter
	switch {
	case t.Alias != "":
		ps, err := AliasParameters(t.Alias, k8sVersion)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		params = ps
	case t.SSMParameter != "":
		params = []Parameter{{Name: t.SSMParameter}}
	}
	in := &ec2.DescribeImagesInput{Filters: ec2filter.Tags(t.Tags)}
	for _, param := range params {
		out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param.Name)})
		switch {
		case t.Alias != "" && awserr.Code(err) == "ParameterNotFound":
			// EKS does not publish every architecture and variant for every release.
			continue
		case t.SSMParameter != "" && awserr.Code(err) == "ParameterNotFound":
			return nil, awserr.Invalidf("%s: SSM parameter %s does not exist; fix ssmParameter", field, param.Name)
		case err != nil:
			return nil, fmt.Errorf("%s: reading SSM parameter %s: %w", field, param.Name, err)
		}
		id := aws.ToString(out.Parameter.Value)
		in.ImageIds = append(in.ImageIds, id)
		variants[id] = append(variants[id], param.Variants...)
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
	return in, nil
}

// newest keeps the newest image per architecture and variants (then the highest id).
func newest(found []ec2types.Image, variants map[string][]string, now time.Time) []Image {
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
		id := aws.ToString(im.ImageId)
		cand := Image{ID: id, Name: aws.ToString(im.Name), Arch: arch, Created: aws.ToString(im.CreationDate), Variants: slices.Compact(slices.Sorted(slices.Values(variants[id])))}
		if t, err := time.Parse(time.RFC3339, aws.ToString(im.DeprecationTime)); err == nil && !now.Before(t) {
			cand.Deprecated = true
		}
		key := arch + "/" + strings.Join(cand.Variants, ",")
		cur, ok := best[key]
		if !ok || cand.Created > cur.Created || (cand.Created == cur.Created && cand.ID > cur.ID) {
			best[key] = cand
		}
	}
	out := make([]Image, 0, len(best))
	for _, im := range best {
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b Image) int {
		return cmp.Or(cmp.Compare(a.Arch, b.Arch), cmp.Compare(strings.Join(a.Variants, ","), strings.Join(b.Variants, ",")))
	})
	return out
}
