package awssim

import (
	"encoding/base64"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func (s *Server) ec2Service() *service {
	sv := &service{signingName: "ec2", proto: protoEC2Query, xmlns: "http://ec2.amazonaws.com/doc/2016-11-15/",
		version: "2016-11-15", reqTable: ec2Request, respTable: ec2Response, regional: true}
	sv.register(
		op("DescribeAvailabilityZones", s.describeAvailabilityZones),
		op("DescribeRegions", s.describeRegions),
		op("DescribeVpcs", s.describeVpcs),
		op("DescribeSubnets", s.describeSubnets),
		op("DescribeSecurityGroups", s.describeSecurityGroups),
		op("DescribeImages", s.describeImages),
		op("CreateTags", s.createTags),
		op("DeleteTags", s.deleteTags),
		op("DescribeInstanceTypes", s.describeInstanceTypes),
		op("DescribeInstanceTypeOfferings", s.describeInstanceTypeOfferings),
		op("DescribeSpotPriceHistory", s.describeSpotPriceHistory),
		op("CreateLaunchTemplate", s.createLaunchTemplate),
		op("DeleteLaunchTemplate", s.deleteLaunchTemplate),
		op("DescribeLaunchTemplates", s.describeLaunchTemplates),
		op("DescribeLaunchTemplateVersions", s.describeLaunchTemplateVersions),
		op("RunInstances", s.runInstances),
		op("CreateFleet", s.createFleet),
		op("DescribeInstances", s.describeInstances),
		op("TerminateInstances", s.terminateInstances),
		op("DescribeCapacityReservations", s.describeCapacityReservations),
	)
	return sv
}

// dryRun answers a request with DryRun=true the way EC2 does after validating it.
func dryRun(in any) error {
	v := reflect.ValueOf(in).Elem().FieldByName("DryRun")
	if v.IsValid() && v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Bool() {
		return apiErr(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}

// page cuts a list for MaxResults/NextToken pagination; tokens are opaque offsets.
func page[T any](items []T, maxResults *int32, nextToken *string, def int) ([]T, *string, error) {
	off := 0
	if t := aws.ToString(nextToken); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if err != nil || err2 != nil || n < 0 || n > len(items) || !strings.HasPrefix(string(b), "offset:") {
			return nil, nil, apiErr(400, "InvalidParameterValue", "Unable to parse pagination token")
		}
		off = n
	}
	limit := def
	if maxResults != nil && *maxResults > 0 {
		limit = int(*maxResults)
	}
	if limit <= 0 || off+limit >= len(items) {
		return items[off:], nil, nil
	}
	next := base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(off+limit)))
	return items[off : off+limit], &next, nil
}

func (s *Server) describeAvailabilityZones(rc *reqCtx, in *ec2.DescribeAvailabilityZonesInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &ec2.DescribeAvailabilityZonesOutput{AvailabilityZones: []ec2types.AvailabilityZone{}}
	for _, z := range s.st.zones {
		if len(in.ZoneNames) > 0 && !contains(in.ZoneNames, z.name) {
			continue
		}
		if len(in.ZoneIds) > 0 && !contains(in.ZoneIds, z.id) {
			continue
		}
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{z.name}, true
			case "zone-id":
				return []string{z.id}, true
			case "state":
				return []string{"available"}, true
			case "region-name":
				return []string{s.opts.Region}, true
			case "zone-type":
				return []string{"availability-zone"}, true
			case "group-name", "network-border-group":
				return []string{s.opts.Region}, true
			case "opt-in-status":
				return []string{"opt-in-not-required"}, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		out.AvailabilityZones = append(out.AvailabilityZones, ec2types.AvailabilityZone{
			ZoneName: aws.String(z.name), ZoneId: aws.String(z.id), RegionName: aws.String(s.opts.Region),
			State: ec2types.AvailabilityZoneStateAvailable, ZoneType: aws.String("availability-zone"),
			OptInStatus: ec2types.AvailabilityZoneOptInStatusOptInNotRequired, GroupName: aws.String(s.opts.Region),
			NetworkBorderGroup: aws.String(s.opts.Region), Messages: []ec2types.AvailabilityZoneMessage{},
		})
	}
	for _, n := range in.ZoneNames {
		if _, ok := s.st.zoneByName(n); !ok {
			return nil, apiErr(400, "InvalidParameterValue", "Invalid availability zone: [%s]", n)
		}
	}
	return out, nil
}

func (s *Server) describeRegions(rc *reqCtx, in *ec2.DescribeRegionsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	return &ec2.DescribeRegionsOutput{Regions: []ec2types.Region{{
		RegionName: aws.String(s.opts.Region), Endpoint: aws.String("ec2." + s.opts.Region + ".amazonaws.com"),
		OptInStatus: aws.String("opt-in-not-required"),
	}}}, nil
}

func (s *Server) describeVpcs(rc *reqCtx, in *ec2.DescribeVpcsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.st.vpc
	for _, id := range in.VpcIds {
		if id != aws.ToString(v.VpcId) {
			return nil, apiErr(400, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
		}
	}
	ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
		switch name {
		case "vpc-id":
			return []string{aws.ToString(v.VpcId)}, true
		case "cidr", "cidr-block-association.cidr-block":
			return []string{aws.ToString(v.CidrBlock)}, true
		case "state":
			return []string{string(v.State)}, true
		case "is-default":
			return []string{"false"}, true
		case "owner-id":
			return []string{s.opts.AccountID}, true
		}
		return tagFilter(v.Tags, name)
	})
	if err != nil {
		return nil, err
	}
	out := &ec2.DescribeVpcsOutput{Vpcs: []ec2types.Vpc{}}
	if ok {
		v.Tags = cloneTags(v.Tags)
		out.Vpcs = append(out.Vpcs, v)
	}
	return out, nil
}

func (s *Server) describeSubnets(rc *reqCtx, in *ec2.DescribeSubnetsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.SubnetIds {
		if s.st.subnetByID(id) == nil {
			if !strings.HasPrefix(id, "subnet-") {
				return nil, apiErr(400, "InvalidSubnetID.Malformed", "Invalid id: \"%s\"", id)
			}
			return nil, apiErr(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	out := &ec2.DescribeSubnetsOutput{Subnets: []ec2types.Subnet{}}
	for _, sn := range s.st.subnets {
		if len(in.SubnetIds) > 0 && !contains(in.SubnetIds, aws.ToString(sn.SubnetId)) {
			continue
		}
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "subnet-id":
				return []string{aws.ToString(sn.SubnetId)}, true
			case "vpc-id":
				return []string{aws.ToString(sn.VpcId)}, true
			case "availability-zone", "availabilityZone":
				return []string{aws.ToString(sn.AvailabilityZone)}, true
			case "availability-zone-id", "availabilityZoneId":
				return []string{aws.ToString(sn.AvailabilityZoneId)}, true
			case "cidr-block", "cidr", "cidrBlock":
				return []string{aws.ToString(sn.CidrBlock)}, true
			case "state":
				return []string{string(sn.State)}, true
			case "default-for-az", "defaultForAz":
				return []string{"false"}, true
			case "owner-id":
				return []string{s.opts.AccountID}, true
			case "subnet-arn":
				return []string{aws.ToString(sn.SubnetArn)}, true
			case "map-public-ip-on-launch":
				return []string{"false"}, true
			}
			return tagFilter(sn.Tags, name)
		})
		if err != nil {
			return nil, err
		}
		if ok {
			c := sn.Subnet
			c.Tags = cloneTags(sn.Tags)
			c.AvailableIpAddressCount = aws.Int32(aws.ToInt32(sn.AvailableIpAddressCount))
			out.Subnets = append(out.Subnets, c)
		}
	}
	var err error
	out.Subnets, out.NextToken, err = page(out.Subnets, in.MaxResults, in.NextToken, 0)
	return out, err
}

func (s *Server) describeSecurityGroups(rc *reqCtx, in *ec2.DescribeSecurityGroupsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.GroupIds {
		if s.st.sgByID(id) == nil {
			if !strings.HasPrefix(id, "sg-") {
				return nil, apiErr(400, "InvalidGroupId.Malformed", "Invalid id: \"%s\" (expecting \"sg-...\")", id)
			}
			return nil, apiErr(400, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range in.GroupNames {
		if s.st.sgByName(n) == nil {
			return nil, apiErr(400, "InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, aws.ToString(s.st.vpc.VpcId))
		}
	}
	out := &ec2.DescribeSecurityGroupsOutput{SecurityGroups: []ec2types.SecurityGroup{}}
	for _, sg := range s.st.sgs {
		if len(in.GroupIds) > 0 && !contains(in.GroupIds, aws.ToString(sg.GroupId)) {
			continue
		}
		if len(in.GroupNames) > 0 && !contains(in.GroupNames, aws.ToString(sg.GroupName)) {
			continue
		}
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "group-id":
				return []string{aws.ToString(sg.GroupId)}, true
			case "group-name":
				return []string{aws.ToString(sg.GroupName)}, true
			case "vpc-id":
				return []string{aws.ToString(sg.VpcId)}, true
			case "description":
				return []string{aws.ToString(sg.Description)}, true
			case "owner-id":
				return []string{s.opts.AccountID}, true
			}
			return tagFilter(sg.Tags, name)
		})
		if err != nil {
			return nil, err
		}
		if ok {
			c := *sg
			c.Tags = cloneTags(sg.Tags)
			out.SecurityGroups = append(out.SecurityGroups, c)
		}
	}
	var err error
	out.SecurityGroups, out.NextToken, err = page(out.SecurityGroups, in.MaxResults, in.NextToken, 0)
	return out, err
}

func (s *Server) describeImages(rc *reqCtx, in *ec2.DescribeImagesInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.ImageIds {
		if !strings.HasPrefix(id, "ami-") {
			return nil, apiErr(400, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
		if s.st.imageByID(id) == nil {
			return nil, apiErr(400, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
	}
	out := &ec2.DescribeImagesOutput{Images: []ec2types.Image{}}
	for _, im := range s.st.images {
		if len(in.ImageIds) > 0 && !contains(in.ImageIds, aws.ToString(im.ImageId)) {
			continue
		}
		if len(in.Owners) > 0 {
			match := false
			for _, o := range in.Owners {
				switch {
				case o == "self" && aws.ToString(im.OwnerId) == s.opts.AccountID,
					o == aws.ToString(im.OwnerId),
					im.ImageOwnerAlias != nil && o == aws.ToString(im.ImageOwnerAlias):
					match = true
				}
			}
			if !match {
				continue
			}
		}
		// Private images of other accounts are never visible.
		if !aws.ToBool(im.Public) && aws.ToString(im.OwnerId) != s.opts.AccountID {
			continue
		}
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "image-id":
				return []string{aws.ToString(im.ImageId)}, true
			case "name":
				return []string{aws.ToString(im.Name)}, true
			case "owner-id":
				return []string{aws.ToString(im.OwnerId)}, true
			case "owner-alias":
				return []string{aws.ToString(im.ImageOwnerAlias)}, true
			case "architecture":
				return []string{string(im.Architecture)}, true
			case "state":
				return []string{string(im.State)}, true
			case "is-public":
				return []string{strconv.FormatBool(aws.ToBool(im.Public))}, true
			case "image-type":
				return []string{string(im.ImageType)}, true
			case "virtualization-type":
				return []string{string(im.VirtualizationType)}, true
			case "root-device-type":
				return []string{string(im.RootDeviceType)}, true
			case "root-device-name":
				return []string{aws.ToString(im.RootDeviceName)}, true
			case "hypervisor":
				return []string{string(im.Hypervisor)}, true
			case "description":
				return []string{aws.ToString(im.Description)}, true
			case "platform-details":
				return []string{aws.ToString(im.PlatformDetails)}, true
			case "creation-date":
				return []string{aws.ToString(im.CreationDate)}, true
			}
			return tagFilter(im.Tags, name)
		})
		if err != nil {
			return nil, err
		}
		if ok {
			c := im.Image
			c.Tags = cloneTags(im.Tags)
			out.Images = append(out.Images, c)
		}
	}
	var err error
	out.Images, out.NextToken, err = page(out.Images, in.MaxResults, in.NextToken, 0)
	return out, err
}

func validateTagKeys(tags []ec2types.Tag) error {
	for _, t := range tags {
		k := aws.ToString(t.Key)
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return apiErr(400, "InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
		}
		if k == "" || len(k) > 128 {
			return apiErr(400, "InvalidParameterValue", "Tag key must be between 1 and 128 characters: '%s'", k)
		}
		if len(aws.ToString(t.Value)) > 256 {
			return apiErr(400, "InvalidParameterValue", "Tag value exceeds the maximum length of 256 characters")
		}
	}
	return nil
}

func (s *Server) createTags(rc *reqCtx, in *ec2.CreateTagsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	if len(in.Resources) == 0 {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	if len(in.Tags) == 0 {
		return nil, apiErr(400, "MissingParameter", "The request must contain the parameter tagSet")
	}
	if err := validateTagKeys(in.Tags); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var lists []*[]ec2types.Tag
	for _, id := range in.Resources {
		tags, ok := s.st.taggable(id)
		if !ok {
			return nil, notFoundForID(id)
		}
		lists = append(lists, tags)
	}
	for _, l := range lists {
		setTags(l, in.Tags)
		if len(*l) > 50 {
			return nil, apiErr(400, "TagLimitExceeded", "The maximum number of Tags for a resource has been reached")
		}
	}
	return &ec2.CreateTagsOutput{}, nil
}

func (s *Server) deleteTags(rc *reqCtx, in *ec2.DeleteTagsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range in.Resources {
		tags, ok := s.st.taggable(id)
		if !ok {
			return nil, notFoundForID(id)
		}
		kept := (*tags)[:0]
		for _, t := range *tags {
			drop := len(in.Tags) == 0
			for _, d := range in.Tags {
				if aws.ToString(d.Key) == aws.ToString(t.Key) && (d.Value == nil || aws.ToString(d.Value) == aws.ToString(t.Value)) {
					drop = true
				}
			}
			if !drop {
				kept = append(kept, t)
			}
		}
		*tags = kept
	}
	return &ec2.DeleteTagsOutput{}, nil
}

// notFoundForID is EC2's not-found error for an id of any resource type.
func notFoundForID(id string) *apiError {
	kind, _, _ := strings.Cut(id, "-")
	switch kind {
	case "i":
		return apiErr(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	case "lt":
		return apiErr(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case "subnet":
		return apiErr(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	case "sg":
		return apiErr(400, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	case "ami":
		return apiErr(400, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	case "vpc":
		return apiErr(400, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
	case "cr":
		return reservationNotFound(id)
	}
	return apiErr(400, "InvalidID", "The ID '%s' is not valid", id)
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkMaxResults refuses what EC2's describe operations refuse of MaxResults: a value outside
// [lo, hi], and any value given with a list of ids (idsParam names that list, as EC2's message
// does; ids is its length).
func checkMaxResults(maxResults *int32, lo, hi int32, idsParam string, ids int) error {
	if maxResults == nil {
		return nil
	}
	if *maxResults < lo || *maxResults > hi {
		return apiErr(400, "InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Parameter must be in the range %d-%d", *maxResults, lo, hi)
	}
	if ids > 0 {
		return apiErr(400, "InvalidParameterCombination", "The parameter %s cannot be used with the parameter maxResults", idsParam)
	}
	return nil
}
