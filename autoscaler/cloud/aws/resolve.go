package aws

import (
	"context"
	"fmt"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
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
// Kubernetes version: the newest per architecture and variant, each with the requirements of
// the instance types it suits (an image of several variants once per variant), sorted by
// architecture. An error matching awserr.ErrInvalidClass means the
// terms match no image.
func (p *Provider) AMIs(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.AMI, error) {
	if err := p.cluster(ctx); err != nil {
		return nil, err
	}
	ims, err := p.amis.List(ctx, nc, p.clusterFacts().KubernetesVersion)
	if err != nil {
		return nil, err
	}
	var out []awsv1.AMI
	for _, im := range ims {
		for _, reqs := range im.Requirements() {
			out = append(out, awsv1.AMI{ID: im.ID, Name: im.Name, Deprecated: im.Deprecated, Requirements: reqs})
		}
	}
	return out, nil
}

// CapacityReservations resolves spec.capacityReservationSelectorTerms for the class's status
// (none while the ReservedCapacity gate is off).
func (p *Provider) CapacityReservations(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.CapacityReservation, error) {
	if p.opts.NoReservedCapacity || len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return nil, nil
	}
	rs, err := p.reservations.List(ctx, nc.Spec.CapacityReservationSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	return rs, nil
}

// withReservations adds the offerings of the class's capacity reservations, as its status
// records them (the class controller resolves them), to the instance types.
func (p *Provider) withReservations(nc *awsv1.EC2NodeClass, its []catalog.InstanceType) []catalog.InstanceType {
	if p.opts.NoReservedCapacity {
		return its
	}
	return capreservation.WithOfferings(its, nc.Status.CapacityReservations, p.reservations.Available)
}

// ReservationAvailable is how many more instances the capacity reservation can take, as far
// as the provider knows (read with the class's reservations, less launches since).
func (p *Provider) ReservationAvailable(id string) int { return p.reservations.Available(id) }
