package aws

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Subnets returns what the class's spec.subnetSelectorTerms select now, as status.subnets
// shows it: sorted by zone, then id. An error matching awserr.ErrInvalidClass means the terms match
// no available subnet.
func (p *Provider) Subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, error) {
	sns, err := p.network.Subnets(ctx, nc)
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
	sgs, err := p.network.SecurityGroups(ctx, nc)
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
	ims, err := p.amis.List(ctx, nc, p.clusterFacts().KubernetesVersion)
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
