package ensure

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awstags"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
)

// nodeAccess creates the node roles' EKS access entries; aws-auth entries are reported, since
// they live in the cluster, not in the account.
func (e *ensurer) nodeAccess(ctx context.Context) error {
	for _, a := range e.r.NodeAccess {
		if a.Mode == prereq.AWSAuth {
			e.change(Manual, "aws-auth mapRoles entry", a.RoleARN, fmt.Sprintf("username %s, groups %s", a.Username, strings.Join(a.Groups, ", ")))
			continue
		}
		_, err := e.c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(e.s.ClusterName), PrincipalArn: aws.String(a.RoleARN)})
		if awserr.Code(err) != "ResourceNotFoundException" {
			if err != nil {
				return failed("reading the EKS access entry of "+a.RoleARN, err)
			}
			continue // the type of an entry cannot change; an existing one is the user's choice
		}
		if !e.change(Create, "EKS access entry", a.RoleARN, "type "+a.EntryType) {
			continue
		}
		if _, err := e.c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(e.s.ClusterName),
			PrincipalArn: aws.String(a.RoleARN), Type: aws.String(a.EntryType), Tags: map[string]string{prereq.OwnerTag: e.s.ClusterName}}); err != nil {
			return failed("creating the EKS access entry of "+a.RoleARN, err)
		}
	}
	return nil
}

// discoveryTags adds the discovery tag to subnets and security groups that lack it: the one
// change karpool makes to resources it does not own.
func (e *ensurer) discoveryTags(ctx context.Context) error {
	var subnets, groups []string
	for _, t := range e.r.DiscoveryTags {
		if strings.HasPrefix(t.ResourceID, "sg-") {
			groups = append(groups, t.ResourceID)
		} else {
			subnets = append(subnets, t.ResourceID)
		}
	}
	have := map[string]map[string]string{}
	if len(subnets) > 0 {
		out, err := e.c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
		if err != nil {
			return failed("reading subnets "+strings.Join(subnets, ", "), err)
		}
		for _, s := range out.Subnets {
			have[aws.ToString(s.SubnetId)] = awstags.FromEC2(s.Tags)
		}
	}
	if len(groups) > 0 {
		out, err := e.c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: groups})
		if err != nil {
			return failed("reading security groups "+strings.Join(groups, ", "), err)
		}
		for _, g := range out.SecurityGroups {
			have[aws.ToString(g.GroupId)] = awstags.FromEC2(g.Tags)
		}
	}
	for _, t := range e.r.DiscoveryTags {
		if have[t.ResourceID][t.Key] == t.Value {
			continue
		}
		if !e.change(Update, "EC2 tag on", t.ResourceID, fmt.Sprintf("%s: %q → %q", t.Key, have[t.ResourceID][t.Key], t.Value)) {
			continue
		}
		if _, err := e.c.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{t.ResourceID},
			Tags: []ec2types.Tag{{Key: aws.String(t.Key), Value: aws.String(t.Value)}}}); err != nil {
			return failed("tagging "+t.ResourceID, err)
		}
	}
	return nil
}

// podIdentity: associating the service account with the controller role is not done by apply
// yet; the plan says so instead of passing over it.
func (e *ensurer) podIdentity(context.Context) error {
	if pi := e.r.PodIdentity; pi != nil {
		e.change(Manual, "EKS Pod Identity association", pi.Namespace+"/"+pi.ServiceAccount,
			fmt.Sprintf("aws eks create-pod-identity-association --cluster-name %s --namespace %s --service-account %s --role-arn %s",
				e.s.ClusterName, pi.Namespace, pi.ServiceAccount, pi.RoleARN))
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
