package awssim

import (
	"fmt"
	"hash/fnv"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// ids allocates monotonically increasing, deterministic identifiers per kind.
type ids struct{ n map[string]uint64 }

func (i *ids) next(kind string) uint64 {
	if i.n == nil {
		i.n = map[string]uint64{}
	}
	i.n[kind]++
	return i.n[kind]
}

// id returns KIND-00000000000000001 style ids (17 hex digits, like EC2's long ids).
func (i *ids) id(kind string) string { return fmt.Sprintf("%s-%017x", kind, i.next(kind)) }

// uuid returns a deterministic UUID-shaped id for kind.
func (i *ids) uuid(kind string) string {
	h := fnv.New32a()
	h.Write([]byte(kind))
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", h.Sum32(), i.next("uuid:"+kind))
}

// upperID returns AWS IAM-style unique ids: PREFIX + 17 upper-case base32-ish characters.
func (i *ids) upperID(prefix string) string {
	return fmt.Sprintf("%s%017X", prefix, i.next("iam:"+prefix))
}

type zone struct {
	name, id string
}

type subnet struct {
	ec2types.Subnet
	base   uint32 // first address of the CIDR
	nextIP uint32 // next host offset to hand out
}

// state is everything the account holds. Every access is under Server.mu.
type state struct {
	s   *Server
	ids ids

	zones   []zone
	vpc     ec2types.Vpc
	subnets []*subnet
	sgs     []*ec2types.SecurityGroup
	images  []*image
	params  map[string]*ssmParam

	lts       map[string]*launchTemplate // by id
	instances map[string]*instance
	order     []string // instance ids in launch order
	tokens    map[string]any
	// reservations are the capacity reservations (ODCRs and Capacity Blocks) by id.
	reservations map[string]*capacityReservation

	iam    iamState
	queues map[string]*queue // by name
	// deletedQueues remembers deletion times: a name cannot be reused for 60 s.
	deletedQueues  map[string]time.Time
	rules          map[string]*rule // by name (default bus)
	accessEntries  map[string]*accessEntry
	clusterCreated time.Time

	// delivered and deliveryFailures count EventBridge deliveries to SQS.
	delivered, deliveryFailures int

	// spotPrices overrides the catalog spot price of a type in a zone.
	spotPrices map[[2]string]float64
}

func newState(s *Server) *state {
	st := &state{
		s:             s,
		params:        map[string]*ssmParam{},
		lts:           map[string]*launchTemplate{},
		instances:     map[string]*instance{},
		reservations:  map[string]*capacityReservation{},
		tokens:        map[string]any{},
		queues:        map[string]*queue{},
		deletedQueues: map[string]time.Time{},
		rules:         map[string]*rule{},
		accessEntries: map[string]*accessEntry{},
		spotPrices:    map[[2]string]float64{},
	}
	st.iam.init()
	st.clusterCreated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.setupNetwork()
	st.setupImages()
	return st
}

// regionAbbrev turns us-east-1 into use1 and ap-northeast-2 into apne2, as zone ids spell them.
func regionAbbrev(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) < 3 {
		return region
	}
	dirs := map[string]string{"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
		"northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1 : len(parts)-1] {
		if d, ok := dirs[p]; ok {
			b.WriteString(d)
		} else if p != "" {
			b.WriteString(p[:1])
		}
	}
	b.WriteString(parts[len(parts)-1])
	return b.String()
}

func (st *state) tagsDiscovery(name string) []ec2types.Tag {
	return []ec2types.Tag{
		{Key: aws.String("Name"), Value: aws.String(name)},
		{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(st.s.opts.ClusterName)},
		{Key: aws.String("kubernetes.io/cluster/" + st.s.opts.ClusterName), Value: aws.String("shared")},
	}
}

func (st *state) setupNetwork() {
	o := st.s.opts
	abbrev := regionAbbrev(o.Region)
	for i, z := range st.s.catalog.Zones() {
		st.zones = append(st.zones, zone{name: z, id: fmt.Sprintf("%s-az%d", abbrev, i+1)})
	}
	vpcID := st.ids.id("vpc")
	st.vpc = ec2types.Vpc{
		VpcId:           aws.String(vpcID),
		CidrBlock:       aws.String("10.0.0.0/16"),
		State:           ec2types.VpcStateAvailable,
		OwnerId:         aws.String(o.AccountID),
		IsDefault:       aws.Bool(false),
		InstanceTenancy: ec2types.TenancyDefault,
		DhcpOptionsId:   aws.String(st.ids.id("dopt")),
		CidrBlockAssociationSet: []ec2types.VpcCidrBlockAssociation{{
			AssociationId: aws.String(st.ids.id("vpc-cidr-assoc")), CidrBlock: aws.String("10.0.0.0/16"),
			CidrBlockState: &ec2types.VpcCidrBlockState{State: ec2types.VpcCidrBlockStateCodeAssociated},
		}},
		Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(o.ClusterName + "-vpc")}},
	}
	for i, z := range st.zones {
		id := st.ids.id("subnet")
		base := uint32(10)<<24 | uint32(i*64)<<8 // 10.0.0.0/18, 10.0.64.0/18, 10.0.128.0/18
		cidr := fmt.Sprintf("%s/18", ipString(base))
		sn := &subnet{base: base, nextIP: 10}
		sn.Subnet = ec2types.Subnet{
			SubnetId:                    aws.String(id),
			SubnetArn:                   aws.String(fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", o.Region, o.AccountID, id)),
			VpcId:                       aws.String(vpcID),
			AvailabilityZone:            aws.String(z.name),
			AvailabilityZoneId:          aws.String(z.id),
			CidrBlock:                   aws.String(cidr),
			AvailableIpAddressCount:     aws.Int32(16384 - 5),
			State:                       ec2types.SubnetStateAvailable,
			OwnerId:                     aws.String(o.AccountID),
			DefaultForAz:                aws.Bool(false),
			MapPublicIpOnLaunch:         aws.Bool(false),
			AssignIpv6AddressOnCreation: aws.Bool(false),
			Ipv6Native:                  aws.Bool(false),
			Tags:                        st.tagsDiscovery(fmt.Sprintf("%s-private-%s", o.ClusterName, z.name)),
		}
		st.subnets = append(st.subnets, sn)
	}
	sgID := st.ids.id("sg")
	st.sgs = append(st.sgs, &ec2types.SecurityGroup{
		GroupId:          aws.String(sgID),
		GroupName:        aws.String("eks-cluster-sg-" + o.ClusterName),
		Description:      aws.String("EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads."),
		VpcId:            aws.String(vpcID),
		OwnerId:          aws.String(o.AccountID),
		SecurityGroupArn: aws.String(fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", o.Region, o.AccountID, sgID)),
		IpPermissions:    []ec2types.IpPermission{},
		IpPermissionsEgress: []ec2types.IpPermission{{
			IpProtocol: aws.String("-1"), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}},
		}},
		Tags: st.tagsDiscovery("eks-cluster-sg-" + o.ClusterName),
	})
}

func ipString(a uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&0xff, a>>8&0xff, a&0xff)
}

func (st *state) zoneByName(name string) (zone, bool) {
	for _, z := range st.zones {
		if z.name == name {
			return z, true
		}
	}
	return zone{}, false
}

func (st *state) subnetByID(id string) *subnet {
	for _, sn := range st.subnets {
		if aws.ToString(sn.SubnetId) == id {
			return sn
		}
	}
	return nil
}

func (st *state) sgByID(id string) *ec2types.SecurityGroup {
	for _, sg := range st.sgs {
		if aws.ToString(sg.GroupId) == id {
			return sg
		}
	}
	return nil
}

func (st *state) sgByName(name string) *ec2types.SecurityGroup {
	for _, sg := range st.sgs {
		if aws.ToString(sg.GroupName) == name {
			return sg
		}
	}
	return nil
}

// ---- filters ----

// filterValues returns the values an object has for a filter name; ok=false for an unknown name.
type filterValues func(name string) (vals []string, ok bool)

// tagFilter resolves tag:KEY, tag-key and tag-value against tags.
func tagFilter(tags []ec2types.Tag, name string) ([]string, bool) {
	switch {
	case strings.HasPrefix(name, "tag:"):
		k := strings.TrimPrefix(name, "tag:")
		for _, t := range tags {
			if aws.ToString(t.Key) == k {
				return []string{aws.ToString(t.Value)}, true
			}
		}
		return nil, true
	case name == "tag-key":
		var out []string
		for _, t := range tags {
			out = append(out, aws.ToString(t.Key))
		}
		return out, true
	case name == "tag-value":
		var out []string
		for _, t := range tags {
			out = append(out, aws.ToString(t.Value))
		}
		return out, true
	}
	return nil, false
}

// matchFilters applies EC2 filter semantics: values of one filter are ORed (with * and ?
// wildcards), filters are ANDed. An unknown filter name is an InvalidParameterValue error.
func matchFilters(filters []ec2types.Filter, get filterValues) (bool, error) {
	for _, f := range filters {
		name := aws.ToString(f.Name)
		have, ok := get(name)
		if !ok {
			return false, apiErr(400, "InvalidParameterValue", "The filter '%s' is invalid", name)
		}
		if !anyMatch(f.Values, have) {
			return false, nil
		}
	}
	return true, nil
}

func anyMatch(want, have []string) bool {
	for _, w := range want {
		for _, h := range have {
			if wildcardMatch(w, h) {
				return true
			}
		}
	}
	return false
}

// wildcardMatch matches EC2 filter wildcards: * any run, ? one character; \ escapes.
func wildcardMatch(pattern, s string) bool {
	if !strings.ContainsAny(pattern, `*?\`) {
		return pattern == s
	}
	// path.Match treats [ specially; escape it so only * and ? are wildcards.
	p := strings.NewReplacer("[", `\[`, "]", `\]`).Replace(pattern)
	ok, err := path.Match(p, s)
	if err != nil {
		return pattern == s
	}
	if ok {
		return true
	}
	// path.Match's * does not cross '/', EC2's does: fall back to a simple matcher.
	return globMatch(pattern, s)
}

func globMatch(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(p[1:], s[1:])
	case '\\':
		if len(p) > 1 {
			return s != "" && s[0] == p[1] && globMatch(p[2:], s[1:])
		}
	}
	return s != "" && s[0] == p[0] && globMatch(p[1:], s[1:])
}

// ---- tags ----

// taggable returns the tag list of an EC2 resource by id.
func (st *state) taggable(id string) (*[]ec2types.Tag, bool) {
	if in, ok := st.instances[id]; ok {
		return &in.tags, true
	}
	if lt, ok := st.lts[id]; ok {
		return &lt.tags, true
	}
	for _, sn := range st.subnets {
		if aws.ToString(sn.SubnetId) == id {
			return &sn.Tags, true
		}
	}
	for _, sg := range st.sgs {
		if aws.ToString(sg.GroupId) == id {
			return &sg.Tags, true
		}
	}
	for _, im := range st.images {
		if aws.ToString(im.ImageId) == id {
			return &im.Tags, true
		}
	}
	if aws.ToString(st.vpc.VpcId) == id {
		return &st.vpc.Tags, true
	}
	if r, ok := st.reservations[id]; ok {
		return &r.tags, true
	}
	return nil, false
}

func setTags(tags *[]ec2types.Tag, add []ec2types.Tag) {
	for _, t := range add {
		found := false
		for i := range *tags {
			if aws.ToString((*tags)[i].Key) == aws.ToString(t.Key) {
				(*tags)[i].Value = aws.String(aws.ToString(t.Value))
				found = true
			}
		}
		if !found {
			*tags = append(*tags, ec2types.Tag{Key: aws.String(aws.ToString(t.Key)), Value: aws.String(aws.ToString(t.Value))})
		}
	}
}

func tagValue(tags []ec2types.Tag, key string) (string, bool) {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value), true
		}
	}
	return "", false
}

func cloneTags(tags []ec2types.Tag) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(tags))
	for _, t := range tags {
		out = append(out, ec2types.Tag{Key: aws.String(aws.ToString(t.Key)), Value: aws.String(aws.ToString(t.Value))})
	}
	sort.SliceStable(out, func(i, j int) bool { return aws.ToString(out[i].Key) < aws.ToString(out[j].Key) })
	return out
}

// advance moves time-driven state to now; it reports whether anything changed.
func (st *state) advance(now time.Time) bool {
	changed := st.advanceInstances(now)
	if st.advanceQueues(now) {
		changed = true
	}
	return changed
}
