// Package fakecloud is a cloud.CloudProvider for unit tests: instances live in memory, every call
// is recorded, any call can be made to fail once, and capacity can run out per offering. It
// follows the interface's contract where tests depend on it: Create is idempotent per NodeClaim
// UID and falls back from offerings without capacity to the next cheapest (marking them
// unavailable, as the AWS provider does after an insufficient capacity error), Delete and Get
// wrap cloud.ErrNotFound for instances that are gone.
package fakecloud

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/internal/requirements"
)

// Op names a CloudProvider method, for FailNext.
type Op string

// The methods whose next call can be made to fail.
const (
	Create        Op = "Create"
	Delete        Op = "Delete"
	Get           Op = "Get"
	List          Op = "List"
	InstanceTypes Op = "InstanceTypes"
	IsDrifted     Op = "IsDrifted"
)

// CloudProvider is the fake. The zero value is not usable; call New.
type CloudProvider struct {
	mu    sync.Mutex
	types []catalog.InstanceType
	// noCapacity: offerings ("type/zone/capacity-type") a launch fails on; unavailable: those
	// a launch failed on, reported unavailable by InstanceTypes.
	noCapacity, unavailable map[string]bool
	instances               map[string]*karpv1.NodeClaim // by provider ID
	byUID                   map[types.UID]string
	terminating             map[string]bool // deleted, still found until FinishTerminations
	hidden                  map[string]bool // missing from List (eventual consistency)
	drift                   map[string]cloud.DriftReason
	failures                map[Op][]error
	launches                int
	// asyncTermination keeps deleted instances visible until FinishTerminations.
	asyncTermination bool

	createCalls, deleteCalls []*karpv1.NodeClaim
	getCalls                 []string
}

// New returns a provider offering these instance types.
func New(its ...catalog.InstanceType) *CloudProvider {
	p := &CloudProvider{}
	p.reset(its)
	return p
}

// Reset forgets instances, calls, failures, drift and capacity, and offers these instance types.
func (p *CloudProvider) Reset(its ...catalog.InstanceType) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reset(its)
}

// reset sets every field but mu; the caller holds mu (or has not shared p yet).
func (p *CloudProvider) reset(its []catalog.InstanceType) {
	p.types, p.noCapacity, p.unavailable = its, map[string]bool{}, map[string]bool{}
	p.instances, p.byUID, p.terminating = map[string]*karpv1.NodeClaim{}, map[types.UID]string{}, map[string]bool{}
	p.hidden, p.drift, p.failures = map[string]bool{}, map[string]cloud.DriftReason{}, map[Op][]error{}
	p.launches, p.asyncTermination = 0, false
	p.createCalls, p.deleteCalls, p.getCalls = nil, nil, nil
}

// FailNext makes the next call of op return err (queued: several calls fail in order).
func (p *CloudProvider) FailNext(op Op, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures[op] = append(p.failures[op], err)
}

// NoCapacity makes launches on these offerings ("type/zone/capacity-type") fail.
func (p *CloudProvider) NoCapacity(offerings ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range offerings {
		p.noCapacity[o] = true
	}
}

// SetDrifted makes IsDrifted answer reason for the NodeClaim ("" for not drifted).
func (p *CloudProvider) SetDrifted(claim string, reason cloud.DriftReason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drift[claim] = reason
}

// AsyncTermination makes deleted instances stay visible to Get and List, as EC2's
// shutting-down instances do, until FinishTerminations.
func (p *CloudProvider) AsyncTermination() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asyncTermination = true
}

// FinishTerminations removes the instances deleted so far.
func (p *CloudProvider) FinishTerminations() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.terminating {
		p.remove(id)
	}
}

// AddInstance adds a running instance as if it had been launched for nc (which must carry
// status.providerID), e.g. one whose NodeClaim was lost.
func (p *CloudProvider) AddInstance(nc *karpv1.NodeClaim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances[nc.Status.ProviderID] = nc.DeepCopy()
	p.byUID[nc.UID] = nc.Status.ProviderID
}

// RemoveInstance makes an instance vanish, as one terminated outside the autoscaler does.
func (p *CloudProvider) RemoveInstance(providerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remove(providerID)
}

// HideFromList keeps a live instance out of List, as a lagging read would.
func (p *CloudProvider) HideFromList(providerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hidden[providerID] = true
}

func (p *CloudProvider) remove(id string) {
	if nc := p.instances[id]; nc != nil {
		delete(p.byUID, nc.UID)
	}
	delete(p.instances, id)
	delete(p.terminating, id)
	delete(p.hidden, id)
}

// CreateCalls returns copies of the NodeClaims Create was called with, in order.
func (p *CloudProvider) CreateCalls() []*karpv1.NodeClaim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.createCalls)
}

// DeleteCalls returns copies of the NodeClaims Delete was called with, in order.
func (p *CloudProvider) DeleteCalls() []*karpv1.NodeClaim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.deleteCalls)
}

// GetCalls returns the provider IDs Get was called with, in order.
func (p *CloudProvider) GetCalls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.getCalls)
}

// Instances returns copies of the live instances (terminating ones included), by provider ID.
func (p *CloudProvider) Instances() map[string]*karpv1.NodeClaim {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]*karpv1.NodeClaim, len(p.instances))
	for id, nc := range p.instances {
		out[id] = nc.DeepCopy()
	}
	return out
}

// failure pops the next queued error of op; the caller holds mu.
func (p *CloudProvider) failure(op Op) error {
	q := p.failures[op]
	if len(q) == 0 {
		return nil
	}
	p.failures[op] = q[1:]
	return q[0]
}

var _ cloud.CloudProvider = (*CloudProvider)(nil)

// Create launches on the cheapest offering the NodeClaim's requirements allow that has
// capacity; the offerings tried without capacity become unavailable.
func (p *CloudProvider) Create(_ context.Context, nc *karpv1.NodeClaim, _ *awsv1.EC2NodeClass) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.createCalls = append(p.createCalls, nc.DeepCopy())
	if err := p.failure(Create); err != nil {
		return nil, err
	}
	if id, ok := p.byUID[nc.UID]; ok && nc.UID != "" {
		return p.instances[id].DeepCopy(), nil
	}
	var tried []string
	for _, o := range p.options(nc) {
		key := offeringKey(o.it.Name, o.Zone, o.CapacityType)
		if p.noCapacity[key] {
			p.unavailable[key] = true
			tried = append(tried, key)
			continue
		}
		return p.launch(nc, o), nil
	}
	return nil, &cloud.InsufficientCapacityError{NodeClaim: nc.Name, Offerings: tried}
}

// option is one offering of one instance type.
type option struct {
	catalog.Offering
	it *catalog.InstanceType
}

// options lists the available offerings the NodeClaim's requirements allow, cheapest first.
// Requirements on keys the instance type does not label are not judged.
func (p *CloudProvider) options(nc *karpv1.NodeClaim) []option {
	var out []option
	for i := range p.types {
		it := &p.types[i]
		for _, o := range it.Offerings {
			labels := map[string]string{catalog.LabelZone: o.Zone, catalog.LabelCapacityType: o.CapacityType}
			for k, v := range it.Labels {
				labels[k] = v
			}
			if o.Available && !p.unavailable[offeringKey(it.Name, o.Zone, o.CapacityType)] && allows(nc, labels) {
				out = append(out, option{o, it})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b option) int { return cmp.Compare(a.PricePerHour, b.PricePerHour) })
	return out
}

func allows(nc *karpv1.NodeClaim, labels map[string]string) bool {
	for _, r := range nc.Spec.Requirements {
		v, ok := labels[r.Key]
		if !ok {
			continue
		}
		if req := requirements.New(r.Key, r.Operator, r.Values); !req.Matches(v, true) {
			return false
		}
	}
	return true
}

// launch records an instance for nc on the offering; the caller holds mu.
func (p *CloudProvider) launch(nc *karpv1.NodeClaim, o option) *karpv1.NodeClaim {
	p.launches++
	out := nc.DeepCopy()
	out.Status.ProviderID = fmt.Sprintf("fake:///%s/i-%05d", o.Zone, p.launches)
	out.Status.ImageID = "ami-fake"
	out.Status.Capacity = o.it.Capacity.ResourceList()
	out.Status.Allocatable = o.it.Allocatable.ResourceList()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[catalog.LabelInstanceType] = o.it.Name
	out.Labels[catalog.LabelZone] = o.Zone
	out.Labels[catalog.LabelCapacityType] = o.CapacityType
	p.instances[out.Status.ProviderID] = out
	p.byUID[nc.UID] = out.Status.ProviderID
	return out.DeepCopy()
}

// Delete terminates the NodeClaim's instance (at once, or at FinishTerminations).
func (p *CloudProvider) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deleteCalls = append(p.deleteCalls, nc.DeepCopy())
	if err := p.failure(Delete); err != nil {
		return err
	}
	id := nc.Status.ProviderID
	if _, ok := p.instances[id]; !ok || p.terminating[id] {
		return fmt.Errorf("instance %q: %w", id, cloud.ErrNotFound)
	}
	if p.asyncTermination {
		p.terminating[id] = true
		return nil
	}
	p.remove(id)
	return nil
}

// Get returns the instance with this provider ID.
func (p *CloudProvider) Get(_ context.Context, providerID string) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.getCalls = append(p.getCalls, providerID)
	if err := p.failure(Get); err != nil {
		return nil, err
	}
	nc, ok := p.instances[providerID]
	if !ok {
		return nil, fmt.Errorf("instance %q: %w", providerID, cloud.ErrNotFound)
	}
	return nc.DeepCopy(), nil
}

// List returns the instances not hidden from it, sorted by provider ID.
func (p *CloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failure(List); err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	for id, nc := range p.instances {
		if !p.hidden[id] {
			out = append(out, nc.DeepCopy())
		}
	}
	slices.SortFunc(out, func(a, b *karpv1.NodeClaim) int { return cmp.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// InstanceTypes returns the instance types, offerings a launch failed on unavailable.
func (p *CloudProvider) InstanceTypes(context.Context, *awsv1.EC2NodeClass) ([]catalog.InstanceType, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failure(InstanceTypes); err != nil {
		return nil, err
	}
	out := make([]catalog.InstanceType, len(p.types))
	for i, it := range p.types {
		it.Offerings = slices.Clone(it.Offerings)
		for j := range it.Offerings {
			o := &it.Offerings[j]
			o.Available = o.Available && !p.unavailable[offeringKey(it.Name, o.Zone, o.CapacityType)]
		}
		out[i] = it
	}
	return out, nil
}

// IsDrifted answers what SetDrifted said for the NodeClaim.
func (p *CloudProvider) IsDrifted(_ context.Context, nc *karpv1.NodeClaim, _ *awsv1.EC2NodeClass) (cloud.DriftReason, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failure(IsDrifted); err != nil {
		return "", err
	}
	return p.drift[nc.Name], nil
}

// Name is "fake".
func (p *CloudProvider) Name() string { return "fake" }

// RepairPolicies: a node whose Ready condition has been False for 30 minutes is unhealthy, as
// for the kubelet's condition on AWS.
func (p *CloudProvider) RepairPolicies() []cloud.RepairPolicy {
	return []cloud.RepairPolicy{{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute}}
}

func offeringKey(name, zone, capacityType string) string {
	return name + "/" + zone + "/" + capacityType
}
