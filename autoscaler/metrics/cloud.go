package metrics

import (
	"context"
	"errors"
	"time"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
)

// Cloud returns p with every call timed (karpenter_cloudprovider_duration_seconds) and every
// error counted (karpenter_cloudprovider_errors_total), labelled with the calling controller.
// Wrap once per controller, never a wrapped provider (calls would count twice).
func (m *Metrics) Cloud(p cloud.CloudProvider, controller string) cloud.CloudProvider {
	return &measured{CloudProvider: p, m: m, controller: controller}
}

type measured struct {
	cloud.CloudProvider
	m          *Metrics
	controller string
}

// observe records one call that started at start; method names are Karpenter's.
func (d *measured) observe(method string, start time.Time, err error) {
	provider := d.Name()
	d.m.CloudDuration.WithLabelValues(d.controller, method, provider).Observe(time.Since(start).Seconds())
	if err != nil {
		d.m.CloudErrors.WithLabelValues(d.controller, method, provider, errorType(err)).Inc()
	}
}

// errorType names the well-known cloud errors as Karpenter's error label does ("" for others).
func errorType(err error) string {
	var ice *cloud.InsufficientCapacityError
	switch {
	case errors.As(err, &ice):
		return "InsufficientCapacityError"
	case errors.Is(err, cloud.ErrNotFound):
		return "NodeClaimNotFoundError"
	}
	return ""
}

func (d *measured) Create(ctx context.Context, nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.Create(ctx, nc, class)
	d.observe("Create", start, err)
	return out, err
}

func (d *measured) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	start := time.Now()
	err := d.CloudProvider.Delete(ctx, nc)
	d.observe("Delete", start, err)
	return err
}

func (d *measured) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.Get(ctx, providerID)
	d.observe("Get", start, err)
	return out, err
}

func (d *measured) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := d.CloudProvider.List(ctx)
	d.observe("List", start, err)
	return out, err
}

func (d *measured) InstanceTypes(ctx context.Context, class *awsv1.EC2NodeClass) ([]catalog.InstanceType, error) {
	start := time.Now()
	out, err := d.CloudProvider.InstanceTypes(ctx, class)
	d.observe("GetInstanceTypes", start, err)
	return out, err
}

func (d *measured) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass) (cloud.DriftReason, error) {
	start := time.Now()
	out, err := d.CloudProvider.IsDrifted(ctx, nc, class)
	d.observe("IsDrifted", start, err)
	return out, err
}
