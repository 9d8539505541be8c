// Package network resolves an EC2NodeClass's subnet and security group selector terms to the
// subnets nodes launch into and the security groups they launch with.
package network

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/ec2filter"
)

// Subnet is a resolved subnet.
type Subnet struct {
	ID, Zone, ZoneID string
	// FreeIPs is the subnet's available IPv4 address count; launches prefer the emptiest subnet
	// of a zone.
	FreeIPs int32
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct{ ID, Name string }

// Provider resolves the subnets and security groups of a cluster's classes.
type Provider struct {
	ec2     *ec2.Client
	cluster string
}

// New returns the provider; cluster names the discovery tag in error messages.
func New(client *ec2.Client, cluster string) *Provider {
	return &Provider{ec2: client, cluster: cluster}
}

// Subnets resolves spec.subnetSelectorTerms: one DescribeSubnets per term (terms are ORed, the
// fields of a term ANDed), sorted by zone then id.
func (p *Provider) Subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]Subnet, error) {
	seen := map[string]bool{}
	var out []Subnet
	for i, t := range nc.Spec.SubnetSelectorTerms {
		filters := ec2filter.Tags(t.Tags)
		if t.ID != "" {
			filters = append(filters, ec2filter.New("subnet-id", t.ID))
		}
		if len(filters) == 0 {
			return nil, awserr.Invalidf("EC2NodeClass %s: spec.subnetSelectorTerms[%d] is empty; give tags or an id", nc.Name, i)
		}
		filters = append(filters, ec2filter.New("state", "available"))
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
				out = append(out, Subnet{ID: id, Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId),
					FreeIPs: aws.ToInt32(s.AvailableIpAddressCount)})
			}
		}
	}
	if len(out) == 0 {
		return nil, awserr.Invalidf("EC2NodeClass %s: spec.subnetSelectorTerms match no available subnet; tag the cluster's subnets (for example karpenter.sh/discovery=%s) or fix the terms", nc.Name, p.cluster)
	}
	slices.SortFunc(out, func(a, b Subnet) int { return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// SecurityGroups resolves spec.securityGroupSelectorTerms, sorted by id.
func (p *Provider) SecurityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]SecurityGroup, error) {
	seen := map[string]bool{}
	var out []SecurityGroup
	for i, t := range nc.Spec.SecurityGroupSelectorTerms {
		filters := ec2filter.Tags(t.Tags)
		if t.ID != "" {
			filters = append(filters, ec2filter.New("group-id", t.ID))
		}
		if t.Name != "" {
			filters = append(filters, ec2filter.New("group-name", t.Name))
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
					out = append(out, SecurityGroup{ID: id, Name: aws.ToString(g.GroupName)})
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, awserr.Invalidf("EC2NodeClass %s: spec.securityGroupSelectorTerms match no security group; tag the node security group (for example karpenter.sh/discovery=%s) or fix the terms", nc.Name, p.cluster)
	}
	slices.SortFunc(out, func(a, b SecurityGroup) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
