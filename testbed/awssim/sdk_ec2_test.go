package awssim_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/testbed/awssim"
)

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

func TestEC2Discovery(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	c := ec2.NewFromConfig(cfg)

	azs := try(c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})).OK(t)
	var zones []string
	for _, z := range azs.AvailabilityZones {
		zones = append(zones, aws.ToString(z.ZoneName)+"="+aws.ToString(z.ZoneId))
	}
	if got := strings.Join(zones, ","); got != "us-east-1a=use1-az1,us-east-1b=use1-az2,us-east-1c=use1-az3" {
		t.Errorf("zones = %s", got)
	}

	subnets := try(c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("tag:karpenter.sh/discovery", "karpool")}})).OK(t)
	if len(subnets.Subnets) != 3 {
		t.Fatalf("discovered %d subnets, want 3", len(subnets.Subnets))
	}
	seen := map[string]bool{}
	for _, sn := range subnets.Subnets {
		seen[aws.ToString(sn.AvailabilityZone)] = true
		if aws.ToInt32(sn.AvailableIpAddressCount) <= 0 || aws.ToString(sn.VpcId) == "" {
			t.Errorf("subnet %+v", sn)
		}
	}
	if len(seen) != 3 {
		t.Errorf("subnets span %d zones, want 3", len(seen))
	}
	one := try(c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		filter("tag-key", "karpenter.sh/discovery"), filter("availability-zone", "us-east-1b")}})).OK(t)
	if len(one.Subnets) != 1 || aws.ToString(one.Subnets[0].AvailabilityZone) != "us-east-1b" {
		t.Errorf("zone filter: %+v", one.Subnets)
	}
	none := try(c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("tag:karpenter.sh/discovery", "other")}})).OK(t)
	if len(none.Subnets) != 0 {
		t.Errorf("other cluster's tag matched %d subnets", len(none.Subnets))
	}
	_, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("no-such-filter", "x")}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0000000000000ffff"}})
	wantCode(t, err, "InvalidSubnetID.NotFound")

	sgs := try(c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("tag:karpenter.sh/discovery", "karpool")}})).OK(t)
	if len(sgs.SecurityGroups) != 1 {
		t.Fatalf("discovered %d security groups, want 1", len(sgs.SecurityGroups))
	}
	byName := try(c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("group-name", "eks-cluster-sg-*")}})).OK(t)
	if len(byName.SecurityGroups) != 1 {
		t.Errorf("group-name wildcard matched %d", len(byName.SecurityGroups))
	}
	vpcs := try(c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})).OK(t)
	if len(vpcs.Vpcs) != 1 || aws.ToString(vpcs.Vpcs[0].VpcId) != aws.ToString(subnets.Subnets[0].VpcId) {
		t.Errorf("vpcs: %+v", vpcs.Vpcs)
	}
	regions := try(c.DescribeRegions(ctx, &ec2.DescribeRegionsInput{})).OK(t)
	if len(regions.Regions) != 1 || aws.ToString(regions.Regions[0].RegionName) != "us-east-1" {
		t.Errorf("regions: %+v", regions.Regions)
	}
}

func TestAMIsAndSSMParameters(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	c, s := ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	for _, tc := range []struct{ param, name, arch string }{
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id", "amazon-eks-node-al2023-x86_64-standard-1.36-v20261101", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/nvidia/recommended/image_id", "amazon-eks-node-al2023-arm64-nvidia-1.36-v20261101", "arm64"},
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.36-v20261001/image_id", "amazon-eks-node-al2023-x86_64-standard-1.36-v20261001", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id", "amazon-eks-node-1.32-v20261101", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id", "amazon-eks-arm64-node-1.32-v20261101", "arm64"},
		{"/aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/recommended/image_id", "amazon-eks-gpu-node-1.31-v20261101", "x86_64"},
		{"/aws/service/bottlerocket/aws-k8s-1.36/arm64/latest/image_id", "bottlerocket-aws-k8s-1.36-arm64-v1.50.0-", "arm64"},
		{"/aws/service/bottlerocket/aws-k8s-1.36-nvidia/x86_64/latest/image_id", "bottlerocket-aws-k8s-1.36-nvidia-x86_64-v1.50.0-", "x86_64"},
		{"/aws/service/bottlerocket/aws-k8s-1.35/x86_64/1.49.0/image_id", "bottlerocket-aws-k8s-1.35-x86_64-v1.49.0-", "x86_64"},
	} {
		p := try(s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(tc.param)})).OK(t)
		id := aws.ToString(p.Parameter.Value)
		if !strings.HasPrefix(id, "ami-") || aws.ToString(p.Parameter.Name) != tc.param || p.Parameter.Type != "String" {
			t.Fatalf("%s: %+v", tc.param, p.Parameter)
		}
		img := try(c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})).OK(t)
		if len(img.Images) != 1 || !strings.HasPrefix(aws.ToString(img.Images[0].Name), tc.name) || string(img.Images[0].Architecture) != tc.arch {
			t.Errorf("%s → %s: %+v", tc.param, id, img.Images)
		}
	}
	// EKS published no AL2 images after 1.32.
	_, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.36/amazon-linux-2/recommended/image_id")})
	wantCode(t, err, "ParameterNotFound")
	ps := try(s.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{
		"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id", "/nope"}})).OK(t)
	if len(ps.Parameters) != 1 || len(ps.InvalidParameters) != 1 || ps.InvalidParameters[0] != "/nope" {
		t.Errorf("GetParameters: %+v", ps)
	}

	imgs := try(c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{filter("name", "amazon-eks-node-al2023-*-standard-1.36-*")}})).OK(t)
	if len(imgs.Images) != 4 {
		t.Errorf("AL2023 standard 1.36 images: %d, want 4 (2 architectures × 2 releases)", len(imgs.Images))
	}
	self := try(c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}})).OK(t)
	if len(self.Images) != 1 || aws.ToBool(self.Images[0].Public) {
		t.Errorf("self images: %+v", self.Images)
	}
	tagged := try(c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{filter("tag:karpenter.sh/discovery", srv.ClusterName())}})).OK(t)
	if len(tagged.Images) != 1 {
		t.Errorf("tagged images: %d", len(tagged.Images))
	}
	_, err = c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-00000000000fffff0"}})
	wantCode(t, err, "InvalidAMIID.NotFound")
}

func TestInstanceTypesOfferingsAndSpotPrices(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	c := ec2.NewFromConfig(cfg)
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	offered := 0
	for _, sp := range cat.Specs() {
		if cat.Offered(sp.Name) {
			offered++
		}
	}
	var all []ec2types.InstanceTypeInfo
	pages := 0
	p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		filter("processor-info.supported-architecture", "x86_64", "arm64"), filter("supported-virtualization-type", "hvm")}})
	for p.HasMorePages() {
		page := try(p.NextPage(ctx)).OK(t)
		all = append(all, page.InstanceTypes...)
		pages++
	}
	if len(all) != offered || pages < 2 {
		t.Errorf("DescribeInstanceTypes returned %d types in %d pages, want %d types in several pages", len(all), pages, offered)
	}
	m5 := try(c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "m6g.large", "g5.xlarge"}})).OK(t)
	info := map[string]ec2types.InstanceTypeInfo{}
	for _, it := range m5.InstanceTypes {
		info[string(it.InstanceType)] = it
	}
	m := info["m5.large"]
	if aws.ToInt32(m.VCpuInfo.DefaultVCpus) != 2 || aws.ToInt64(m.MemoryInfo.SizeInMiB) != 8192 || m.Hypervisor != "nitro" ||
		aws.ToInt32(m.NetworkInfo.MaximumNetworkInterfaces) != 3 || aws.ToInt32(m.NetworkInfo.Ipv4AddressesPerInterface) != 10 ||
		m.ProcessorInfo.SupportedArchitectures[0] != "x86_64" || len(m.SupportedUsageClasses) != 2 {
		t.Errorf("m5.large: %+v", m)
	}
	if info["m6g.large"].ProcessorInfo.SupportedArchitectures[0] != "arm64" {
		t.Errorf("m6g.large arch: %+v", info["m6g.large"].ProcessorInfo)
	}
	if g := info["g5.xlarge"].GpuInfo; g == nil || aws.ToInt32(g.Gpus[0].Count) != 1 || aws.ToString(g.Gpus[0].Manufacturer) != "NVIDIA" {
		t.Errorf("g5.xlarge GPUs: %+v", g)
	}
	_, err = c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.mega"}})
	wantCode(t, err, "InvalidInstanceType")

	offs := try(c.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, Filters: []ec2types.Filter{filter("instance-type", "m5.large")}})).OK(t)
	if len(offs.InstanceTypeOfferings) != 3 {
		t.Errorf("m5.large offerings: %+v", offs.InstanceTypeOfferings)
	}
	regional := try(c.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{Filters: []ec2types.Filter{filter("instance-type", "m5.*")}})).OK(t)
	for _, o := range regional.InstanceTypeOfferings {
		if o.LocationType != ec2types.LocationTypeRegion || aws.ToString(o.Location) != "us-east-1" {
			t.Fatalf("default location type: %+v", o)
		}
	}

	spot := try(c.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(time.Now())})).OK(t)
	sp, _ := cat.Spec("m5.large")
	if len(spot.SpotPriceHistory) != 3 {
		t.Fatalf("spot prices: %+v", spot.SpotPriceHistory)
	}
	for _, h := range spot.SpotPriceHistory {
		if aws.ToString(h.SpotPrice) != fmt.Sprintf("%.6f", sp.SpotPrice) || h.ProductDescription != "Linux/UNIX" {
			t.Errorf("spot price %+v, want %.6f", h, sp.SpotPrice)
		}
	}
	n := 0
	sph := ec2.NewDescribeSpotPriceHistoryPaginator(c, &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Linux/UNIX"}})
	for sph.HasMorePages() {
		n += len(try(sph.NextPage(ctx)).OK(t).SpotPriceHistory)
	}
	if n < 3*100 {
		t.Errorf("spot price history has only %d entries", n)
	}
}

// nodeRole creates the node role and instance profile launches need.
func nodeRole(t *testing.T, cfg aws.Config) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	c := iam.NewFromConfig(cfg)
	try(c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-karpool"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})).OK(t)
	try(c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("karpool_node")})).OK(t)
	try(c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("karpool_node"), RoleName: aws.String("KarpenterNodeRole-karpool")})).OK(t)
	return "karpool_node"
}

func al2023AMI(t *testing.T, cfg aws.Config, arch string) string {
	t.Helper()
	p := try(ssm.NewFromConfig(cfg).GetParameter(testCtx(t, time.Minute), &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/" + arch + "/standard/recommended/image_id")})).OK(t)
	return aws.ToString(p.Parameter.Value)
}

func discovered(t *testing.T, c *ec2.Client) ([]ec2types.Subnet, string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	sn := try(c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("tag:karpenter.sh/discovery", "karpool")}})).OK(t)
	sort.Slice(sn.Subnets, func(i, j int) bool {
		return aws.ToString(sn.Subnets[i].AvailabilityZone) < aws.ToString(sn.Subnets[j].AvailabilityZone)
	})
	sg := try(c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("tag:karpenter.sh/discovery", "karpool")}})).OK(t)
	return sn.Subnets, aws.ToString(sg.SecurityGroups[0].GroupId)
}

func createLT(t *testing.T, c *ec2.Client, name, ami, sg, profile string) *ec2types.LaunchTemplate {
	t.Helper()
	return createLTWith(t, c, name, ami, sg, profile, nil)
}

// createLTWith is createLT with the template data changed by edit (when not nil).
func createLTWith(t *testing.T, c *ec2.Client, name, ami, sg, profile string, edit func(*ec2types.RequestLaunchTemplateData)) *ec2types.LaunchTemplate {
	t.Helper()
	in := &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(ami), UserData: b64(al2023UserData), SecurityGroupIds: []string{sg},
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)},
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"),
				Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired,
				HttpPutResponseHopLimit: aws.Int32(1), HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled},
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}, {Key: aws.String("kubernetes.io/cluster/karpool"), Value: aws.String("owned")}}}},
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: []ec2types.Tag{{Key: aws.String("karpenter.k8s.aws/cluster"), Value: aws.String("karpool")}}}},
	}
	if edit != nil {
		edit(in.LaunchTemplateData)
	}
	return try(c.CreateLaunchTemplate(testCtx(t, time.Minute), in)).OK(t).LaunchTemplate
}

func waiterFast[T any](o *T) {}

func TestLaunchTemplatesAndInstances(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, 2*time.Minute)
	c := ec2.NewFromConfig(cfg)
	profile := nodeRole(t, cfg)
	ami := al2023AMI(t, cfg, "x86_64")
	subnets, sg := discovered(t, c)

	lt := createLT(t, c, "karpool/default-abc123", ami, sg, profile)
	if !strings.HasPrefix(aws.ToString(lt.LaunchTemplateId), "lt-") || aws.ToInt64(lt.LatestVersionNumber) != 1 {
		t.Fatalf("launch template %+v", lt)
	}
	_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("karpool/default-abc123"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(ami)}})
	wantCode(t, err, "InvalidLaunchTemplateName.AlreadyExistsException")
	_, err = c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-user-data"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String("not base64!")}})
	wantCode(t, err, "InvalidUserData.Malformed")

	byTag := try(c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{filter("tag:karpenter.k8s.aws/cluster", "karpool")}})).OK(t)
	if len(byTag.LaunchTemplates) != 1 || aws.ToString(byTag.LaunchTemplates[0].LaunchTemplateName) != "karpool/default-abc123" {
		t.Errorf("launch templates by tag: %+v", byTag.LaunchTemplates)
	}
	_, err = c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"nope"}})
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException")
	vers := try(c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: lt.LaunchTemplateId, Versions: []string{"$Latest"}})).OK(t)
	data := vers.LaunchTemplateVersions[0].LaunchTemplateData
	if aws.ToString(data.UserData) != aws.ToString(b64(al2023UserData)) || data.MetadataOptions.HttpTokens != "required" ||
		aws.ToInt32(data.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || aws.ToString(data.IamInstanceProfile.Name) != profile ||
		len(data.TagSpecifications) != 1 || aws.ToString(data.ImageId) != ami {
		t.Errorf("launch template data: %+v", data)
	}

	// RunInstances from the launch template, idempotent by client token.
	run := &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large", SubnetId: subnets[0].SubnetId,
		ClientToken:    aws.String("token-1"),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: lt.LaunchTemplateId, Version: aws.String("$Latest")},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("default-xyz")}}}}}
	res := try(c.RunInstances(ctx, run)).OK(t)
	again := try(c.RunInstances(ctx, run)).OK(t)
	inst := res.Instances[0]
	id := aws.ToString(inst.InstanceId)
	if id != "i-00000000000000001" || aws.ToString(again.Instances[0].InstanceId) != id || len(srv.Instances()) != 1 {
		t.Fatalf("instance id %s / %s, %d instances", id, aws.ToString(again.Instances[0].InstanceId), len(srv.Instances()))
	}
	if inst.State.Name != ec2types.InstanceStateNamePending || inst.InstanceType != "m5.large" || aws.ToString(inst.Placement.AvailabilityZone) != "us-east-1a" ||
		!strings.HasSuffix(aws.ToString(inst.PrivateDnsName), ".ec2.internal") || inst.MetadataOptions.HttpTokens != "required" ||
		aws.ToString(inst.IamInstanceProfile.Arn) != "arn:aws:iam::111122223333:instance-profile/karpool_node" {
		t.Errorf("instance %+v", inst)
	}
	w := ec2.NewInstanceRunningWaiter(c, func(o *ec2.InstanceRunningWaiterOptions) { o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second })
	if err := w.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]ec2types.Filter{
		{filter("instance-id", id)},
		{filter("tag:karpenter.sh/nodepool", "default"), filter("instance-state-name", "pending", "running")},
		{filter("tag-key", "kubernetes.io/cluster/karpool")},
		{filter("tag:Name", "default-*")},
		{filter("tag:aws:ec2launchtemplate:id", aws.ToString(lt.LaunchTemplateId))},
	} {
		d := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: f})).OK(t)
		if len(d.Reservations) != 1 || aws.ToString(d.Reservations[0].Instances[0].InstanceId) != id {
			t.Errorf("filters %v: %+v", aws.ToString(f[0].Name), d.Reservations)
		}
	}
	d := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("instance-state-name", "terminated")}})).OK(t)
	if len(d.Reservations) != 0 {
		t.Errorf("terminated filter matched %d", len(d.Reservations))
	}

	try(c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("default-xyz")}}})).OK(t)
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("x")}}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0000000000000ffff"}, Tags: []ec2types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	tagged := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).OK(t)
	if v := tagValue(tagged.Reservations[0].Instances[0].Tags, "karpenter.sh/nodeclaim"); v != "default-xyz" {
		t.Errorf("nodeclaim tag %q", v)
	}

	// EC2 refuses an arm64 type with an x86_64 image, an unknown profile and unknown ids.
	_, err = c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m6g.large", ImageId: aws.String(ami), SubnetId: subnets[1].SubnetId})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large", ImageId: aws.String(ami),
		SubnetId: subnets[1].SubnetId, IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String("missing")}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large", ImageId: aws.String(ami)})
	wantCode(t, err, "VPCIdNotSpecified")
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000ffff"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"bogus"}})
	wantCode(t, err, "InvalidInstanceID.Malformed")
	_, err = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}, DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")

	term := try(c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).OK(t)
	if s := term.TerminatingInstances[0]; s.PreviousState.Name != "running" || s.CurrentState.Name != "shutting-down" {
		t.Errorf("termination %+v %+v", s.PreviousState, s.CurrentState)
	}
	tw := ec2.NewInstanceTerminatedWaiter(c, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := tw.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	gone := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).OK(t)
	if r := gone.Reservations[0].Instances[0].StateReason; r == nil || aws.ToString(r.Code) != "Client.UserInitiatedShutdown" {
		t.Errorf("state reason %+v", r)
	}

	try(c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("karpool/default-abc123")})).OK(t)
	_, err = c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{aws.ToString(lt.LaunchTemplateId)}})
	wantCode(t, err, "InvalidLaunchTemplateId.NotFound")
	_, err = c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("karpool/default-abc123")})
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException")
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

func fleetOverrides(subnets []ec2types.Subnet, types ...string) []ec2types.FleetLaunchTemplateOverridesRequest {
	var out []ec2types.FleetLaunchTemplateOverridesRequest
	for _, it := range types {
		for _, sn := range subnets {
			out = append(out, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(it), SubnetId: sn.SubnetId})
		}
	}
	return out
}

func fleetInput(ltID *string, capacityType ec2types.DefaultTargetCapacityType, total int32, overrides []ec2types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	return &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: ltID, Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{DefaultTargetCapacityType: capacityType, TotalTargetCapacity: aws.Int32(total)},
		OnDemandOptions:             &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		SpotOptions:                 &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("default-abc")}}}},
	}
}

func TestCreateFleet(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, 2*time.Minute)
	c := ec2.NewFromConfig(cfg)
	profile := nodeRole(t, cfg)
	subnets, sg := discovered(t, c)
	lt := createLT(t, c, "karpool-fleet", al2023AMI(t, cfg, "x86_64"), sg, profile)

	// On-demand lowest price: the cheapest type of the overrides (m5.large at $0.096).
	in := fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets, "m5.2xlarge", "m5.xlarge", "m5.large"))
	in.ClientToken = aws.String("fleet-token")
	out := try(c.CreateFleet(ctx, in)).OK(t)
	if len(out.Instances) != 1 || out.Instances[0].InstanceType != "m5.large" || out.Instances[0].Lifecycle != ec2types.InstanceLifecycleOnDemand ||
		len(out.Instances[0].InstanceIds) != 1 || len(out.Errors) != 0 || !strings.HasPrefix(aws.ToString(out.FleetId), "fleet-") {
		t.Fatalf("fleet: %+v errors %+v", out.Instances, out.Errors)
	}
	again := try(c.CreateFleet(ctx, in)).OK(t)
	if again.Instances[0].InstanceIds[0] != out.Instances[0].InstanceIds[0] || len(srv.Instances()) != 1 {
		t.Errorf("retrying with the same client token launched again")
	}
	d := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})).OK(t)
	inst := d.Reservations[0].Instances[0]
	if tagValue(inst.Tags, "aws:ec2:fleet-id") != aws.ToString(out.FleetId) || tagValue(inst.Tags, "karpenter.sh/nodeclaim") != "default-abc" ||
		tagValue(inst.Tags, "karpenter.sh/nodepool") != "default" || inst.InstanceLifecycle != "" {
		t.Errorf("fleet instance tags %+v lifecycle %q", inst.Tags, inst.InstanceLifecycle)
	}

	// m5.large has no on-demand capacity anywhere: the next cheapest type launches, and the
	// fleet reports the pools it tried.
	srv.SetFaults(awssim.Faults{InsufficientCapacity: []awssim.CapacityFault{{InstanceType: "m5.large", CapacityType: "on-demand"}}})
	out = try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets, "m5.large", "m5.xlarge")))).OK(t)
	if len(out.Instances) != 1 || out.Instances[0].InstanceType != "m5.xlarge" || len(out.Errors) != 3 {
		t.Fatalf("fallback: %+v errors %+v", out.Instances, out.Errors)
	}
	for _, e := range out.Errors {
		if aws.ToString(e.ErrorCode) != "InsufficientInstanceCapacity" || e.LaunchTemplateAndOverrides.Overrides.InstanceType != "m5.large" ||
			aws.ToString(e.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateId) != aws.ToString(lt.LaunchTemplateId) {
			t.Errorf("fleet error %s %s %+v", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage), e.LaunchTemplateAndOverrides.Overrides)
		}
	}
	// Spot is unaffected by an on-demand capacity fault; price-capacity-optimized takes the cheapest zone.
	srv.SetSpotPrice("m5.large", "us-east-1b", 0.02)
	out = try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeSpot, 2, fleetOverrides(subnets, "m5.large", "c5.large")))).OK(t)
	if len(out.Instances) != 1 || out.Instances[0].Lifecycle != ec2types.InstanceLifecycleSpot || len(out.Instances[0].InstanceIds) != 2 ||
		aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.SubnetId) != aws.ToString(subnets[1].SubnetId) {
		t.Fatalf("spot fleet: %+v", out.Instances)
	}
	d = try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})).OK(t)
	for _, r := range d.Reservations {
		if i := r.Instances[0]; i.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || !strings.HasPrefix(aws.ToString(i.SpotInstanceRequestId), "sir-") {
			t.Errorf("spot instance %+v", i)
		}
	}
	// Nothing anywhere: no instances, one error per pool tried.
	srv.SetFaults(awssim.Faults{InsufficientCapacity: []awssim.CapacityFault{{}}})
	out = try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets, "m5.large")))).OK(t)
	if len(out.Instances) != 0 || len(out.Errors) != 3 {
		t.Errorf("no capacity: %+v %+v", out.Instances, out.Errors)
	}
	srv.SetFaults(awssim.Faults{})
	// A missing launch template is reported per override.
	out = try(c.CreateFleet(ctx, fleetInput(aws.String("lt-0000000000000ffff"), ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets[:1], "m5.large")))).OK(t)
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidLaunchTemplateId.NotFound" {
		t.Errorf("missing launch template: %+v", out.Errors)
	}
	// Several instances in one request.
	out = try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 3, fleetOverrides(subnets, "c5.large")))).OK(t)
	if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 3 {
		t.Errorf("3 instances: %+v", out.Instances)
	}
}

// EFA interfaces in a launch template: refused beyond what the type has; counted on the
// instance (the node the EFA device plugin would report offers that many).
func TestEFAInterfaces(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	c := ec2.NewFromConfig(cfg)
	profile := nodeRole(t, cfg)
	subnets, sg := discovered(t, c)
	lt := createLTWith(t, c, "karpool-efa", al2023AMI(t, cfg, "x86_64"), sg, profile, func(d *ec2types.RequestLaunchTemplateData) {
		d.SecurityGroupIds = nil
		d.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			{DeviceIndex: aws.Int32(0), NetworkCardIndex: aws.Int32(0), InterfaceType: aws.String("efa"), Groups: []string{sg}}}
	})
	out := try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets[:1], "m5.large")))).OK(t)
	if len(out.Instances) != 0 || len(out.Errors) == 0 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterCombination" {
		t.Fatalf("an EFA interface on m5.large: instances %+v, errors %+v; want InvalidParameterCombination", out.Instances, out.Errors)
	}
	out = try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets[:1], "c5n.18xlarge")))).OK(t)
	if len(out.Instances) != 1 {
		t.Fatalf("an EFA interface on c5n.18xlarge: errors %+v", out.Errors)
	}
}
