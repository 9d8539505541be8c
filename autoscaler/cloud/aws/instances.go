package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awstags"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
	"github.com/karpool/karpool/autoscaler/cloud/aws/ec2filter"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/internal/requirements"
)

// liveStates are the instance states that still cost money or may come back.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// instanceID extracts the instance id from a provider ID aws:///<zone>/<id>.
func instanceID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	_, id, found := strings.Cut(rest, "/")
	if !ok || !found || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider id %q is not an AWS provider id (want aws:///<zone>/i-...)", providerID)
	}
	return id, nil
}

// describe returns the instance with this id, or an error wrapping cloud.ErrNotFound when it
// does not exist or has terminated.
func (p *Provider) describe(ctx context.Context, id string) (*ec2types.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if awserr.Code(err) == "InvalidInstanceID.NotFound" {
		return nil, fmt.Errorf("instance %s: %w", id, cloud.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			in := &r.Instances[i]
			if in.State != nil && in.State.Name == ec2types.InstanceStateNameTerminated {
				return nil, fmt.Errorf("instance %s is terminated: %w", id, cloud.ErrNotFound)
			}
			return in, nil
		}
	}
	return nil, fmt.Errorf("instance %s: %w", id, cloud.ErrNotFound)
}

// nodeClaimOf is the NodeClaim view of an instance: name, pool and class from its tags,
// launch labels, provider id and the catalog's capacity for the type (default class options).
func (p *Provider) nodeClaimOf(in *ec2types.Instance) *karpv1.NodeClaim {
	tags := awstags.FromEC2(in.Tags)
	bought := p.bought(in)
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: tags[TagNodeClaim], Labels: map[string]string{
		karpv1.LabelNodePool: tags[karpv1.LabelNodePool], awsv1.LabelNodeClass: tags[awsv1.LabelNodeClass]}}}
	if in.LaunchTime != nil {
		claim.CreationTimestamp = metav1.NewTime(*in.LaunchTime)
	}
	if it, ok := p.opts.Catalog.InstanceType(string(in.InstanceType), catalog.NodeClassOptions{}); ok {
		return launched(claim, &it, aws.ToString(in.InstanceId), bought, aws.ToString(in.ImageId))
	}
	claim.Labels[labelInstanceType] = string(in.InstanceType)
	claim.Labels[labelZone] = bought.Zone
	claim.Labels[karpv1.LabelCapacityType] = bought.CapacityType
	claim.Status.ProviderID = fmt.Sprintf("aws:///%s/%s", bought.Zone, aws.ToString(in.InstanceId))
	claim.Status.ImageID = aws.ToString(in.ImageId)
	return claim
}

// bought is how the instance was bought: its zone, and its capacity type and reservation as
// Karpenter reads them. An instance is "reserved" only when it was launched into its
// reservation on purpose (preference capacity-reservations-only) and the ReservedCapacity gate
// is on; one that landed in an open reservation by itself stays on-demand, so that turning
// the gate on does not make it drift.
func (p *Provider) bought(in *ec2types.Instance) catalog.Offering {
	o := catalog.Offering{CapacityType: catalog.CapacityTypeOnDemand}
	if in.Placement != nil {
		o.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	spec := in.CapacityReservationSpecification
	switch {
	case in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot:
		o.CapacityType = catalog.CapacityTypeSpot
	case !p.opts.NoReservedCapacity && in.CapacityReservationId != nil && spec != nil &&
		spec.CapacityReservationPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly:
		o.CapacityType, o.ReservationID, o.ReservationType = catalog.CapacityTypeReserved, aws.ToString(in.CapacityReservationId), capreservation.TypeDefault
		if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			o.ReservationType = capreservation.TypeCapacityBlock
		}
	}
	return o
}

// Get implements cloud.CloudProvider.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	id, err := instanceID(providerID)
	if err != nil {
		return nil, err
	}
	in, err := p.describe(ctx, id)
	if err != nil {
		return nil, err
	}
	return p.nodeClaimOf(in), nil
}

// instances lists the live instances this cluster launched for NodeClaims. The nodepool tag is
// required too: the controller policy lets karpool terminate only instances that carry it.
func (p *Provider) instances(ctx context.Context) ([]ec2types.Instance, error) {
	pg := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		ec2filter.New("tag:"+prereq.ClusterOwnedTag(p.opts.ClusterName), "owned"),
		ec2filter.New("tag-key", TagNodeClaim),
		ec2filter.New("tag-key", karpv1.LabelNodePool),
		ec2filter.New("instance-state-name", liveStates...),
	}})
	var out []ec2types.Instance
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the cluster's instances: %w", err)
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	return out, nil
}

// List implements cloud.CloudProvider.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	ins, err := p.instances(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*karpv1.NodeClaim, 0, len(ins))
	for i := range ins {
		out = append(out, p.nodeClaimOf(&ins[i]))
	}
	return out, nil
}

// Delete implements cloud.CloudProvider.
func (p *Provider) Delete(ctx context.Context, claim *karpv1.NodeClaim) error {
	id, err := instanceID(claim.Status.ProviderID)
	if err != nil {
		return fmt.Errorf("nodeclaim %s: status.providerID: %w", claim.Name, err)
	}
	in, err := p.describe(ctx, id)
	if err != nil {
		return fmt.Errorf("nodeclaim %s: %w", claim.Name, err)
	}
	if in.State != nil && in.State.Name == ec2types.InstanceStateNameShuttingDown {
		return nil
	}
	if err := p.terminate(ctx, id); err != nil {
		return err
	}
	if b := p.bought(in); b.ReservationID != "" {
		p.reservations.MarkTerminated(b.ReservationID)
	}
	return nil
}

func (p *Provider) terminate(ctx context.Context, ids ...string) error {
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if awserr.Code(err) == "InvalidInstanceID.NotFound" {
		return fmt.Errorf("terminating %s: %w", strings.Join(ids, ", "), cloud.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("terminating %s: %w", strings.Join(ids, ", "), err)
	}
	return nil
}

// IsDrifted implements cloud.CloudProvider: the instance drifted when it no longer runs on what
// the class resolves to now, as the class's status says (the node class controller keeps it;
// launches resolve the same way): an AMI of status.amis for its architecture, a subnet of
// status.subnets, exactly the security groups of status.securityGroups. Until the class has
// resolved them nothing is judged. One DescribeInstances per call.
func (p *Provider) IsDrifted(ctx context.Context, claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass) (cloud.DriftReason, error) {
	st := nc.Status
	if len(st.AMIs) == 0 || len(st.Subnets) == 0 || len(st.SecurityGroups) == 0 {
		return "", nil
	}
	id, err := instanceID(claim.Status.ProviderID)
	if err != nil {
		return "", fmt.Errorf("nodeclaim %s: status.providerID: %w", claim.Name, err)
	}
	in, err := p.describe(ctx, id)
	if err != nil {
		return "", fmt.Errorf("nodeclaim %s: %w", claim.Name, err)
	}
	if !slices.ContainsFunc(st.AMIs, func(a awsv1.AMI) bool { return a.ID == aws.ToString(in.ImageId) && amiSuits(a, claim.Labels) }) {
		return cloud.DriftAMI, nil
	}
	if !slices.ContainsFunc(st.Subnets, func(s awsv1.Subnet) bool { return s.ID == aws.ToString(in.SubnetId) }) {
		return cloud.DriftSubnet, nil
	}
	var want, have []string
	for _, g := range st.SecurityGroups {
		want = append(want, g.ID)
	}
	for _, g := range in.SecurityGroups {
		have = append(have, aws.ToString(g.GroupId))
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(slices.Compact(want), slices.Compact(have)) {
		return cloud.DriftSecurityGroup, nil
	}
	return "", nil
}

// amiSuits: the image's requirements in status.amis (architecture and, for an alias image, the
// accelerator variant) admit a node with the NodeClaim's labels. A GPU node still on the
// standard image drifts to the NVIDIA one, as in Karpenter.
func amiSuits(a awsv1.AMI, labels map[string]string) bool {
	for _, r := range a.Requirements {
		v, ok := labels[r.Key]
		if r.Key == corev1.LabelArchStable && !ok {
			continue // unknown architecture: any image does
		}
		if req := requirements.New(r.Key, r.Operator, r.Values); !req.Matches(v, ok) {
			return false
		}
	}
	return true
}

// LeakGracePeriod is how long an instance may exist without a NodeClaim before the garbage
// collector terminates it: long enough for a launch to record its provider id.
const LeakGracePeriod = 30 * time.Second

// Instance is what the garbage collector needs to know about an instance.
type Instance struct {
	ID         string
	LaunchTime time.Time
	// NodeClaim is the instance's karpenter.sh/nodeclaim tag, written by CreateFleet itself.
	NodeClaim string
}

// Leaked returns, sorted, the ids of the instances that no NodeClaim of claims owns and that were
// launched more than LeakGracePeriod before now. A NodeClaim owns the instance its
// status.providerID names and the instances tagged with its name: a launch that took effect
// while the controller was down (the response never arrived, so the providerID was never
// recorded) still belongs to the NodeClaim that retries it with the same client token, however
// long the controller stayed down.
func Leaked(instances []Instance, claims []karpv1.NodeClaim, now time.Time) []string {
	ownedIDs, ownerNames := map[string]bool{}, map[string]bool{}
	for _, c := range claims {
		if id, err := instanceID(c.Status.ProviderID); err == nil {
			ownedIDs[id] = true
		}
		ownerNames[c.Name] = true
	}
	var out []string
	for _, in := range instances {
		if ownedIDs[in.ID] || (in.NodeClaim != "" && ownerNames[in.NodeClaim]) || now.Sub(in.LaunchTime) <= LeakGracePeriod {
			continue
		}
		out = append(out, in.ID)
	}
	slices.Sort(out)
	return out
}

// GarbageCollect terminates the cluster's instances that no NodeClaim in claims owns (see
// Leaked) and that are older than LeakGracePeriod at now, and returns their ids. claims must be
// every NodeClaim of the cluster (a partial list would terminate the instances of the missing
// ones).
func (p *Provider) GarbageCollect(ctx context.Context, claims []karpv1.NodeClaim, now time.Time) ([]string, error) {
	ins, err := p.instances(ctx)
	if err != nil {
		return nil, err
	}
	var candidates []Instance
	for _, in := range ins {
		if in.State != nil && in.State.Name == ec2types.InstanceStateNameShuttingDown {
			continue
		}
		candidates = append(candidates, Instance{ID: aws.ToString(in.InstanceId), LaunchTime: aws.ToTime(in.LaunchTime),
			NodeClaim: awstags.FromEC2(in.Tags)[TagNodeClaim]})
	}
	leaked := Leaked(candidates, claims, now)
	if len(leaked) == 0 {
		return nil, nil
	}
	if err := p.terminate(ctx, leaked...); err != nil {
		return nil, fmt.Errorf("garbage collecting leaked instances: %w", err)
	}
	return leaked, nil
}
