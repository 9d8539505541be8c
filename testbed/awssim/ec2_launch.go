package awssim

import (
	"cmp"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// Instance state codes as EC2 reports them.
var stateCodes = map[ec2types.InstanceStateName]int32{
	ec2types.InstanceStateNamePending: 0, ec2types.InstanceStateNameRunning: 16, ec2types.InstanceStateNameShuttingDown: 32,
	ec2types.InstanceStateNameTerminated: 48, ec2types.InstanceStateNameStopping: 64, ec2types.InstanceStateNameStopped: 80,
}

// instance is one simulated EC2 instance.
type instance struct {
	id            string
	spec          catalog.Spec
	subnet        *subnet
	zone          zone
	image         *image
	privateIP     string
	dnsName       string
	state         ec2types.InstanceStateName
	launchTime    time.Time
	runningAt     time.Time // pending → running
	registerAt    time.Time // running → Node registered (node bootstrap)
	terminateAt   time.Time // shutting-down → terminated
	terminatedAt  time.Time
	capacityType  string // on-demand or spot
	spotRequestID string
	tags          []ec2types.Tag
	sgs           []ec2types.GroupIdentifier
	userData      string // base64, as given
	keyName       string
	profile       *ec2types.IamInstanceProfile
	metadata      ec2types.InstanceMetadataOptionsResponse
	volumes       []ec2types.InstanceBlockDeviceMapping
	rootSizeGiB   map[string]int32 // device name → size
	clientToken   string
	stateReason   *ec2types.StateReason
	transition    string
	ebsOptimized  bool
	eni           string
	mac           string
	// efa is how many of its interfaces are EFA ("efa" or "efa-only"): the EFA device plugin
	// offers that many vpc.amazonaws.com/efa on its node.
	efa int
	// interruptAt schedules a termination by AWS (spot interruption).
	interruptAt time.Time
	// node is the Node its kubelet registers (computed once: user data does not change).
	node    *corev1.Node
	nodeErr error
	// reservation is the capacity reservation it holds a slot of (nil: none); slotReleased is
	// set when it gave the slot back. crPreference and crTargeted are its launch's
	// CapacityReservationSpecification, as DescribeInstances reports it.
	reservation  *capacityReservation
	slotReleased bool
	crPreference ec2types.CapacityReservationPreference
	crTargeted   bool
}

// launchSpec is everything needed to launch instances, merged from a launch template, fleet
// overrides and RunInstances parameters.
type launchSpec struct {
	instanceType string
	subnet       *subnet
	imageID      string
	sgIDs        []string
	sgNames      []string
	userData     *string
	keyName      string
	profileName  string
	profileArn   string
	metadata     *ec2types.LaunchTemplateInstanceMetadataOptionsRequest
	blockDevices []ec2types.LaunchTemplateBlockDeviceMappingRequest
	tags         []ec2types.Tag
	capacityType string
	maxPrice     *string
	lt           *launchTemplate
	ltVersion    int64
	fleetID      string
	clientToken  string
	ebsOptimized bool
	// crPreference and crTarget are the launch's CapacityReservationSpecification; marketType
	// its InstanceMarketOptions.MarketType; reservation the reservation resolved for the request
	// (targetReservation).
	crPreference ec2types.CapacityReservationPreference
	crTarget     *ec2types.CapacityReservationTarget
	marketType   ec2types.MarketType
	reservation  *capacityReservation
	// efa counts the template's EFA interfaces ("efa" and "efa-only").
	efa int
}

// fromLaunchTemplate fills a spec from launch template data.
func (sp *launchSpec) fromLaunchTemplate(st *state, lt *launchTemplate, ver *ltVersion) {
	d := ver.data
	sp.lt, sp.ltVersion = lt, ver.number
	sp.instanceType = string(d.InstanceType)
	sp.imageID = aws.ToString(d.ImageId)
	sp.sgIDs = append([]string(nil), d.SecurityGroupIds...)
	sp.sgNames = append([]string(nil), d.SecurityGroups...)
	for _, ni := range d.NetworkInterfaces {
		if t := aws.ToString(ni.InterfaceType); t == "efa" || t == "efa-only" {
			sp.efa++
		}
		if aws.ToInt32(ni.DeviceIndex) == 0 || ni.DeviceIndex == nil {
			sp.sgIDs = append(sp.sgIDs, ni.Groups...)
			if sn := st.subnetByID(aws.ToString(ni.SubnetId)); sn != nil {
				sp.subnet = sn
			}
		}
	}
	sp.userData = d.UserData
	sp.keyName = aws.ToString(d.KeyName)
	if d.IamInstanceProfile != nil {
		sp.profileName = aws.ToString(d.IamInstanceProfile.Name)
		sp.profileArn = aws.ToString(d.IamInstanceProfile.Arn)
	}
	sp.metadata = d.MetadataOptions
	sp.blockDevices = d.BlockDeviceMappings
	sp.ebsOptimized = aws.ToBool(d.EbsOptimized)
	for _, ts := range d.TagSpecifications {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			setTags(&sp.tags, ts.Tags)
		}
	}
	if c := d.CapacityReservationSpecification; c != nil {
		sp.crPreference, sp.crTarget = c.CapacityReservationPreference, c.CapacityReservationTarget
	}
	if d.InstanceMarketOptions != nil {
		sp.marketType = d.InstanceMarketOptions.MarketType
	}
	if d.InstanceMarketOptions != nil && d.InstanceMarketOptions.MarketType == ec2types.MarketTypeSpot {
		sp.capacityType = catalog.CapacityTypeSpot
		if d.InstanceMarketOptions.SpotOptions != nil {
			sp.maxPrice = d.InstanceMarketOptions.SpotOptions.MaxPrice
		}
	}
	if d.Placement != nil && d.Placement.AvailabilityZone != nil && sp.subnet == nil {
		sp.subnet = st.subnetInZone(*d.Placement.AvailabilityZone)
	}
}

func (st *state) subnetInZone(z string) *subnet {
	for _, sn := range st.subnets {
		if aws.ToString(sn.AvailabilityZone) == z {
			return sn
		}
	}
	return nil
}

func (s *Server) capacityFault(instanceType, zoneName, capacityType string) bool {
	for _, f := range s.faults.InsufficientCapacity {
		if (f.InstanceType == "" || f.InstanceType == "*" || f.InstanceType == instanceType) &&
			(f.Zone == "" || f.Zone == "*" || f.Zone == zoneName) &&
			(f.CapacityType == "" || f.CapacityType == "*" || f.CapacityType == capacityType) {
			return true
		}
	}
	return false
}

// price is the hourly price of a launch (0 when the market does not exist). Call with s.mu.
func (s *Server) price(sp catalog.Spec, zoneName, capacityType string) float64 {
	if capacityType == catalog.CapacityTypeSpot {
		return s.spotPrice(sp, zoneName)
	}
	return sp.OnDemandPrice
}

// checkLaunch validates a spec the way EC2 does before placing capacity. It returns the
// resolved image and type. Call with s.mu.
func (s *Server) checkLaunch(sp *launchSpec) (*image, catalog.Spec, *apiError) {
	st := s.st
	cs, ok := s.spec(sp.instanceType)
	if sp.instanceType == "" {
		return nil, cs, apiErr(400, "MissingParameter", "The request must contain the parameter InstanceType")
	}
	if !ok {
		if _, known := s.catalog.Spec(sp.instanceType); known {
			return nil, cs, apiErr(400, "Unsupported", "Your requested instance type (%s) is not supported in your requested Availability Zone (%s). Please retry your request by not specifying an Availability Zone or choosing %s.",
				sp.instanceType, zoneOf(sp.subnet), strings.Join(zoneNames(st.zones), ", "))
		}
		return nil, cs, apiErr(400, "InvalidParameterValue", "Invalid value '%s' for InstanceType.", sp.instanceType)
	}
	if sp.imageID == "" {
		return nil, cs, apiErr(400, "MissingParameter", "The request must contain the parameter ImageId")
	}
	im := st.imageByID(sp.imageID)
	if im == nil {
		if !strings.HasPrefix(sp.imageID, "ami-") {
			return nil, cs, apiErr(400, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", sp.imageID)
		}
		return nil, cs, apiErr(400, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", sp.imageID)
	}
	if string(im.Architecture) != ec2Arch(cs.Arch) {
		return nil, cs, apiErr(400, "InvalidParameterValue", "The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again. You can use 'describe-instance-types' or 'describe-images' to discover the architecture of the instance type or AMI.",
			ec2Arch(cs.Arch), im.Architecture)
	}
	if sp.subnet == nil {
		return nil, cs, apiErr(400, "VPCIdNotSpecified", "No default VPC for this user. GroupName is only supported for EC2-Classic and default VPC.")
	}
	for _, id := range sp.sgIDs {
		if st.sgByID(id) == nil {
			return nil, cs, apiErr(400, "InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", id, aws.ToString(sp.subnet.VpcId))
		}
	}
	for _, n := range sp.sgNames {
		if st.sgByName(n) == nil {
			return nil, cs, apiErr(400, "InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", n, aws.ToString(sp.subnet.VpcId))
		}
	}
	if err := validateUserData(sp.userData); err != nil {
		return nil, cs, err.(*apiError)
	}
	if sp.profileName != "" && st.iam.profiles[sp.profileName] == nil {
		return nil, cs, apiErr(400, "InvalidParameterValue", "Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", sp.profileName)
	}
	if sp.profileArn != "" && st.iam.profileByArn(sp.profileArn) == nil {
		return nil, cs, apiErr(400, "InvalidParameterValue", "Value (%s) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN", sp.profileArn)
	}
	for _, bd := range sp.blockDevices {
		if bd.Ebs != nil && bd.Ebs.VolumeSize != nil && *bd.Ebs.VolumeSize < 1 {
			return nil, cs, apiErr(400, "InvalidParameterValue", "Volume size must be at least 1 GiB")
		}
	}
	if int64(sp.efa) > cs.EFA {
		return nil, cs, apiErr(400, "InvalidParameterCombination", "The instance type %s supports %d EFA interfaces; the launch asks for %d", cs.Name, cs.EFA, sp.efa)
	}
	return im, cs, nil
}

func zoneOf(sn *subnet) string {
	if sn == nil {
		return ""
	}
	return aws.ToString(sn.AvailabilityZone)
}

func zoneNames(zs []zone) []string {
	var out []string
	for _, z := range zs {
		out = append(out, z.name)
	}
	return out
}

// capacityError is EC2's insufficient capacity error for a type in a zone.
func (s *Server) capacityError(sp *launchSpec) *apiError {
	z := zoneOf(sp.subnet)
	var others []string
	for _, zz := range s.st.zones {
		if zz.name != z && !s.capacityFault(sp.instanceType, zz.name, sp.capacityType) {
			others = append(others, zz.name)
		}
	}
	if sp.capacityType == catalog.CapacityTypeSpot {
		return apiErr(500, "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request.")
	}
	msg := fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", sp.instanceType, z)
	if len(others) > 0 {
		msg += fmt.Sprintf(" You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.", sp.instanceType, strings.Join(others, ", "))
	}
	return apiErr(500, "InsufficientInstanceCapacity", "%s", msg)
}

// launch creates one instance from a validated spec. Call with s.mu.
func (s *Server) launch(sp *launchSpec, im *image, cs catalog.Spec, now time.Time) (*instance, *apiError) {
	st := s.st
	sn := sp.subnet
	r, rerr := s.slotFor(sp)
	if rerr != nil {
		return nil, rerr
	}
	if aws.ToInt32(sn.AvailableIpAddressCount) <= 0 {
		return nil, apiErr(400, "InsufficientFreeAddressesInSubnet", "There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", aws.ToString(sn.SubnetId))
	}
	sn.AvailableIpAddressCount = aws.Int32(aws.ToInt32(sn.AvailableIpAddressCount) - 1)
	ip := sn.base + sn.nextIP
	sn.nextIP++
	z, _ := st.zoneByName(aws.ToString(sn.AvailabilityZone))
	in := &instance{
		id: st.ids.id("i"), spec: cs, subnet: sn, zone: z, image: im,
		privateIP: ipString(ip), state: ec2types.InstanceStateNamePending, launchTime: now.UTC().Truncate(time.Second),
		runningAt: now.Add(s.faults.LaunchLatency.Duration), capacityType: sp.capacityType, userData: aws.ToString(sp.userData),
		keyName: sp.keyName, clientToken: sp.clientToken, ebsOptimized: sp.ebsOptimized, rootSizeGiB: map[string]int32{}, efa: sp.efa,
	}
	if in.capacityType == "" {
		in.capacityType = catalog.CapacityTypeOnDemand
	}
	in.holdSlot(r, sp)
	in.registerAt = in.runningAt.Add(s.faults.RegistrationLatency.Duration)
	in.dnsName = privateDNSName(in.privateIP, s.opts.Region)
	if in.capacityType == catalog.CapacityTypeSpot {
		in.spotRequestID = fmt.Sprintf("sir-%08x", st.ids.next("sir"))
	}
	in.eni = st.ids.id("eni")
	in.mac = fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", ip>>24, ip>>16&0xff, ip>>8&0xff, ip&0xff)
	sgs := append([]string(nil), sp.sgIDs...)
	for _, n := range sp.sgNames {
		sgs = append(sgs, aws.ToString(st.sgByName(n).GroupId))
	}
	if len(sgs) == 0 {
		sgs = []string{aws.ToString(st.sgs[0].GroupId)}
	}
	seen := map[string]bool{}
	for _, id := range sgs {
		if seen[id] {
			continue
		}
		seen[id] = true
		sg := st.sgByID(id)
		in.sgs = append(in.sgs, ec2types.GroupIdentifier{GroupId: aws.String(id), GroupName: sg.GroupName})
	}
	if sp.profileName != "" || sp.profileArn != "" {
		p := st.iam.profiles[sp.profileName]
		if p == nil {
			p = st.iam.profileByArn(sp.profileArn)
		}
		in.profile = &ec2types.IamInstanceProfile{Arn: aws.String(p.arn), Id: aws.String(p.id)}
	}
	in.metadata = ec2types.InstanceMetadataOptionsResponse{
		State: ec2types.InstanceMetadataOptionsStatePending, HttpTokens: ec2types.HttpTokensStateOptional,
		HttpPutResponseHopLimit: aws.Int32(1), HttpEndpoint: ec2types.InstanceMetadataEndpointStateEnabled,
		HttpProtocolIpv6: ec2types.InstanceMetadataProtocolStateDisabled, InstanceMetadataTags: ec2types.InstanceMetadataTagsStateDisabled,
	}
	if m := sp.metadata; m != nil {
		if m.HttpTokens != "" {
			in.metadata.HttpTokens = ec2types.HttpTokensState(m.HttpTokens)
		}
		if m.HttpPutResponseHopLimit != nil {
			in.metadata.HttpPutResponseHopLimit = aws.Int32(*m.HttpPutResponseHopLimit)
		}
		if m.HttpEndpoint != "" {
			in.metadata.HttpEndpoint = ec2types.InstanceMetadataEndpointState(m.HttpEndpoint)
		}
		if m.HttpProtocolIpv6 != "" {
			in.metadata.HttpProtocolIpv6 = ec2types.InstanceMetadataProtocolState(m.HttpProtocolIpv6)
		}
		if m.InstanceMetadataTags != "" {
			in.metadata.InstanceMetadataTags = ec2types.InstanceMetadataTagsState(m.InstanceMetadataTags)
		}
	}
	// Volumes: the image's mappings, overridden by the launch's.
	sizes := map[string]int32{}
	var devices []string
	for _, bd := range im.BlockDeviceMappings {
		d := aws.ToString(bd.DeviceName)
		devices = append(devices, d)
		if bd.Ebs != nil {
			sizes[d] = aws.ToInt32(bd.Ebs.VolumeSize)
		}
	}
	for _, bd := range sp.blockDevices {
		d := aws.ToString(bd.DeviceName)
		if bd.NoDevice != nil {
			delete(sizes, d)
			continue
		}
		if !contains(devices, d) {
			devices = append(devices, d)
		}
		if bd.Ebs != nil && bd.Ebs.VolumeSize != nil {
			sizes[d] = *bd.Ebs.VolumeSize
		} else if _, ok := sizes[d]; !ok {
			sizes[d] = 8
		}
	}
	for _, d := range devices {
		size, ok := sizes[d]
		if !ok {
			continue
		}
		in.rootSizeGiB[d] = size
		in.volumes = append(in.volumes, ec2types.InstanceBlockDeviceMapping{DeviceName: aws.String(d), Ebs: &ec2types.EbsInstanceBlockDevice{
			AttachTime: aws.Time(in.launchTime), DeleteOnTermination: aws.Bool(true), Status: ec2types.AttachmentStatusAttaching,
			VolumeId: aws.String(st.ids.id("vol")),
		}})
	}
	in.tags = cloneTags(sp.tags)
	if sp.lt != nil {
		setTags(&in.tags, []ec2types.Tag{
			{Key: aws.String("aws:ec2launchtemplate:id"), Value: aws.String(sp.lt.id)},
			{Key: aws.String("aws:ec2launchtemplate:version"), Value: aws.String(strconv.FormatInt(sp.ltVersion, 10))},
		})
	}
	if sp.fleetID != "" {
		setTags(&in.tags, []ec2types.Tag{{Key: aws.String("aws:ec2:fleet-id"), Value: aws.String(sp.fleetID)}})
	}
	st.instances[in.id] = in
	st.order = append(st.order, in.id)
	s.logf("launched %s %s %s in %s (%s)", in.id, cs.Name, in.capacityType, z.name, in.privateIP)
	st.emitStateChange(in, now)
	return in, nil
}

// privateDNSName is the EC2 private DNS name (and kubelet node name) for an address.
func privateDNSName(ip, region string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

// render is the instance as DescribeInstances reports it. Call with s.mu.
func (s *Server) render(in *instance) ec2types.Instance {
	code := stateCodes[in.state]
	vols := make([]ec2types.InstanceBlockDeviceMapping, len(in.volumes))
	for i, v := range in.volumes {
		c := *v.Ebs
		if in.state == ec2types.InstanceStateNameRunning {
			c.Status = ec2types.AttachmentStatusAttached
		}
		vols[i] = ec2types.InstanceBlockDeviceMapping{DeviceName: v.DeviceName, Ebs: &c}
	}
	md := in.metadata
	if in.state != ec2types.InstanceStateNamePending {
		md.State = ec2types.InstanceMetadataOptionsStateApplied
	}
	threads := int32(2)
	if in.spec.Arch == "arm64" || in.spec.VCPU == 1 {
		threads = 1
	}
	cores := max(int32(in.spec.VCPU)/threads, 1)
	out := ec2types.Instance{
		InstanceId: aws.String(in.id), ImageId: in.image.ImageId, InstanceType: ec2types.InstanceType(in.spec.Name),
		AmiLaunchIndex: aws.Int32(0), Architecture: in.image.Architecture, LaunchTime: aws.Time(in.launchTime),
		State: &ec2types.InstanceState{Code: aws.Int32(code), Name: in.state},
		Placement: &ec2types.Placement{AvailabilityZone: aws.String(in.zone.name), AvailabilityZoneId: aws.String(in.zone.id),
			GroupName: aws.String(""), Tenancy: ec2types.TenancyDefault},
		SubnetId: in.subnet.SubnetId, VpcId: in.subnet.VpcId, PrivateIpAddress: aws.String(in.privateIP),
		PrivateDnsName: aws.String(in.dnsName), PublicDnsName: aws.String(""),
		SecurityGroups: append([]ec2types.GroupIdentifier{}, in.sgs...), Tags: cloneTags(in.tags),
		RootDeviceName: in.image.RootDeviceName, RootDeviceType: ec2types.DeviceTypeEbs, BlockDeviceMappings: vols,
		VirtualizationType: ec2types.VirtualizationTypeHvm, Hypervisor: ec2types.HypervisorTypeXen, EnaSupport: aws.Bool(true),
		EbsOptimized: aws.Bool(in.ebsOptimized), SourceDestCheck: aws.Bool(true), MetadataOptions: &md,
		Monitoring:      &ec2types.Monitoring{State: ec2types.MonitoringStateDisabled},
		CpuOptions:      &ec2types.CpuOptions{CoreCount: aws.Int32(cores), ThreadsPerCore: aws.Int32(threads)},
		PlatformDetails: aws.String("Linux/UNIX"), UsageOperation: aws.String("RunInstances"),
		UsageOperationUpdateTime: aws.Time(in.launchTime), BootMode: ec2types.BootModeValuesUefi,
		CurrentInstanceBootMode: ec2types.InstanceBootModeValuesUefi,
		HibernationOptions:      &ec2types.HibernationOptions{Configured: aws.Bool(false)},
		EnclaveOptions:          &ec2types.EnclaveOptions{Enabled: aws.Bool(false)},
		PrivateDnsNameOptions: &ec2types.PrivateDnsNameOptionsResponse{HostnameType: ec2types.HostnameTypeIpName,
			EnableResourceNameDnsARecord: aws.Bool(false), EnableResourceNameDnsAAAARecord: aws.Bool(false)},
		MaintenanceOptions:    &ec2types.InstanceMaintenanceOptions{AutoRecovery: ec2types.InstanceAutoRecoveryStateDefault},
		StateTransitionReason: aws.String(in.transition), StateReason: in.stateReason, IamInstanceProfile: in.profile,
		ProductCodes: []ec2types.ProductCode{},
	}
	if in.clientToken != "" {
		out.ClientToken = aws.String(in.clientToken)
	}
	if in.keyName != "" {
		out.KeyName = aws.String(in.keyName)
	}
	if in.capacityType == catalog.CapacityTypeSpot {
		out.InstanceLifecycle = ec2types.InstanceLifecycleTypeSpot
		out.SpotInstanceRequestId = aws.String(in.spotRequestID)
	}
	in.reservationView(&out)
	if in.state != ec2types.InstanceStateNameTerminated {
		out.NetworkInterfaces = []ec2types.InstanceNetworkInterface{{
			NetworkInterfaceId: aws.String(in.eni), SubnetId: in.subnet.SubnetId, VpcId: in.subnet.VpcId,
			PrivateIpAddress: aws.String(in.privateIP), PrivateDnsName: aws.String(in.dnsName), MacAddress: aws.String(in.mac),
			OwnerId: aws.String(s.opts.AccountID), Status: ec2types.NetworkInterfaceStatusInUse, InterfaceType: aws.String("interface"),
			SourceDestCheck: aws.Bool(true), Groups: append([]ec2types.GroupIdentifier{}, in.sgs...), Description: aws.String(""),
			Attachment: &ec2types.InstanceNetworkInterfaceAttachment{AttachmentId: aws.String("eni-attach-" + strings.TrimPrefix(in.eni, "eni-")),
				AttachTime: aws.Time(in.launchTime), DeleteOnTermination: aws.Bool(true), DeviceIndex: aws.Int32(0),
				NetworkCardIndex: aws.Int32(0), Status: ec2types.AttachmentStatusAttached},
			PrivateIpAddresses: []ec2types.InstancePrivateIpAddress{{Primary: aws.Bool(true), PrivateIpAddress: aws.String(in.privateIP),
				PrivateDnsName: aws.String(in.dnsName)}},
			Ipv6Addresses: []ec2types.InstanceIpv6Address{},
		}}
	} else {
		out.PrivateIpAddress = nil
		out.SubnetId, out.VpcId = nil, nil
		out.NetworkInterfaces = []ec2types.InstanceNetworkInterface{}
		out.SecurityGroups = []ec2types.GroupIdentifier{}
		out.BlockDeviceMappings = []ec2types.InstanceBlockDeviceMapping{}
	}
	return out
}

// ---- RunInstances ----

func (s *Server) runInstances(rc *reqCtx, in *ec2.RunInstancesInput) (any, error) {
	minC, maxC := aws.ToInt32(in.MinCount), aws.ToInt32(in.MaxCount)
	if in.MinCount == nil {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter MinCount")
	}
	if in.MaxCount == nil {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter MaxCount")
	}
	if minC < 1 || maxC < minC {
		return nil, apiErr(400, "InvalidParameterValue", "Value (%d) for parameter minCount is invalid. Expected a positive number not greater than maxCount.", minC)
	}
	if err := validateUserData(in.UserData); err != nil {
		return nil, err
	}
	for _, ts := range in.TagSpecifications {
		if err := validateTagKeys(ts.Tags); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if tok := aws.ToString(in.ClientToken); tok != "" {
		if prev, ok := st.tokens["RunInstances/"+tok]; ok {
			return prev, nil
		}
	}
	sp := &launchSpec{capacityType: catalog.CapacityTypeOnDemand, clientToken: aws.ToString(in.ClientToken)}
	if in.LaunchTemplate != nil {
		lt, ver, err := st.resolveLT(in.LaunchTemplate.LaunchTemplateId, in.LaunchTemplate.LaunchTemplateName, in.LaunchTemplate.Version)
		if err != nil {
			return nil, err
		}
		sp.fromLaunchTemplate(st, lt, ver)
		if sp.capacityType == "" {
			sp.capacityType = catalog.CapacityTypeOnDemand
		}
	}
	if in.InstanceType != "" {
		sp.instanceType = string(in.InstanceType)
	}
	if in.ImageId != nil {
		sp.imageID = *in.ImageId
	}
	if len(in.SecurityGroupIds) > 0 {
		sp.sgIDs = in.SecurityGroupIds
	}
	if len(in.SecurityGroups) > 0 {
		sp.sgNames = in.SecurityGroups
	}
	if in.SubnetId != nil {
		sp.subnet = st.subnetByID(*in.SubnetId)
		if sp.subnet == nil {
			return nil, apiErr(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", *in.SubnetId)
		}
	}
	for _, ni := range in.NetworkInterfaces {
		if ni.SubnetId != nil {
			if sp.subnet = st.subnetByID(*ni.SubnetId); sp.subnet == nil {
				return nil, apiErr(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", *ni.SubnetId)
			}
		}
		sp.sgIDs = append(sp.sgIDs, ni.Groups...)
	}
	if in.Placement != nil && in.Placement.AvailabilityZone != nil {
		z := *in.Placement.AvailabilityZone
		if _, ok := st.zoneByName(z); !ok {
			return nil, apiErr(400, "InvalidParameterValue", "Invalid availability zone: [%s]", z)
		}
		if sp.subnet == nil {
			sp.subnet = st.subnetInZone(z)
		} else if aws.ToString(sp.subnet.AvailabilityZone) != z {
			return nil, apiErr(400, "InvalidParameterCombination", "The specified subnet is not in the specified availability zone.")
		}
	}
	if in.UserData != nil {
		sp.userData = in.UserData
	}
	if in.KeyName != nil {
		sp.keyName = *in.KeyName
	}
	if in.IamInstanceProfile != nil {
		sp.profileName, sp.profileArn = aws.ToString(in.IamInstanceProfile.Name), aws.ToString(in.IamInstanceProfile.Arn)
	}
	if m := in.MetadataOptions; m != nil {
		sp.metadata = &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens: ec2types.LaunchTemplateHttpTokensState(m.HttpTokens), HttpPutResponseHopLimit: m.HttpPutResponseHopLimit,
			HttpEndpoint:         ec2types.LaunchTemplateInstanceMetadataEndpointState(m.HttpEndpoint),
			HttpProtocolIpv6:     ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(m.HttpProtocolIpv6),
			InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsState(m.InstanceMetadataTags),
		}
	}
	for _, bd := range in.BlockDeviceMappings {
		var c ec2types.LaunchTemplateBlockDeviceMappingRequest
		convertByName(&c, &bd)
		sp.blockDevices = append(sp.blockDevices, c)
	}
	if in.EbsOptimized != nil {
		sp.ebsOptimized = *in.EbsOptimized
	}
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			setTags(&sp.tags, ts.Tags)
		}
	}
	sp.runReservationSpec(in)
	if mo := in.InstanceMarketOptions; mo != nil && mo.MarketType == ec2types.MarketTypeSpot {
		sp.capacityType = catalog.CapacityTypeSpot
		if mo.SpotOptions != nil {
			sp.maxPrice = mo.SpotOptions.MaxPrice
		}
	}
	im, cs, aerr := s.checkLaunch(sp)
	if aerr != nil {
		return nil, aerr
	}
	if sp.reservation, aerr = s.targetReservation(sp, ""); aerr != nil {
		return nil, aerr
	}
	if err := dryRun(in); err != nil {
		return nil, err
	}
	price := s.price(cs, zoneOf(sp.subnet), sp.capacityType)
	if price <= 0 {
		return nil, apiErr(400, "Unsupported", "The requested configuration is currently not supported. Please check the documentation for supported configurations.")
	}
	if sp.maxPrice != nil {
		if mp, err := strconv.ParseFloat(*sp.maxPrice, 64); err == nil && mp < price {
			return nil, apiErr(400, "SpotMaxPriceTooLow", "Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", *sp.maxPrice, formatPrice(price))
		}
	}
	// A reservation's capacity is held for it: capacity faults do not apply.
	if sp.reservation == nil && s.capacityFault(sp.instanceType, zoneOf(sp.subnet), sp.capacityType) {
		return nil, s.capacityError(sp)
	}
	n := maxC
	if r := sp.reservation; r != nil {
		if r.available < minC {
			return nil, reservationFull(r)
		}
		n = min(n, r.available)
	}
	if free := aws.ToInt32(sp.subnet.AvailableIpAddressCount); free < n {
		n = free
	}
	if n < minC {
		return nil, apiErr(400, "InsufficientFreeAddressesInSubnet", "There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", aws.ToString(sp.subnet.SubnetId))
	}
	out := &ec2.RunInstancesOutput{ReservationId: aws.String(st.ids.id("r")), OwnerId: aws.String(s.opts.AccountID),
		Groups: []ec2types.GroupIdentifier{}}
	for i := int32(0); i < n; i++ {
		inst, err := s.launch(sp, im, cs, rc.now)
		if err != nil {
			return nil, err
		}
		r := s.render(inst)
		r.AmiLaunchIndex = aws.Int32(i)
		out.Instances = append(out.Instances, r)
	}
	s.notify()
	if tok := aws.ToString(in.ClientToken); tok != "" {
		st.tokens["RunInstances/"+tok] = out
	}
	return out, nil
}

// ---- CreateFleet ----

type fleetPool struct {
	idx      int
	spec     launchSpec
	ltSpec   *ec2types.FleetLaunchTemplateSpecification
	override *ec2types.FleetLaunchTemplateOverrides
	weight   float64
	priority float64
	hasPrio  bool
	err      *apiError // configuration error found while resolving
	score    uint64    // simulated spot capacity depth (higher is deeper)
}

func (s *Server) createFleet(rc *reqCtx, in *ec2.CreateFleetInput) (any, error) {
	if in.Type != ec2types.FleetTypeInstant {
		return nil, apiErr(400, "InvalidParameterValue", "The simulator supports only fleets of type instant (got %q).", in.Type)
	}
	if len(in.LaunchTemplateConfigs) == 0 {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter LaunchTemplateConfigs")
	}
	tcs := in.TargetCapacitySpecification
	if tcs == nil || tcs.TotalTargetCapacity == nil {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter TargetCapacitySpecification.TotalTargetCapacity")
	}
	for _, ts := range in.TagSpecifications {
		if err := validateTagKeys(ts.Tags); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if tok := aws.ToString(in.ClientToken); tok != "" {
		if prev, ok := st.tokens["CreateFleet/"+tok]; ok {
			return prev, nil
		}
	}
	fleetID := "fleet-" + st.ids.uuid("fleet")
	var fleetTags []ec2types.Tag
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			setTags(&fleetTags, ts.Tags)
		}
	}
	var pools []*fleetPool
	for _, cfg := range in.LaunchTemplateConfigs {
		ltsr := cfg.LaunchTemplateSpecification
		if ltsr == nil {
			return nil, apiErr(400, "MissingParameter", "The request must contain the parameter LaunchTemplateConfigs.LaunchTemplateSpecification")
		}
		lt, ver, lerr := st.resolveLT(ltsr.LaunchTemplateId, ltsr.LaunchTemplateName, ltsr.Version)
		respSpec := &ec2types.FleetLaunchTemplateSpecification{LaunchTemplateId: ltsr.LaunchTemplateId,
			LaunchTemplateName: ltsr.LaunchTemplateName, Version: ltsr.Version}
		if lt != nil {
			respSpec.LaunchTemplateId = aws.String(lt.id)
			respSpec.LaunchTemplateName = nil
			if respSpec.Version == nil {
				respSpec.Version = aws.String(strconv.FormatInt(ver.number, 10))
			}
		}
		overrides := cfg.Overrides
		if len(overrides) == 0 {
			overrides = []ec2types.FleetLaunchTemplateOverridesRequest{{}}
		}
		for _, ov := range overrides {
			p := &fleetPool{idx: len(pools), ltSpec: respSpec, weight: 1, err: lerr}
			var ro ec2types.FleetLaunchTemplateOverrides
			convertByName(&ro, &ov)
			p.override = &ro
			if lt != nil {
				p.spec.fromLaunchTemplate(st, lt, ver)
			}
			if ov.InstanceType != "" {
				p.spec.instanceType = string(ov.InstanceType)
			}
			if ov.ImageId != nil {
				p.spec.imageID = *ov.ImageId
			}
			if ov.SubnetId != nil {
				p.spec.subnet = st.subnetByID(*ov.SubnetId)
				if p.spec.subnet == nil && p.err == nil {
					p.err = apiErr(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", *ov.SubnetId)
				}
			} else if ov.AvailabilityZone != nil {
				p.spec.subnet = st.subnetInZone(*ov.AvailabilityZone)
			}
			if ov.WeightedCapacity != nil && *ov.WeightedCapacity > 0 {
				p.weight = *ov.WeightedCapacity
			}
			if ov.Priority != nil {
				p.priority, p.hasPrio = *ov.Priority, true
			}
			p.spec.maxPrice = ov.MaxPrice
			p.spec.fleetID = fleetID
			p.spec.clientToken = ""
			setTags(&p.spec.tags, fleetTags)
			if p.spec.subnet != nil {
				p.override.AvailabilityZone = p.spec.subnet.AvailabilityZone
			}
			p.score = spotDepth(s.opts.Seed, p.spec.instanceType, zoneOf(p.spec.subnet))
			pools = append(pools, p)
		}
	}
	total := float64(aws.ToInt32(tcs.TotalTargetCapacity))
	odTarget, spotTarget := 0.0, 0.0
	switch tcs.DefaultTargetCapacityType {
	case ec2types.DefaultTargetCapacityTypeSpot:
		spotTarget = total
	case ec2types.DefaultTargetCapacityTypeOnDemand, "", ec2types.DefaultTargetCapacityTypeCapacityBlock:
		// Capacity Block instances are On-Demand instances in a reservation.
		odTarget = total
	default:
		return nil, apiErr(400, "InvalidParameterValue", "The simulator does not support capacity type %q.", tcs.DefaultTargetCapacityType)
	}
	if tcs.OnDemandTargetCapacity != nil {
		odTarget = float64(*tcs.OnDemandTargetCapacity)
		spotTarget = total - odTarget
	}
	if tcs.SpotTargetCapacity != nil {
		spotTarget = float64(*tcs.SpotTargetCapacity)
		if tcs.OnDemandTargetCapacity == nil {
			odTarget = total - spotTarget
		}
	}
	if err := dryRun(in); err != nil {
		return nil, err
	}
	out := &ec2.CreateFleetOutput{FleetId: aws.String(fleetID), Errors: []ec2types.CreateFleetError{}, Instances: []ec2types.CreateFleetInstance{}}
	type plan struct {
		pool  *fleetPool
		ct    string
		count int
		im    *image
		cs    catalog.Spec
		res   *capacityReservation
	}
	var plans []plan
	var errs []ec2types.CreateFleetError
	// held counts the slots of each reservation the plans take, so pools sharing one stop at
	// its available count.
	held := map[*capacityReservation]int32{}
	planType := func(ct string, target float64, minTarget int32) {
		if target <= 0 {
			return
		}
		order := s.orderPools(pools, ct, in)
		remaining := target
		launched := 0.0
		var mine []plan
		var myErrs []ec2types.CreateFleetError
		for _, p := range order {
			if remaining <= 0 {
				break
			}
			sp := p.spec
			sp.capacityType = ct
			lifecycle := fleetLifecycle(ct, tcs.DefaultTargetCapacityType)
			fail := func(e *apiError) {
				myErrs = append(myErrs, ec2types.CreateFleetError{ErrorCode: aws.String(e.Code), ErrorMessage: aws.String(e.Message),
					Lifecycle: lifecycle, LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
						LaunchTemplateSpecification: p.ltSpec, Overrides: p.override}})
			}
			if p.err != nil {
				fail(p.err)
				continue
			}
			im, cs, aerr := s.checkLaunch(&sp)
			if aerr != nil {
				fail(aerr)
				continue
			}
			price := s.price(cs, zoneOf(sp.subnet), ct)
			if price <= 0 {
				fail(apiErr(400, "UnfulfillableCapacity", "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again."))
				continue
			}
			if sp.maxPrice != nil {
				if mp, err := strconv.ParseFloat(*sp.maxPrice, 64); err == nil && mp < price {
					fail(apiErr(400, "SpotMaxPriceTooLow", "Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", *sp.maxPrice, formatPrice(price)))
					continue
				}
			}
			res, rerr := s.targetReservation(&sp, tcs.DefaultTargetCapacityType)
			if rerr != nil {
				fail(rerr)
				continue
			}
			// A reservation's capacity is held for it: capacity faults do not apply.
			if res == nil && s.capacityFault(sp.instanceType, zoneOf(sp.subnet), ct) {
				fail(s.capacityError(&sp))
				continue
			}
			n := int((remaining + p.weight - 1e-9) / p.weight)
			if n < 1 {
				n = 1
			}
			if n, rerr = reservedCount(res, held, n); rerr != nil {
				fail(rerr)
				continue
			}
			if free := int(aws.ToInt32(sp.subnet.AvailableIpAddressCount)); free < n {
				if free == 0 {
					fail(apiErr(400, "InsufficientFreeAddressesInSubnet", "There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", aws.ToString(sp.subnet.SubnetId)))
					continue
				}
				n = free
			}
			mine = append(mine, plan{pool: p, ct: ct, count: n, im: im, cs: cs, res: res})
			held[res] += int32(n)
			remaining -= float64(n) * p.weight
			launched += float64(n) * p.weight
		}
		if minTarget > 0 && launched < float64(minTarget) {
			myErrs = append(myErrs, ec2types.CreateFleetError{ErrorCode: aws.String("UnfulfillableCapacity"),
				ErrorMessage: aws.String("Unable to fulfill capacity due to your request configuration. Please adjust your request and try again.")})
			for _, pl := range mine {
				held[pl.res] -= int32(pl.count)
			}
			mine = nil
		}
		plans = append(plans, mine...)
		errs = append(errs, myErrs...)
	}
	var odMin, spotMin int32
	if in.OnDemandOptions != nil {
		odMin = aws.ToInt32(in.OnDemandOptions.MinTargetCapacity)
	}
	if in.SpotOptions != nil {
		spotMin = aws.ToInt32(in.SpotOptions.MinTargetCapacity)
	}
	planType(catalog.CapacityTypeOnDemand, odTarget, odMin)
	planType(catalog.CapacityTypeSpot, spotTarget, spotMin)
	for _, pl := range plans {
		sp := pl.pool.spec
		sp.capacityType, sp.reservation = pl.ct, pl.res
		group := ec2types.CreateFleetInstance{InstanceType: ec2types.InstanceType(pl.cs.Name), LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
			LaunchTemplateSpecification: pl.pool.ltSpec, Overrides: pl.pool.override}}
		group.Lifecycle = fleetLifecycle(pl.ct, tcs.DefaultTargetCapacityType)
		for i := 0; i < pl.count; i++ {
			inst, err := s.launch(&sp, pl.im, pl.cs, rc.now)
			if err != nil {
				break
			}
			group.InstanceIds = append(group.InstanceIds, inst.id)
		}
		if len(group.InstanceIds) > 0 {
			out.Instances = append(out.Instances, group)
		}
	}
	out.Errors = errs
	if len(out.Instances) > 0 {
		s.notify()
	}
	if tok := aws.ToString(in.ClientToken); tok != "" {
		st.tokens["CreateFleet/"+tok] = out
	}
	return out, nil
}

// spotDepth is a deterministic stand-in for the spare capacity of a spot pool.
func spotDepth(seed uint64, typ, zone string) uint64 {
	h := uint64(14695981039346656037) ^ seed
	for _, c := range []byte(typ + "/" + zone) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// orderPools orders fleet pools by the allocation strategy of a capacity type. Call with s.mu.
func (s *Server) orderPools(pools []*fleetPool, ct string, in *ec2.CreateFleetInput) []*fleetPool {
	out := append([]*fleetPool(nil), pools...)
	priceOf := func(p *fleetPool) float64 {
		cs, ok := s.spec(p.spec.instanceType)
		if !ok || p.spec.subnet == nil {
			return 1e18
		}
		pr := s.price(cs, zoneOf(p.spec.subnet), ct)
		if pr <= 0 {
			return 1e18
		}
		return pr / p.weight
	}
	prio := func(p *fleetPool) float64 {
		if p.hasPrio {
			return p.priority
		}
		return 1e18
	}
	if ct == catalog.CapacityTypeOnDemand {
		strategy := ec2types.FleetOnDemandAllocationStrategyLowestPrice
		if in.OnDemandOptions != nil && in.OnDemandOptions.AllocationStrategy != "" {
			strategy = in.OnDemandOptions.AllocationStrategy
		}
		slices.SortStableFunc(out, func(a, b *fleetPool) int {
			if strategy == ec2types.FleetOnDemandAllocationStrategyPrioritized {
				if c := cmp.Compare(prio(a), prio(b)); c != 0 {
					return c
				}
			}
			return cmp.Compare(priceOf(a), priceOf(b))
		})
		return out
	}
	strategy := ec2types.SpotAllocationStrategyLowestPrice
	if in.SpotOptions != nil && in.SpotOptions.AllocationStrategy != "" {
		strategy = in.SpotOptions.AllocationStrategy
	}
	slices.SortStableFunc(out, func(a, b *fleetPool) int {
		switch strategy {
		case ec2types.SpotAllocationStrategyCapacityOptimized:
			return cmp.Compare(b.score, a.score)
		case ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized:
			if c := cmp.Compare(prio(a), prio(b)); c != 0 {
				return c
			}
			return cmp.Compare(b.score, a.score)
		case ec2types.SpotAllocationStrategyPriceCapacityOptimized:
			// The cheapest pools first; among equally priced pools, the deepest.
			if c := cmp.Compare(priceOf(a), priceOf(b)); c != 0 {
				return c
			}
			return cmp.Compare(b.score, a.score)
		default:
			return cmp.Compare(priceOf(a), priceOf(b))
		}
	})
	return out
}

// ---- DescribeInstances / TerminateInstances ----

func validInstanceID(id string) bool {
	rest, ok := strings.CutPrefix(id, "i-")
	if !ok || (len(rest) != 8 && len(rest) != 17) {
		return false
	}
	for _, c := range rest {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func (s *Server) describeInstances(rc *reqCtx, in *ec2.DescribeInstancesInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	if err := checkMaxResults(in.MaxResults, 5, 1000, "instancesSet", len(in.InstanceIds)); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, id := range in.InstanceIds {
		if !validInstanceID(id) {
			return nil, apiErr(400, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if s.st.instances[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) == 1 {
		return nil, apiErr(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	} else if len(missing) > 1 {
		return nil, apiErr(400, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
	var matched []ec2types.Instance
	for _, id := range s.st.order {
		inst := s.st.instances[id]
		if inst == nil || (len(in.InstanceIds) > 0 && !contains(in.InstanceIds, id)) {
			continue
		}
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "instance-id":
				return []string{inst.id}, true
			case "instance-state-name":
				return []string{string(inst.state)}, true
			case "instance-state-code":
				return []string{strconv.Itoa(int(stateCodes[inst.state]))}, true
			case "instance-type":
				return []string{inst.spec.Name}, true
			case "availability-zone":
				return []string{inst.zone.name}, true
			case "subnet-id":
				return []string{aws.ToString(inst.subnet.SubnetId)}, true
			case "vpc-id":
				return []string{aws.ToString(inst.subnet.VpcId)}, true
			case "image-id":
				return []string{aws.ToString(inst.image.ImageId)}, true
			case "private-ip-address":
				return []string{inst.privateIP}, true
			case "private-dns-name":
				return []string{inst.dnsName}, true
			case "instance-lifecycle":
				if inst.capacityType == catalog.CapacityTypeSpot {
					return []string{"spot"}, true
				}
				return inst.reservationFilter(name)
			case "spot-instance-request-id":
				return []string{inst.spotRequestID}, true
			case "architecture":
				return []string{ec2Arch(inst.spec.Arch)}, true
			case "launch-template-id", "launch-template.launch-template-id":
				v, _ := tagValue(inst.tags, "aws:ec2launchtemplate:id")
				return []string{v}, true
			case "instance.group-id", "group-id":
				var out []string
				for _, g := range inst.sgs {
					out = append(out, aws.ToString(g.GroupId))
				}
				return out, true
			case "iam-instance-profile.arn":
				if inst.profile != nil {
					return []string{aws.ToString(inst.profile.Arn)}, true
				}
				return nil, true
			case "client-token":
				return []string{inst.clientToken}, true
			}
			if v, ok := inst.reservationFilter(name); ok {
				return v, true
			}
			return tagFilter(inst.tags, name)
		})
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, s.render(inst))
		}
	}
	pageItems, next, err := page(matched, in.MaxResults, in.NextToken, 0)
	if err != nil {
		return nil, err
	}
	out := &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{}, NextToken: next}
	for _, inst := range pageItems {
		out.Reservations = append(out.Reservations, ec2types.Reservation{
			ReservationId: aws.String("r-" + strings.TrimPrefix(aws.ToString(inst.InstanceId), "i-")),
			OwnerId:       aws.String(s.opts.AccountID), Groups: []ec2types.GroupIdentifier{},
			Instances: []ec2types.Instance{inst},
		})
	}
	return out, nil
}

func (s *Server) terminateInstances(rc *reqCtx, in *ec2.TerminateInstancesInput) (any, error) {
	if len(in.InstanceIds) == 0 {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, id := range in.InstanceIds {
		if !validInstanceID(id) {
			return nil, apiErr(400, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if s.st.instances[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, apiErr(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", strings.Join(missing, ", "))
	}
	if err := dryRun(in); err != nil {
		return nil, err
	}
	out := &ec2.TerminateInstancesOutput{TerminatingInstances: []ec2types.InstanceStateChange{}}
	for _, id := range in.InstanceIds {
		inst := s.st.instances[id]
		prev := inst.state
		s.beginTermination(inst, rc.now, &ec2types.StateReason{Code: aws.String("Client.UserInitiatedShutdown"),
			Message: aws.String("Client.UserInitiatedShutdown: User initiated shutdown")},
			fmt.Sprintf("User initiated (%s)", rc.now.UTC().Format("2006-01-02 15:04:05 GMT")))
		out.TerminatingInstances = append(out.TerminatingInstances, ec2types.InstanceStateChange{
			InstanceId:    aws.String(id),
			PreviousState: &ec2types.InstanceState{Code: aws.Int32(stateCodes[prev]), Name: prev},
			CurrentState:  &ec2types.InstanceState{Code: aws.Int32(stateCodes[inst.state]), Name: inst.state},
		})
	}
	s.notify()
	return out, nil
}

// beginTermination moves an instance to shutting-down. Call with s.mu.
func (s *Server) beginTermination(inst *instance, now time.Time, reason *ec2types.StateReason, transition string) {
	switch inst.state {
	case ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameTerminated:
		return
	}
	inst.state = ec2types.InstanceStateNameShuttingDown
	s.st.releaseSlot(inst)
	inst.terminateAt = now.Add(s.faults.TerminationLatency.Duration)
	inst.stateReason = reason
	inst.transition = transition
	s.logf("terminating %s (%s)", inst.id, aws.ToString(reason.Code))
	s.st.emitStateChange(inst, now)
}

// advanceInstances finishes launches and terminations that are due, after the reservations'
// dates (a Capacity Block near its end terminates its instances). Call with s.mu.
func (st *state) advanceInstances(now time.Time) bool {
	changed := st.advanceReservations(now)
	for _, id := range st.order {
		inst := st.instances[id]
		if inst == nil {
			continue
		}
		switch inst.state {
		case ec2types.InstanceStateNamePending:
			if !now.Before(inst.runningAt) {
				inst.state = ec2types.InstanceStateNameRunning
				st.emitStateChange(inst, now)
				changed = true
			}
		case ec2types.InstanceStateNameShuttingDown:
			if !now.Before(inst.terminateAt) {
				inst.state = ec2types.InstanceStateNameTerminated
				inst.terminatedAt = now
				inst.subnet.AvailableIpAddressCount = aws.Int32(aws.ToInt32(inst.subnet.AvailableIpAddressCount) + 1)
				st.emitStateChange(inst, now)
				changed = true
			}
		}
		if inst.state == ec2types.InstanceStateNameRunning && !inst.interruptAt.IsZero() && !now.Before(inst.interruptAt) {
			inst.interruptAt = time.Time{}
			st.s.beginTermination(inst, now, &ec2types.StateReason{Code: aws.String("Server.SpotInstanceTermination"),
				Message: aws.String("Server.SpotInstanceTermination: Spot instance termination")}, "Service initiated")
			changed = true
		}
	}
	// Terminated instances stay visible for an hour, as on EC2.
	kept := st.order[:0]
	for _, id := range st.order {
		inst := st.instances[id]
		if inst != nil && inst.state == ec2types.InstanceStateNameTerminated && now.Sub(inst.terminatedAt) > time.Hour {
			delete(st.instances, id)
			changed = true
			continue
		}
		kept = append(kept, id)
	}
	st.order = kept
	return changed
}
