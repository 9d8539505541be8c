package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	cloudaws "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/testbed/awssim"
)

const cluster = "workshop"

type env struct {
	srv   *awssim.Server
	cfg   aws.Config
	p     *cloudaws.Provider
	unav  *catalog.Unavailable
	class *awsv1.EC2NodeClass
	ctx   context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv, err := awssim.Start(awssim.Options{ClusterName: cluster, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cfg := srv.AWSConfig()
	// The node role and its instance profile are prerequisites the reconciler creates.
	ic := iam.NewFromConfig(cfg)
	must(t, func() error {
		_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-" + cluster),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
		return err
	})
	must(t, func() error {
		_, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("workshop_node")})
		return err
	})
	must(t, func() error {
		_, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("workshop_node"),
			RoleName: aws.String("KarpenterNodeRole-" + cluster)})
		return err
	})
	unav := catalog.NewUnavailable()
	p, err := cloudaws.New(cfg, cloudaws.Options{ClusterName: cluster, Unavailable: unav})
	if err != nil {
		t.Fatal(err)
	}
	discovery := map[string]string{"karpenter.sh/discovery": cluster}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		InstanceProfile:            aws.String("workshop_node"),
		Tags:                       map[string]string{"team": "platform"},
	}}
	return &env{srv: srv, cfg: cfg, p: p, unav: unav, class: class, ctx: ctx}
}

func must(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// workshopClaim is the NodeClaim the scheduler computes for the workshop pod set.
func workshopClaim(name string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "r5.large", "m5.xlarge"}},
				{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("6")}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
}

func calls(srv *awssim.Server, action string) []awssim.Call {
	var out []awssim.Call
	for _, c := range srv.Calls() {
		if c.Action == action && c.ErrorCode == "" {
			out = append(out, c)
		}
	}
	return out
}

func liveInstances(srv *awssim.Server) []awssim.InstanceInfo {
	var out []awssim.InstanceInfo
	for _, in := range srv.Instances() {
		if in.State == "pending" || in.State == "running" {
			out = append(out, in)
		}
	}
	return out
}

func TestLaunchWorkshopNodeClaim(t *testing.T) {
	e := newEnv(t)
	claim := workshopClaim("default-abcde")
	got, err := e.p.Create(e.ctx, claim, e.class)
	if err != nil {
		t.Fatal(err)
	}
	ins := liveInstances(e.srv)
	if len(ins) != 1 {
		t.Fatalf("want one instance, got %+v", ins)
	}
	in := ins[0]
	if in.InstanceType != "m5.large" || in.CapacityType != "on-demand" {
		t.Errorf("launched %s %s, want m5.large on-demand", in.InstanceType, in.CapacityType)
	}
	if got.Status.ProviderID != in.ProviderID || got.Labels[corev1.LabelTopologyZone] != in.Zone ||
		got.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || got.Labels[karpv1.LabelCapacityType] != "on-demand" {
		t.Errorf("nodeclaim status/labels %q %v, instance %+v", got.Status.ProviderID, got.Labels, in)
	}
	if cpu, mem, pods := got.Status.Allocatable[corev1.ResourceCPU], got.Status.Allocatable[corev1.ResourceMemory], got.Status.Allocatable[corev1.ResourcePods]; cpu.String() != "1930m" || mem.Value() != 6903<<20 || pods.Value() != 29 {
		t.Errorf("allocatable %s %s %s, want 1930m 6903Mi 29", cpu.String(), mem.String(), pods.String())
	}
	// The subnet was discovered by its tag.
	sn, err := ec2.NewFromConfig(e.cfg).DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(sn.Subnets, func(s ec2types.Subnet) bool {
		return aws.ToString(s.AvailabilityZone) == in.Zone && tagged(s.Tags, "karpenter.sh/discovery", cluster)
	}) {
		t.Errorf("instance zone %s has no discovered subnet", in.Zone)
	}
	wantTags := map[string]string{
		"karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": "default-abcde", "karpenter.k8s.aws/ec2nodeclass": "default",
		"kubernetes.io/cluster/" + cluster: "owned", "eks:eks-cluster-name": cluster, "Name": "karpenter.sh/nodepool/default", "team": "platform",
	}
	for k, v := range wantTags {
		if in.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, in.Tags[k], v)
		}
	}
	// The AMI is the recommended AL2023 image of the cluster's Kubernetes version.
	param, err := ssm.NewFromConfig(e.cfg).GetParameter(e.ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	if in.ImageID != aws.ToString(param.Parameter.Value) || got.Status.ImageID != in.ImageID {
		t.Errorf("image %s (nodeclaim %s), want %s", in.ImageID, got.Status.ImageID, aws.ToString(param.Parameter.Value))
	}

	lts := calls(e.srv, "CreateLaunchTemplate")
	if len(lts) != 1 {
		t.Fatalf("want one CreateLaunchTemplate, got %d", len(lts))
	}
	lt := lts[0].Input.(*ec2.CreateLaunchTemplateInput)
	if in.Tags["aws:ec2launchtemplate:id"] == "" || !strings.HasPrefix(aws.ToString(lt.LaunchTemplateName), "karpool/") {
		t.Errorf("launch template %q, instance tags %v", aws.ToString(lt.LaunchTemplateName), in.Tags)
	}
	d := lt.LaunchTemplateData
	if md := d.MetadataOptions; md.HttpTokens != "required" || aws.ToInt32(md.HttpPutResponseHopLimit) != 1 || md.HttpEndpoint != "enabled" || md.HttpProtocolIpv6 != "disabled" {
		t.Errorf("metadata options %+v", md)
	}
	if len(d.BlockDeviceMappings) != 1 || aws.ToString(d.BlockDeviceMappings[0].DeviceName) != "/dev/xvda" ||
		aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || d.BlockDeviceMappings[0].Ebs.VolumeType != "gp3" || !aws.ToBool(d.BlockDeviceMappings[0].Ebs.Encrypted) {
		t.Errorf("block devices %+v", d.BlockDeviceMappings)
	}
	if aws.ToString(d.IamInstanceProfile.Name) != "workshop_node" || len(d.SecurityGroupIds) != 1 {
		t.Errorf("profile %v security groups %v", d.IamInstanceProfile, d.SecurityGroupIds)
	}
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"MIME-Version: 1.0", "Content-Type: application/node.eks.aws", "kind: NodeConfig", "name: " + cluster, "apiServerEndpoint: https://", "cidr: 10.96.0.0/24",
		"--node-labels=karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=default",
		"--register-with-taints=karpenter.sh/unregistered:NoExecute",
	} {
		if !strings.Contains(string(ud), want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}

	fleets := calls(e.srv, "CreateFleet")
	if len(fleets) != 1 {
		t.Fatalf("want one CreateFleet, got %d", len(fleets))
	}
	fin := fleets[0].Input.(*ec2.CreateFleetInput)
	if aws.ToString(fin.ClientToken) != "uid-default-abcde" || fin.Type != "instant" || fin.OnDemandOptions.AllocationStrategy != "lowest-price" ||
		len(fin.LaunchTemplateConfigs) != 1 || len(fin.LaunchTemplateConfigs[0].Overrides) != 9 {
		t.Errorf("fleet request: token %q type %s configs %+v", aws.ToString(fin.ClientToken), fin.Type, fin.LaunchTemplateConfigs)
	}

	// Launching the same NodeClaim again (a controller retry) returns the same instance and
	// reuses the launch template.
	again, err := e.p.Create(e.ctx, claim, e.class)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ProviderID != got.Status.ProviderID || len(liveInstances(e.srv)) != 1 || len(calls(e.srv, "CreateLaunchTemplate")) != 1 {
		t.Errorf("relaunch gave %s (first %s), %d instances", again.Status.ProviderID, got.Status.ProviderID, len(liveInstances(e.srv)))
	}

	// Get, List and drift.
	g, err := e.p.Get(e.ctx, got.Status.ProviderID)
	if err != nil || g.Name != claim.Name || g.Labels[corev1.LabelInstanceTypeStable] != "m5.large" {
		t.Errorf("Get: %v %+v", err, g)
	}
	list, err := e.p.List(e.ctx)
	if err != nil || len(list) != 1 || list[0].Status.ProviderID != got.Status.ProviderID {
		t.Errorf("List: %v %d", err, len(list))
	}
	// Drift is judged against the class's status, resolved as the node class controller does.
	resolved := func(nc *awsv1.EC2NodeClass) *awsv1.EC2NodeClass {
		nc = nc.DeepCopy()
		var err error
		nc.Status.AMIs, err = e.p.AMIs(e.ctx, nc)
		must(t, func() error { return err })
		nc.Status.Subnets, err = e.p.Subnets(e.ctx, nc)
		must(t, func() error { return err })
		nc.Status.SecurityGroups, err = e.p.SecurityGroups(e.ctx, nc)
		must(t, func() error { return err })
		return nc
	}
	if r, err := e.p.IsDrifted(e.ctx, got, e.class); err != nil || r != "" {
		t.Errorf("IsDrifted before the class is resolved: %q %v, want nothing judged", r, err)
	}
	class := resolved(e.class)
	if r, err := e.p.IsDrifted(e.ctx, got, class); err != nil || r != "" {
		t.Errorf("IsDrifted on an unchanged class: %q %v", r, err)
	}
	pinned := e.class.DeepCopy()
	pinned.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-x86_64-nvidia-*", Owner: "amazon"}}
	if r, err := e.p.IsDrifted(e.ctx, got, resolved(pinned)); err != nil || r != cloud.DriftAMI {
		t.Errorf("IsDrifted with another AMI: %q %v", r, err)
	}
	for want, change := range map[cloud.DriftReason]func(*awsv1.EC2NodeClass){
		cloud.DriftSubnet: func(nc *awsv1.EC2NodeClass) {
			nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-other", Zone: "us-east-1a"}}
		},
		cloud.DriftSecurityGroup: func(nc *awsv1.EC2NodeClass) {
			nc.Status.SecurityGroups = append(nc.Status.SecurityGroups, awsv1.SecurityGroup{ID: "sg-other"})
		},
	} {
		changed := class.DeepCopy()
		change(changed)
		if r, err := e.p.IsDrifted(e.ctx, got, changed); err != nil || r != want {
			t.Errorf("IsDrifted: %q %v, want %q", r, err, want)
		}
	}
}

func TestInsufficientCapacityFallsBackToNextCheapest(t *testing.T) {
	e := newEnv(t)
	e.srv.SetFaults(awssim.Faults{InsufficientCapacity: []awssim.CapacityFault{{InstanceType: "m5.large", CapacityType: "on-demand"}}})
	got, err := e.p.Create(e.ctx, workshopClaim("default-ice01"), e.class)
	if err != nil {
		t.Fatal(err)
	}
	// r5.large ($0.126/h) is the next cheapest type after m5.large ($0.096/h); m5.xlarge costs $0.192/h.
	if it := got.Labels[corev1.LabelInstanceTypeStable]; it != "r5.large" {
		t.Fatalf("launched %s, want r5.large", it)
	}
	now := time.Now()
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		if !e.unav.IsUnavailable("m5.large", z, "on-demand", now) || e.unav.IsUnavailable("m5.large", z, "on-demand", now.Add(cloudaws.UnavailableFor+time.Second)) {
			t.Errorf("m5.large on-demand in %s should be unavailable for %s", z, cloudaws.UnavailableFor)
		}
	}
	// The next launch no longer asks for m5.large.
	if _, err := e.p.Create(e.ctx, workshopClaim("default-ice02"), e.class); err != nil {
		t.Fatal(err)
	}
	fleets := calls(e.srv, "CreateFleet")
	last := fleets[len(fleets)-1].Input.(*ec2.CreateFleetInput)
	for _, o := range last.LaunchTemplateConfigs[0].Overrides {
		if o.InstanceType == "m5.large" {
			t.Errorf("second fleet still asks for m5.large: %+v", o)
		}
	}
	// The second launch reused the class's resolution (subnets, security groups, AMIs).
	if n := len(calls(e.srv, "DescribeSubnets")); n != 1 {
		t.Errorf("two launches described subnets %d times, want 1 (cached)", n)
	}
	// With every option exhausted the error says so.
	e.srv.SetFaults(awssim.Faults{InsufficientCapacity: []awssim.CapacityFault{{CapacityType: "on-demand"}}})
	_, err = e.p.Create(e.ctx, workshopClaim("default-ice03"), e.class)
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || len(ice.Offerings) == 0 {
		t.Errorf("want an InsufficientCapacityError, got %v", err)
	}
}

// Karpenter v1.6: a launch refused for lack of addresses marks the subnet full; a zone whose
// subnets are all full offers nothing to the scheduler, and later launches leave it out.
func TestZoneWithoutFreeAddressesIsAvoided(t *testing.T) {
	e := newEnv(t)
	inA := func(name string) *karpv1.NodeClaim {
		nc := workshopClaim(name)
		nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}})
		return nc
	}
	// The first launch resolves the subnets while they have room (the resolution is reused).
	if _, err := e.p.Create(e.ctx, inA("default-ip00"), e.class); err != nil {
		t.Fatal(err)
	}
	e.srv.SetSubnetFreeAddresses("us-east-1a", 0)
	_, err := e.p.Create(e.ctx, inA("default-ip01"), e.class)
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("launch into the full zone: %v, want an InsufficientCapacityError", err)
	}
	// Addresses come back, but the subnet stays full for the mark's few minutes, as in Karpenter.
	e.srv.SetSubnetFreeAddresses("us-east-1a", 100)
	its, err := e.p.InstanceTypes(e.ctx, e.class)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		for _, o := range it.Offerings {
			if (o.Zone == "us-east-1a") == o.Available && o.CapacityType != catalog.CapacityTypeReserved {
				t.Fatalf("%s %s/%s available=%v; want us-east-1a unavailable and the other zones available", it.Name, o.Zone, o.CapacityType, o.Available)
			}
		}
	}
	got, err := e.p.Create(e.ctx, workshopClaim("default-ip02"), e.class)
	if err != nil {
		t.Fatal(err)
	}
	if z := got.Labels[corev1.LabelTopologyZone]; z == "us-east-1a" {
		t.Errorf("launched in %s, whose subnets have no free address", z)
	}
	fleets := calls(e.srv, "CreateFleet")
	for _, cfg := range fleets[len(fleets)-1].Input.(*ec2.CreateFleetInput).LaunchTemplateConfigs {
		for _, o := range cfg.Overrides {
			if o.AvailabilityZone != nil && aws.ToString(o.AvailabilityZone) == "us-east-1a" {
				t.Errorf("the next fleet still asks for us-east-1a: %+v", o)
			}
		}
	}
}

func TestThrottlingConvergesWithoutDuplicates(t *testing.T) {
	e := newEnv(t)
	e.srv.SetFaults(awssim.Faults{ThrottleRate: 0.3})
	const n = 2
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	ids := make([]string, 2*n)
	// Every NodeClaim is launched twice concurrently, as a retrying controller might.
	for i := range 2 * n {
		wg.Go(func() {
			got, err := e.p.Create(e.ctx, workshopClaim(fmt.Sprintf("default-thr%02d", i%n)), e.class)
			errs[i] = err
			if err == nil {
				ids[i] = got.Status.ProviderID
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	for i := range n {
		if ids[i] != ids[i+n] {
			t.Errorf("nodeclaim %d launched twice: %s and %s", i, ids[i], ids[i+n])
		}
	}
	if ins := liveInstances(e.srv); len(ins) != n {
		t.Errorf("want %d instances, got %d", n, len(ins))
	}
	throttled := 0
	for _, c := range e.srv.Calls() {
		if c.ErrorCode != "" {
			throttled++
		}
	}
	if throttled == 0 {
		t.Errorf("no call was throttled; the test did not exercise retries")
	}
}

func TestGarbageCollectorTerminatesLeakedInstances(t *testing.T) {
	e := newEnv(t)
	kept, err := e.p.Create(e.ctx, workshopClaim("default-keep1"), e.class)
	if err != nil {
		t.Fatal(err)
	}
	leaked, err := e.p.Create(e.ctx, workshopClaim("default-leak1"), e.class)
	if err != nil {
		t.Fatal(err)
	}
	claims := []karpv1.NodeClaim{*kept}
	// Within the grace period nothing is collected: the launch may not have been recorded yet.
	if ids, err := e.p.GarbageCollect(e.ctx, claims, time.Now().Add(10*time.Second)); err != nil || len(ids) != 0 {
		t.Fatalf("early collection: %v %v", ids, err)
	}
	ids, err := e.p.GarbageCollect(e.ctx, claims, time.Now().Add(cloudaws.LeakGracePeriod+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	leakedID := leaked.Status.ProviderID[strings.LastIndex(leaked.Status.ProviderID, "/")+1:]
	if len(ids) != 1 || ids[0] != leakedID {
		t.Fatalf("collected %v, want [%s]", ids, leakedID)
	}
	for _, in := range e.srv.Instances() {
		gone := in.State == "shutting-down" || in.State == "terminated"
		if (in.ID == leakedID) != gone {
			t.Errorf("instance %s (%s) is %s", in.ID, in.Tags["karpenter.sh/nodeclaim"], in.State)
		}
	}
	// Delete terminates; afterwards Get reports not found once EC2 finished terminating.
	if err := e.p.Delete(e.ctx, kept); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := e.p.Get(e.ctx, kept.Status.ProviderID)
		if errors.Is(err, cloud.ErrNotFound) {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("instance still there after Delete: %v", err)
		case <-tick.C:
		}
	}
}

func TestLeaked(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ins := []cloudaws.Instance{
		{ID: "i-old-owned", LaunchTime: now.Add(-time.Hour)},
		{ID: "i-old-leaked", LaunchTime: now.Add(-31 * time.Second), NodeClaim: "gone-claim"},
		{ID: "i-young", LaunchTime: now.Add(-29 * time.Second)},
		{ID: "i-edge", LaunchTime: now.Add(-30 * time.Second)},
		{ID: "i-old-tagged", LaunchTime: now.Add(-time.Hour), NodeClaim: "default-unrecorded"},
		{ID: "i-old-untagged", LaunchTime: now.Add(-time.Hour)},
	}
	claims := []karpv1.NodeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "default-recorded"}, Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-old-owned"}},
		// Its launch took effect but its providerID was never recorded: the tag says whose it is.
		{ObjectMeta: metav1.ObjectMeta{Name: "default-unrecorded"}},
	}
	got := cloudaws.Leaked(ins, claims, now)
	if want := []string{"i-old-leaked", "i-old-untagged"}; !slices.Equal(got, want) {
		t.Errorf("Leaked = %v, want %v", got, want)
	}
}

func tagged(tags []ec2types.Tag, key, value string) bool {
	return slices.ContainsFunc(tags, func(t ec2types.Tag) bool { return aws.ToString(t.Key) == key && aws.ToString(t.Value) == value })
}

func TestSelectorTermsByIDAndName(t *testing.T) {
	e := newEnv(t)
	c := ec2.NewFromConfig(e.cfg)
	sn, err := c.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}}}})
	if err != nil || len(sn.Subnets) == 0 {
		t.Fatalf("no subnet in us-east-1b: %v", err)
	}
	sg, err := c.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil || len(sg.SecurityGroups) == 0 {
		t.Fatalf("no security group: %v", err)
	}
	im, err := c.DescribeImages(e.ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.36-*"}}}})
	if err != nil || len(im.Images) < 2 {
		t.Fatalf("want two AL2023 releases: %v", err)
	}
	// Pin the older release by id.
	slices.SortFunc(im.Images, func(a, b ec2types.Image) int {
		return strings.Compare(aws.ToString(a.CreationDate), aws.ToString(b.CreationDate))
	})
	old := aws.ToString(im.Images[0].ImageId)
	class := e.class.DeepCopy()
	class.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: aws.ToString(sn.Subnets[0].SubnetId)}}
	class.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: aws.ToString(sg.SecurityGroups[0].GroupName)}}
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: old}}
	class.Spec.AMIFamily = aws.String(awsv1.AMIFamilyAL2023)
	got, err := e.p.Create(e.ctx, workshopClaim("default-ids01"), class)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[corev1.LabelTopologyZone] != "us-east-1b" || got.Status.ImageID != old {
		t.Errorf("launched in %s with %s, want us-east-1b with %s", got.Labels[corev1.LabelTopologyZone], got.Status.ImageID, old)
	}
	fin := calls(e.srv, "CreateFleet")[0].Input.(*ec2.CreateFleetInput)
	if n := len(fin.LaunchTemplateConfigs[0].Overrides); n != 3 {
		t.Errorf("want 3 overrides (3 types in one subnet), got %d", n)
	}
	// A term that matches nothing is a clear error naming the field.
	class.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}}
	_, err = e.p.Create(e.ctx, workshopClaim("default-ids02"), class)
	if err == nil || !strings.Contains(err.Error(), "spec.subnetSelectorTerms match no available subnet") {
		t.Errorf("want a subnet selector error, got %v", err)
	}
}

func TestSpotWhenAllowed(t *testing.T) {
	e := newEnv(t)
	claim := workshopClaim("default-spot1")
	claim.Spec.Requirements[1].Values = []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
	got, err := e.p.Create(e.ctx, claim, e.class)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[karpv1.LabelCapacityType] != "spot" {
		t.Errorf("capacity type %q, want spot", got.Labels[karpv1.LabelCapacityType])
	}
	fin := calls(e.srv, "CreateFleet")[0].Input.(*ec2.CreateFleetInput)
	if fin.SpotOptions == nil || fin.SpotOptions.AllocationStrategy != "price-capacity-optimized" || fin.TargetCapacitySpecification.DefaultTargetCapacityType != "spot" {
		t.Errorf("fleet request %+v %+v", fin.SpotOptions, fin.TargetCapacitySpecification)
	}
	ins := liveInstances(e.srv)
	if len(ins) != 1 || ins[0].CapacityType != "spot" {
		t.Errorf("instances %+v", ins)
	}
	lt := calls(e.srv, "CreateLaunchTemplate")[0].Input.(*ec2.CreateLaunchTemplateInput)
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(lt.LaunchTemplateData.UserData))
	if !strings.Contains(string(ud), "karpenter.sh/capacity-type=spot") {
		t.Errorf("user data does not label the node spot:\n%s", ud)
	}
}
