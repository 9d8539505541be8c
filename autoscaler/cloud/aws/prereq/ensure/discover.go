package ensure

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
)

// Discover fills what the account itself can tell: the account ID (STS GetCallerIdentity) and,
// for IRSA, the cluster's OIDC issuer (EKS DescribeCluster). Settings given explicitly win; a
// cluster without an issuer is an error that says to enable it or use Pod Identity.
func Discover(ctx context.Context, c Clients, s prereq.Settings) (prereq.Settings, error) {
	if s.AccountID == "" {
		out, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		if err != nil {
			return s, failed("reading the account ID (sts:GetCallerIdentity)", err)
		}
		s.AccountID = aws.ToString(out.Account)
	}
	if s.PodIdentity || s.OIDCIssuer != "" {
		return s, nil
	}
	out, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &s.ClusterName})
	if err != nil {
		return s, failed(fmt.Sprintf("reading cluster %s's OIDC issuer (eks:DescribeCluster)", s.ClusterName), err)
	}
	if id := out.Cluster.Identity; id != nil && id.Oidc != nil {
		s.OIDCIssuer = aws.ToString(id.Oidc.Issuer)
	}
	if s.OIDCIssuer == "" {
		return s, fmt.Errorf("cluster %s has no OIDC issuer: enable one for IRSA, or trust EKS Pod Identity instead", s.ClusterName)
	}
	return s, nil
}
