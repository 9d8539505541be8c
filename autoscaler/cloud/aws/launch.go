package aws

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/cloud/aws/amifamily"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awstags"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
	"github.com/karpool/karpool/autoscaler/cloud/aws/ec2filter"
	"github.com/karpool/karpool/autoscaler/cloud/aws/network"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/autoscaler/cloud/aws/userdata"
)

// Tag keys karpool puts on what it launches.
const (
	TagNodeClaim  = "karpenter.sh/nodeclaim"
	TagEKSCluster = "eks:eks-cluster-name"
	TagCluster    = "karpenter.k8s.aws/cluster"
	tagName       = "Name"
)

// maxOverrides bounds a fleet request; like Karpenter's 60 instance types, it keeps requests
// small while leaving plenty of fallbacks.
const maxOverrides = 60

// capacityErrors are the CreateFleet error codes that mean "this pool has no capacity now".
var capacityErrors = map[string]bool{
	"InsufficientInstanceCapacity":      true,
	"InsufficientFreeAddressesInSubnet": true,
	"MaxSpotInstanceCountExceeded":      true,
	"UnfulfillableCapacity":             true,
	"ReservationCapacityExceeded":       true,
	"Unsupported":                       true,
	"SpotMaxPriceTooLow":                true,
}

// resolved is an EC2NodeClass with its selectors resolved.
type resolved struct {
	subnets []network.Subnet
	sgs     []network.SecurityGroup
	images  []amifamily.Image
	opts    catalog.NodeClassOptions
	profile string
}

// resolveTTL is how long a resolved EC2NodeClass is reused by launches. Subnets, security
// groups and AMIs change rarely; resolving them for every NodeClaim would cost ~6 API calls
// per launch.
const resolveTTL = time.Minute

type resolvedEntry struct {
	at time.Time
	r  *resolved
}

// resolve returns the class's resolution, from the cache when it is younger than resolveTTL.
// The key covers the whole spec, so a changed class is resolved afresh.
func (p *Provider) resolve(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) (*resolved, error) {
	spec, err := json.Marshal(nc.Spec)
	if err != nil {
		return nil, err
	}
	key := nc.Name + "\x00" + k8sVersion + "\x00" + nc.Status.InstanceProfile + "\x00" + string(spec)
	now := p.opts.Now()
	p.resolvedMu.Lock()
	e, ok := p.resolvedCache[key]
	p.resolvedMu.Unlock()
	if ok && now.Sub(e.at) < resolveTTL {
		return e.r, nil
	}
	r, err := p.resolveNow(ctx, nc, k8sVersion)
	if err != nil {
		return nil, err
	}
	p.resolvedMu.Lock()
	for k, old := range p.resolvedCache {
		if now.Sub(old.at) >= resolveTTL {
			delete(p.resolvedCache, k)
		}
	}
	p.resolvedCache[key] = resolvedEntry{at: now, r: r}
	p.resolvedMu.Unlock()
	return r, nil
}

func (p *Provider) resolveNow(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) (*resolved, error) {
	opts, err := p.classOptions(nc)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	r := &resolved{opts: opts}
	if r.subnets, err = p.network.Subnets(ctx, nc); err != nil {
		return nil, err
	}
	if r.sgs, err = p.network.SecurityGroups(ctx, nc); err != nil {
		return nil, err
	}
	if r.images, err = p.amis.List(ctx, nc, k8sVersion); err != nil {
		return nil, err
	}
	for _, s := range r.subnets {
		r.opts.Zones = append(r.opts.Zones, s.Zone)
	}
	// The class controller is the one writer of instance profiles; a launch only reads the one
	// it recorded (the class is Ready, so it has).
	switch {
	case nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "":
		r.profile = *nc.Spec.InstanceProfile
	case nc.Spec.Role != "" && nc.Status.InstanceProfile == p.InstanceProfileName(nc.Name):
		r.profile = nc.Status.InstanceProfile
	default:
		return nil, fmt.Errorf("EC2NodeClass %s: its instance profile for role %q is not recorded yet (status.instanceProfile); the class controller creates it", nc.Name, nc.Spec.Role)
	}
	return r, nil
}

// InstanceTypes implements cloud.CloudProvider: the catalog's instance types for the class
// (allocatable by the catalog's rules) in the zones of its subnets, limited to what EC2 lists
// and offers there, at the prices AWS publishes (read every instancetype.DiscoveryInterval;
// the embedded catalog stands in for any API that fails).
func (p *Provider) InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]catalog.InstanceType, error) {
	opts, err := p.classOptions(nc)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	subnets, err := p.network.Subnets(ctx, nc)
	if err != nil {
		return nil, err
	}
	for _, s := range subnets {
		opts.Zones = append(opts.Zones, s.Zone)
	}
	p.instanceTypes.RefreshIfDue(ctx)
	now := p.opts.Now()
	its := p.withReservations(nc, p.instanceTypes.List(opts, now))
	return withoutZones(its, fullZones(subnets, p.fullSubnets.ByZone(subnets, now))), nil
}

// fullZones are the zones of the subnets that have no subnet left to launch into.
func fullZones(subnets []network.Subnet, open map[string]network.Subnet) map[string]bool {
	full := map[string]bool{}
	for _, s := range subnets {
		if _, ok := open[s.Zone]; !ok {
			full[s.Zone] = true
		}
	}
	return full
}

// withoutZones marks the offerings in the zones unavailable, on copies of the offering lists.
func withoutZones(its []catalog.InstanceType, zones map[string]bool) []catalog.InstanceType {
	if len(zones) == 0 {
		return its
	}
	for i := range its {
		offs := slices.Clone(its[i].Offerings)
		for j := range offs {
			if zones[offs[j].Zone] {
				offs[j].Available = false
			}
		}
		its[i].Offerings = offs
	}
	return its
}

// Create implements cloud.CloudProvider with one CreateFleet request of type instant whose
// overrides are the NodeClaim's options (instance type × zone) across the resolved subnets.
func (p *Provider) Create(ctx context.Context, claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass) (*karpv1.NodeClaim, error) {
	if claim.UID == "" {
		return nil, fmt.Errorf("nodeclaim %s has no metadata.uid; create it in the cluster before launching (the uid makes the launch idempotent)", claim.Name)
	}
	if err := p.cluster(ctx); err != nil {
		return nil, err
	}
	facts := p.clusterFacts()
	r, err := p.resolve(ctx, nc, facts.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	now := p.opts.Now()
	// Launches use the instance types and prices last discovered (InstanceTypes refreshes
	// them), so that a launch never waits for a full read of the price lists.
	its := p.withReservations(nc, p.instanceTypes.List(r.opts, now))
	// Each zone launches into its subnet with the most free addresses; a zone whose subnets are
	// all full is not tried.
	subnetByZone := p.fullSubnets.ByZone(r.subnets, now)
	zones := map[string]bool{}
	for z := range subnetByZone {
		zones[z] = true
	}
	capacityType, opts := launchOptions(claim, its, zones)
	opts = slices.DeleteFunc(opts, func(o option) bool { _, ok := imageFor(r.images, o.it); return !ok })
	if len(opts) == 0 {
		if gone := unavailableOptions(claim, its, r); len(gone) > 0 {
			// As Karpenter: options exist but are all unavailable now (insufficient capacity,
			// or zones whose subnets are full), so the NodeClaim makes way for a new plan.
			return nil, &cloud.InsufficientCapacityError{NodeClaim: claim.Name, Offerings: gone}
		}
		return nil, fmt.Errorf("nodeclaim %s: no instance type satisfies its requirements and requests in the zones of EC2NodeClass %s (%s) with an available offering and a matching AMI",
			claim.Name, nc.Name, strings.Join(slices.Sorted(maps.Keys(zones)), ", "))
	}
	if len(opts) > maxOverrides {
		opts = opts[:maxOverrides]
	}
	l := &fleetLaunch{claim: claim, nc: nc, r: r, facts: facts, capacityType: capacityType, opts: opts,
		subnetByZone: subnetByZone}
	configs, err := p.fleetConfigs(ctx, l)
	if err != nil {
		return nil, err
	}
	out, err := p.ec2.CreateFleet(ctx, l.input(configs))
	if awserr.Code(err) == "IdempotentParameterMismatch" {
		// An earlier Create of this NodeClaim used the token with other options (offerings
		// were marked unavailable since). Whatever it launched is the NodeClaim's instance.
		return p.launchedEarlier(ctx, claim, r)
	}
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: CreateFleet: %w", claim.Name, err)
	}
	made, err := p.fleetResult(l, out, now)
	if err == nil {
		p.nameNode(ctx, made)
	}
	return made, err
}

// nameNode sets status.nodeName to the name the new instance's Node will register under: its
// private DNS name, which EKS node images take as the node name (with either hostname type).
// The lifecycle hands the planned pods to that name while the instance boots. It is a hint
// only: when EC2 does not list the instance yet (its reads are eventually consistent) the
// name stays empty and the hand-off waits for registration.
func (p *Provider) nameNode(ctx context.Context, claim *karpv1.NodeClaim) {
	id, err := instanceID(claim.Status.ProviderID)
	if err != nil {
		return
	}
	if in, err := p.describe(ctx, id); err == nil {
		claim.Status.NodeName = aws.ToString(in.PrivateDnsName)
	}
}

// unavailableOptions lists, as "type/zone/capacity-type" (at most maxOverrides), the options
// (with an image) the NodeClaim would have if every offering were available and every subnet
// of the class had room.
func unavailableOptions(claim *karpv1.NodeClaim, its []catalog.InstanceType, r *resolved) []string {
	zones := map[string]bool{}
	for _, s := range r.subnets {
		zones[s.Zone] = true
	}
	all := make([]catalog.InstanceType, len(its))
	for i := range its {
		all[i] = its[i]
		all[i].Offerings = slices.Clone(its[i].Offerings)
		for j := range all[i].Offerings {
			all[i].Offerings[j].Available = true
		}
	}
	_, opts := launchOptions(claim, all, zones)
	opts = slices.DeleteFunc(opts, func(o option) bool { _, ok := imageFor(r.images, o.it); return !ok })
	var out []string
	for _, o := range opts[:min(len(opts), maxOverrides)] {
		out = append(out, o.it.Name+"/"+o.offering.Zone+"/"+o.offering.CapacityType)
	}
	return out
}

// fleetLaunch is one CreateFleet request for a NodeClaim: its options, all of one capacity
// type (and, when reserved, of one reservation kind), and what the launch templates need.
type fleetLaunch struct {
	claim        *karpv1.NodeClaim
	nc           *awsv1.EC2NodeClass
	r            *resolved
	facts        Options
	capacityType string
	opts         []option
	subnetByZone map[string]network.Subnet
}

// launchKind is what differs between the launch templates of one launch: how the instance
// is bought (capacity type and, for a reservation, which one and its type), the kubelet's pod
// limit where the user data carries it, and the EFA interfaces.
type launchKind struct {
	capacityType, reservationID, reservationType string
	maxPods                                      int32
	efa                                          int
}

// fleetConfigs makes one launch template per image (architecture and accelerator variant),
// for AL2 and Bottlerocket per pod capacity (their user data carries the kubelet's pod limit),
// per capacity reservation (a template targets one) and per EFA interface count, in a stable
// order.
func (p *Provider) fleetConfigs(ctx context.Context, l *fleetLaunch) ([]ec2types.FleetLaunchTemplateConfigRequest, error) {
	type ltKey struct {
		image       string
		maxPods     int32
		reservation string
		efa         int
	}
	groups := map[ltKey][]option{}
	for _, o := range l.opts {
		im, _ := imageFor(l.r.images, o.it)
		k := ltKey{image: im.ID, reservation: o.offering.ReservationID, efa: efaInterfaces(l.claim, l.nc, o.it)}
		if passesMaxPods(l.r.opts.AMIFamily) {
			k.maxPods = int32(o.it.Capacity[catalog.Pods])
		}
		groups[k] = append(groups[k], o)
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b ltKey) int {
		return cmp.Or(cmp.Compare(a.image, b.image), cmp.Compare(a.maxPods, b.maxPods), cmp.Compare(a.reservation, b.reservation), cmp.Compare(a.efa, b.efa))
	})
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for _, k := range keys {
		first := groups[k][0].offering
		kind := launchKind{capacityType: l.capacityType, reservationID: first.ReservationID, reservationType: first.ReservationType,
			maxPods: k.maxPods, efa: k.efa}
		im, _ := imageFor(l.r.images, groups[k][0].it)
		data, err := launchTemplateData(l.claim, l.nc, l.r, im, l.facts, kind, !p.opts.NoReservedCapacity)
		if err != nil {
			return nil, err
		}
		ltID, err := p.ensureLaunchTemplate(ctx, l.claim, l.nc, data)
		if err != nil {
			return nil, err
		}
		cfg := ec2types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
			LaunchTemplateId: aws.String(ltID), Version: aws.String("$Latest")}}
		for _, o := range groups[k] {
			cfg.Overrides = append(cfg.Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(o.it.Name), SubnetId: aws.String(l.subnetByZone[o.offering.Zone].ID)})
		}
		configs = append(configs, cfg)
	}
	return configs, nil
}

// input is the CreateFleet request. A default capacity reservation is launched into as
// on-demand capacity, a capacity block as capacity-block (EC2 wants it said in both places).
func (l *fleetLaunch) input(configs []ec2types.FleetLaunchTemplateConfigRequest) *ec2.CreateFleetInput {
	tags := instanceTags(l.claim, l.nc, l.facts.ClusterName)
	target := ec2types.DefaultTargetCapacityType(l.capacityType)
	block := l.capacityType == catalog.CapacityTypeReserved && l.opts[0].offering.ReservationType == capreservation.TypeCapacityBlock
	switch {
	case block:
		target = ec2types.DefaultTargetCapacityTypeCapacityBlock
	case l.capacityType == catalog.CapacityTypeReserved:
		target = ec2types.DefaultTargetCapacityTypeOnDemand
	}
	in := &ec2.CreateFleetInput{
		Type:                        ec2types.FleetTypeInstant,
		ClientToken:                 aws.String(string(l.claim.UID)),
		Context:                     l.nc.Spec.Context,
		LaunchTemplateConfigs:       configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{DefaultTargetCapacityType: target, TotalTargetCapacity: aws.Int32(1)},
		// The controller policy lets CreateFleet create only resources that carry the
		// cluster's tags.
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
		},
	}
	switch {
	case l.capacityType == catalog.CapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case !block:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in
}

// fleetResult reads CreateFleet's answer: the launched instance as the NodeClaim, or the error.
// Offerings that failed for lack of capacity are marked unavailable (a reservation: exhausted)
// so the next NodeClaim avoids them.
func (p *Provider) fleetResult(l *fleetLaunch, out *ec2.CreateFleetOutput, now time.Time) (*karpv1.NodeClaim, error) {
	zoneOf := map[string]string{}
	for _, s := range l.r.subnets {
		zoneOf[s.ID] = s.Zone
	}
	overrideOf := func(o *ec2types.FleetLaunchTemplateOverrides) (string, string, *option) {
		it := string(o.InstanceType)
		zone := cmp.Or(zoneOf[aws.ToString(o.SubnetId)], aws.ToString(o.AvailabilityZone))
		for i := range l.opts {
			if l.opts[i].it.Name == it && l.opts[i].offering.Zone == zone {
				return it, zone, &l.opts[i]
			}
		}
		return it, zone, nil
	}
	var failed, other []string
	for _, e := range out.Errors {
		code := aws.ToString(e.ErrorCode)
		var it, zone string
		var opt *option
		if lo := e.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
			it, zone, opt = overrideOf(lo.Overrides)
		}
		switch {
		case !capacityErrors[code]:
			other = append(other, fmt.Sprintf("%s in %s: %s: %s", it, zone, code, aws.ToString(e.ErrorMessage)))
			continue
		case opt != nil && opt.offering.ReservationID != "":
			p.reservations.MarkExhausted(opt.offering.ReservationID)
		default:
			p.opts.Unavailable.Mark(it, zone, l.capacityType, now.Add(UnavailableFor))
		}
		if code == "InsufficientFreeAddressesInSubnet" && e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			p.fullSubnets.Mark(aws.ToString(e.LaunchTemplateAndOverrides.Overrides.SubnetId), now.Add(UnavailableFor))
		}
		failed = append(failed, it+"/"+zone+"/"+l.capacityType)
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 || fi.LaunchTemplateAndOverrides == nil || fi.LaunchTemplateAndOverrides.Overrides == nil {
			continue
		}
		name, zone, opt := overrideOf(fi.LaunchTemplateAndOverrides.Overrides)
		it, ok := p.opts.Catalog.InstanceType(name, l.r.opts)
		if !ok {
			return nil, fmt.Errorf("nodeclaim %s: EC2 launched %s, which the catalog does not know", l.claim.Name, name)
		}
		bought := catalog.Offering{Zone: zone, CapacityType: l.capacityType}
		if fi.Lifecycle == ec2types.InstanceLifecycleSpot {
			bought.CapacityType = catalog.CapacityTypeSpot
		}
		if opt != nil && opt.offering.ReservationID != "" {
			bought = opt.offering
			p.reservations.MarkLaunched(bought.ReservationID)
		}
		im, _ := imageFor(l.r.images, &it)
		return launched(l.claim, &it, fi.InstanceIds[0], bought, im.ID), nil
	}
	if len(other) == 0 && len(failed) > 0 {
		return nil, &cloud.InsufficientCapacityError{NodeClaim: l.claim.Name, Offerings: failed}
	}
	return nil, fmt.Errorf("nodeclaim %s: CreateFleet launched nothing: %s", l.claim.Name, strings.Join(append(other, failed...), "; "))
}

// imageFor is the newest of the images that suits a node of the type (see Image.Suits).
func imageFor(images []amifamily.Image, it *catalog.InstanceType) (amifamily.Image, bool) {
	var best amifamily.Image
	found := false
	for _, im := range images {
		if im.Suits(it.Labels) && (!found || im.Created > best.Created || im.Created == best.Created && im.ID > best.ID) {
			best, found = im, true
		}
	}
	return best, found
}

// launchedEarlier finds the instance an earlier Create launched for the NodeClaim by its
// karpenter.sh/nodeclaim tag.
func (p *Provider) launchedEarlier(ctx context.Context, claim *karpv1.NodeClaim, r *resolved) (*karpv1.NodeClaim, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		ec2filter.New("tag:"+prereq.ClusterOwnedTag(p.opts.ClusterName), "owned"),
		ec2filter.New("tag:"+TagNodeClaim, claim.Name),
		ec2filter.New("instance-state-name", liveStates...),
	}})
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: looking up the instance of an earlier launch: %w", claim.Name, err)
	}
	for _, res := range out.Reservations {
		for _, in := range res.Instances {
			it, ok := p.opts.Catalog.InstanceType(string(in.InstanceType), r.opts)
			if !ok {
				return nil, fmt.Errorf("nodeclaim %s: EC2 launched %s, which the catalog does not know", claim.Name, in.InstanceType)
			}
			return launched(claim, &it, aws.ToString(in.InstanceId), p.bought(&in), aws.ToString(in.ImageId)), nil
		}
	}
	return nil, fmt.Errorf("nodeclaim %s: an earlier launch with this uid failed and EC2 refuses to reuse its token with other options; delete the NodeClaim so a new one is computed: %w", claim.Name, cloud.ErrNotFound)
}

// launched is the NodeClaim as it is once its instance exists, bought as the offering says
// (zone, capacity type and, for a reservation, its labels).
func launched(claim *karpv1.NodeClaim, it *catalog.InstanceType, id string, bought catalog.Offering, imageID string) *karpv1.NodeClaim {
	out := claim.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	maps.Copy(out.Labels, it.Labels)
	out.Labels[labelZone] = bought.Zone
	out.Labels[karpv1.LabelCapacityType] = bought.CapacityType
	if bought.ReservationID != "" {
		out.Labels[awsv1.LabelCapacityReservationID] = bought.ReservationID
		out.Labels[awsv1.LabelCapacityReservationType] = bought.ReservationType
	}
	out.Status.ProviderID = fmt.Sprintf("aws:///%s/%s", bought.Zone, id)
	out.Status.ImageID = imageID
	out.Status.Capacity = resourceList(it.Capacity)
	out.Status.Allocatable = resourceList(it.Allocatable)
	return out
}

func resourceList(r catalog.Resources) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, v := range r {
		if v == 0 {
			continue
		}
		name := corev1.ResourceName(catalog.ResourceNames[i])
		switch catalog.Resource(i) {
		case catalog.CPU:
			out[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		case catalog.Memory, catalog.EphemeralStorage:
			out[name] = *resource.NewQuantity(v, resource.BinarySI)
		default:
			out[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// poolTags are the tags of everything launched for a NodeClaim's pool and class: the class's
// tags, then karpool's (which the class may not override). The controller policy's conditions
// rely on karpenter.sh/nodepool, kubernetes.io/cluster/<cluster>=owned and eks:eks-cluster-name.
func poolTags(claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, cluster string) map[string]string {
	m := maps.Clone(nc.Spec.Tags)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, map[string]string{
		karpv1.LabelNodePool:            claim.Labels[karpv1.LabelNodePool],
		awsv1.LabelNodeClass:            nc.Name,
		prereq.ClusterOwnedTag(cluster): "owned",
		TagEKSCluster:                   cluster,
	})
	return m
}

// instanceTags are the tags of a NodeClaim's instance, volumes and fleet: the pool's tags plus
// the NodeClaim's name and a Name.
func instanceTags(claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, cluster string) []ec2types.Tag {
	m := poolTags(claim, nc, cluster)
	m[TagNodeClaim] = claim.Name
	m[tagName] = karpv1.LabelNodePool + "/" + claim.Labels[karpv1.LabelNodePool]
	return awstags.EC2(m)
}

// kubeletLabel reports whether the kubelet accepts the label in --node-labels: it refuses
// kubernetes.io and k8s.io keys except a few well-known ones and the node./kubelet. prefixes.
func kubeletLabel(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	if !(domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || domain == "k8s.io" || strings.HasSuffix(domain, ".k8s.io")) {
		return true
	}
	for _, allowed := range []string{"kubelet.kubernetes.io", "node.kubernetes.io"} {
		if domain == allowed || strings.HasSuffix(domain, "."+allowed) {
			return true
		}
	}
	return false
}

// launchTemplateData is the launch template for a NodeClaim's launches of one architecture
// and one kind (see launchKind). Everything NodeClaim-specific (its name) stays out of it, so NodeClaims of the same pool,
// class and capacity type share one template. With targeting (the ReservedCapacity gate), a
// reserved launch goes only into its reservation and every other launch stays out of
// reservations, open ones included, as Karpenter's templates say.
func launchTemplateData(claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, r *resolved, im amifamily.Image, facts Options, kind launchKind, targeting bool) (*ec2types.RequestLaunchTemplateData, error) {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		if kubeletLabel(k) {
			labels[k] = v
		}
	}
	labels[karpv1.LabelCapacityType] = kind.capacityType
	if kind.reservationID != "" {
		labels[awsv1.LabelCapacityReservationID] = kind.reservationID
		labels[awsv1.LabelCapacityReservationType] = kind.reservationType
	}
	labels[awsv1.LabelNodeClass] = nc.Name
	taints := []corev1.Taint{{Key: karpv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}
	for _, t := range append(slices.Clone(claim.Spec.Taints), claim.Spec.StartupTaints...) {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	b := userdata.Bootstrap{ClusterName: facts.ClusterName, Endpoint: facts.ClusterEndpoint, CA: facts.ClusterCA,
		CIDR: facts.ClusterCIDR, Labels: labels, Taints: taints, Kubelet: nc.Spec.Kubelet, MaxPods: kind.maxPods, Custom: aws.ToString(nc.Spec.UserData)}
	_, windows := catalog.WindowsBuild(r.opts.AMIFamily)
	if r.opts.AMIFamily == catalog.AMIFamilyAL2 || r.opts.AMIFamily == catalog.AMIFamilyBottlerocket ||
		windows && nc.Spec.Kubelet != nil && len(nc.Spec.Kubelet.ClusterDNS) > 0 {
		dns, err := userdata.ClusterDNS(nc.Spec.Kubelet, facts.ClusterCIDR)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		b.DNSIP = dns
	}
	ud, err := userdata.Render(r.opts.AMIFamily, b)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	bdms, err := blockDevices(nc, r.opts.AMIFamily)
	if err != nil {
		return nil, err
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(im.ID),
		UserData:            aws.String(base64.StdEncoding.EncodeToString(ud)),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(r.profile)},
		BlockDeviceMappings: bdms,
		MetadataOptions:     metadataOptions(nc.Spec.MetadataOptions),
		CpuOptions:          cpuOptions(nc.Spec.CPUOptions),
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(aws.ToBool(nc.Spec.DetailedMonitoring))},
		// Network interfaces are created by the launch too; the controller policy wants them
		// tagged like the instance.
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface,
			Tags: awstags.EC2(poolTags(claim, nc, facts.ClusterName))}},
	}
	sgs := make([]string, len(r.sgs))
	for i, g := range r.sgs {
		sgs[i] = g.ID
	}
	// With network interfaces the security groups go on them; EC2 refuses both.
	if data.NetworkInterfaces = networkInterfaces(nc, sgs, kind.efa); data.NetworkInterfaces == nil {
		data.SecurityGroupIds = sgs
	}
	if targeting {
		reservationTargeting(data, kind)
	}
	return data, nil
}

// reservationTargeting sets the template's capacity reservation preference: only the target
// reservation for a reserved launch (a capacity block bought as such), none otherwise.
func reservationTargeting(data *ec2types.RequestLaunchTemplateData, kind launchKind) {
	spec := &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}
	if kind.reservationID != "" {
		spec.CapacityReservationPreference = ec2types.CapacityReservationPreferenceCapacityReservationsOnly
		spec.CapacityReservationTarget = &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(kind.reservationID)}
	}
	data.CapacityReservationSpecification = spec
	if kind.reservationType == capreservation.TypeCapacityBlock {
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
}

// metadataOptions applies Karpenter's defaults: IMDS on, IPv6 off, one hop, tokens required.
func metadataOptions(m *awsv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	if m == nil {
		m = &awsv1.MetadataOptions{}
	}
	return &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(cmp.Or(aws.ToString(m.HTTPEndpoint), "enabled")),
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(cmp.Or(aws.ToString(m.HTTPProtocolIPv6), "disabled")),
		HttpPutResponseHopLimit: aws.Int32(int32(cmp.Or(aws.ToInt64(m.HTTPPutResponseHopLimit), 1))),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensState(cmp.Or(aws.ToString(m.HTTPTokens), "required")),
	}
}

// passesMaxPods: the families whose bootstrap takes the instance type's pod count from the
// launch template (AL2023's nodeadm computes it itself).
func passesMaxPods(family string) bool {
	_, windows := catalog.WindowsBuild(family)
	return family == catalog.AMIFamilyAL2 || family == catalog.AMIFamilyBottlerocket || windows
}

// blockDevices renders spec.blockDeviceMappings, or the family's default volumes as Karpenter
// sets them (catalog.DefaultVolumes, the same the price of a node counts), encrypted.
func blockDevices(nc *awsv1.EC2NodeClass, family string) ([]ec2types.LaunchTemplateBlockDeviceMappingRequest, error) {
	if len(nc.Spec.BlockDeviceMappings) == 0 {
		var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
		for _, v := range catalog.DefaultVolumes(family) {
			out = append(out, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: aws.String(v.Device),
				Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(int32(v.SizeGiB)), VolumeType: ec2types.VolumeType(v.Type),
					Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}})
		}
		return out, nil
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for i, b := range nc.Spec.BlockDeviceMappings {
		if b == nil {
			continue
		}
		m := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName}
		if e := b.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted,
				KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID, VolumeType: ec2types.VolumeType(aws.ToString(e.VolumeType)),
				VolumeInitializationRate: e.VolumeInitializationRate}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			if e.VolumeSize != nil {
				// EBS sizes are in GiB; round up so a "G" size is never short.
				const gib = 1 << 30
				size := (e.VolumeSize.Value() + gib - 1) / gib
				if size <= 0 {
					return nil, fmt.Errorf("EC2NodeClass %s: spec.blockDeviceMappings[%d].ebs.volumeSize %s must be positive", nc.Name, i, e.VolumeSize)
				}
				ebs.VolumeSize = aws.Int32(int32(size))
			}
			m.Ebs = ebs
		}
		out = append(out, m)
	}
	return out, nil
}

// launchTemplateName names a template after the hash of its content and tags, so a changed
// class (new AMI, user data, security groups, ...) gets a new template, unchanged ones are
// reused, and each pool has its own (its name is in the tags).
func launchTemplateName(data *ec2types.RequestLaunchTemplateData, tags []ec2types.Tag) (string, error) {
	raw, err := json.Marshal(struct {
		Data *ec2types.RequestLaunchTemplateData
		Tags []ec2types.Tag
	}{data, tags})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return "karpool/" + hex.EncodeToString(sum[:16]), nil
}

// ensureLaunchTemplate returns the id of the template with this content, creating it when
// missing. Concurrent launches may race to create it; the loser reads the winner's.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, data *ec2types.RequestLaunchTemplateData) (string, error) {
	tagMap := poolTags(claim, nc, p.opts.ClusterName)
	tagMap[TagCluster] = p.opts.ClusterName
	tags := awstags.EC2(tagMap)
	name, err := launchTemplateName(data, tags)
	if err != nil {
		return "", err
	}
	p.ltMu.Lock()
	id, ok := p.launchTemplates[name]
	p.ltMu.Unlock()
	if ok {
		return id, nil
	}
	describe := func() (string, error) {
		out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
		if err != nil {
			return "", err
		}
		if len(out.LaunchTemplates) == 0 {
			return "", fmt.Errorf("launch template %s: not returned", name)
		}
		return aws.ToString(out.LaunchTemplates[0].LaunchTemplateId), nil
	}
	id, err = describe()
	if code := awserr.Code(err); code == "InvalidLaunchTemplateName.NotFoundException" || code == "InvalidLaunchTemplateId.NotFound" {
		var out *ec2.CreateLaunchTemplateOutput
		out, err = p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			ClientToken:        aws.String(strings.TrimPrefix(name, "karpool/")),
			LaunchTemplateData: data,
			TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}},
		})
		switch {
		case err == nil:
			id = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
		case awserr.Code(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
			id, err = describe()
		}
	}
	if err != nil {
		return "", fmt.Errorf("EC2NodeClass %s: launch template %s: %w", nc.Name, name, err)
	}
	p.ltMu.Lock()
	p.launchTemplates[name] = id
	p.ltMu.Unlock()
	return id, nil
}

// DeleteLaunchTemplates deletes the launch templates karpool created for the class (found by
// their kubernetes.io/cluster/<cluster>=owned and karpenter.k8s.aws/ec2nodeclass tags). Call it
// when the class is deleted, once no NodeClaim uses it.
func (p *Provider) DeleteLaunchTemplates(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	pg := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		ec2filter.New("tag:"+prereq.ClusterOwnedTag(p.opts.ClusterName), "owned"),
		ec2filter.New("tag:"+awsv1.LabelNodeClass, nc.Name),
	}})
	var ids []string
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("EC2NodeClass %s: listing its launch templates: %w", nc.Name, err)
		}
		for _, lt := range page.LaunchTemplates {
			ids = append(ids, aws.ToString(lt.LaunchTemplateId))
		}
	}
	for _, id := range ids {
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
		if err != nil && awserr.Code(err) != "InvalidLaunchTemplateId.NotFound" {
			return fmt.Errorf("EC2NodeClass %s: deleting launch template %s: %w", nc.Name, id, err)
		}
	}
	p.ltMu.Lock()
	for name, id := range p.launchTemplates {
		if slices.Contains(ids, id) {
			delete(p.launchTemplates, name)
		}
	}
	p.ltMu.Unlock()
	return nil
}
