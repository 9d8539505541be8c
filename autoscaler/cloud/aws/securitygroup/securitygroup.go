// Package securitygroup resolves an EC2NodeClass's spec.securityGroupSelectorTerms to the
// security groups nodes launch with.
package securitygroup

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

// SecurityGroup is a resolved security group.
type SecurityGroup struct{ ID, Name string }

// Provider resolves the security groups of a cluster's classes.
type Provider struct {
	ec2     *ec2.Client
	cluster string
}

// New returns the provider; cluster names the discovery tag in error messages.
func New(client *ec2.Client, cluster string) *Provider {
	return &Provider{ec2: client, cluster: cluster}
}

// List resolves spec.securityGroupSelectorTerms, sorted by id.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]SecurityGroup, error) {
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
