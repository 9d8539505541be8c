package aws_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	cloudaws "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/autoscaler/cloud/aws/instancetype"
	"github.com/karpool/karpool/testbed/awssim"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// discoveryCalls counts the requests that read instance types, offerings and prices.
func discoveryCalls(srv *awssim.Server) int {
	n := 0
	for _, c := range srv.Calls() {
		switch c.Action {
		case "DescribeInstanceTypes", "DescribeInstanceTypeOfferings", "DescribeSpotPriceHistory", "GetProducts":
			n++
		}
	}
	return n
}

func offering(t *testing.T, its []catalog.InstanceType, name, zone, capacityType string) catalog.Offering {
	t.Helper()
	for _, it := range its {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == capacityType {
				return o
			}
		}
	}
	t.Fatalf("no %s %s offering of %s", capacityType, zone, name)
	return catalog.Offering{}
}

func TestInstanceTypesDiscoveredFromAWS(t *testing.T) {
	srv, err := awssim.Start(awssim.Options{ClusterName: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := &clock{t: time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)}
	newProvider := func() *cloudaws.Provider {
		p, err := cloudaws.New(srv.AWSConfig(), cloudaws.Options{ClusterName: cluster, Now: now.Now})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	d := map[string]string{"karpenter.sh/discovery": cluster}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		SubnetSelectorTerms: []awsv1.SubnetSelectorTerm{{Tags: d}}, SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: d}},
		AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}, Role: nodeRole}}
	cat, err := catalog.Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Spec("m5.large")

	srv.SetSpotPrice("m5.large", "us-east-1a", 0.0123)
	p := newProvider()
	its, err := p.InstanceTypes(ctx, class)
	if err != nil {
		t.Fatal(err)
	}
	// Every offering's price carries the node's volumes: the class sets none, so the default
	// 20 GiB gp3 root volume at $0.08 per GiB-month.
	const rootVolume = 20 * 0.08 / 730
	listPrice := func(o catalog.Offering) float64 {
		if math.Abs(o.VolumesPerHour-rootVolume) > 1e-12 {
			t.Errorf("offering %+v: volumes %v per hour, want %v", o, o.VolumesPerHour, rootVolume)
		}
		return math.Round((o.PricePerHour-o.VolumesPerHour)*1e9) / 1e9
	}
	if o := offering(t, its, "m5.large", "us-east-1a", "spot"); listPrice(o) != 0.0123 || o.Estimated {
		t.Errorf("spot offering %+v, want the current 0.0123 from the spot price history", o)
	}
	if o := offering(t, its, "m5.large", "us-east-1b", "on-demand"); listPrice(o) != 0.096 || o.Estimated {
		t.Errorf("on-demand offering %+v, want 0.096 from the price list", o)
	}
	// Accelerated types have Capacity Block products too: the on-demand price is still the
	// on-demand one.
	gpus := 0
	for _, it := range its {
		spec, _ := cat.Spec(it.Name)
		for _, o := range it.Offerings {
			if spec.GPUs > 0 && o.CapacityType == "on-demand" {
				gpus++
				if got := listPrice(o); math.Abs(got-spec.OnDemandPrice) > 1e-9 || o.Estimated {
					t.Errorf("%s on-demand at %v, want the price list's on-demand %v", it.Name, got, spec.OnDemandPrice)
				}
				break
			}
		}
	}
	if gpus == 0 {
		t.Error("no accelerated type among the discovered ones: the Capacity Block case is not exercised")
	}
	for _, it := range its {
		if it.Name == "m5.large" {
			if cpu, mem, pods := it.Allocatable[catalog.CPU], it.Allocatable[catalog.Memory], it.Allocatable[catalog.Pods]; cpu != 1930 || mem != 6903*catalog.Mi || pods != 29 {
				t.Errorf("m5.large allocatable %d m / %d B / %d pods, want the catalog's 1930m / 6903Mi / 29", cpu, mem, pods)
			}
		}
	}
	read := discoveryCalls(srv)
	if read < 4 {
		t.Fatalf("%d discovery requests, want at least one per API", read)
	}

	// Within the interval nothing is read again; once it has passed, the new price shows.
	srv.SetSpotPrice("m5.large", "us-east-1a", 0.02)
	now.Add(instancetype.DiscoveryInterval - time.Minute)
	its, _ = p.InstanceTypes(ctx, class)
	if n := discoveryCalls(srv); n != read || listPrice(offering(t, its, "m5.large", "us-east-1a", "spot")) != 0.0123 {
		t.Errorf("refreshed before the interval: %d requests (had %d)", n, read)
	}
	now.Add(time.Minute)
	its, _ = p.InstanceTypes(ctx, class)
	if discoveryCalls(srv) == read || listPrice(offering(t, its, "m5.large", "us-east-1a", "spot")) != 0.02 {
		t.Errorf("not refreshed after %s", instancetype.DiscoveryInterval)
	}

	// A failing API: the catalog stands in for it, the others still count, and it is retried
	// after DiscoveryRetry.
	srv.SetFaults(awssim.Faults{Errors: []awssim.ErrorFault{{Operation: "ec2:DescribeSpotPriceHistory", Rate: 1, Code: "UnauthorizedOperation", Status: 403}}})
	p = newProvider()
	if err := p.RefreshInstanceTypes(ctx); err == nil {
		t.Error("RefreshInstanceTypes hid the failure")
	}
	its, _ = p.InstanceTypes(ctx, class)
	if o := offering(t, its, "m5.large", "us-east-1a", "spot"); listPrice(o) != spec.SpotPrice || !o.Estimated {
		t.Errorf("spot offering %+v, want the catalog's estimate %v", o, spec.SpotPrice)
	}
	if o := offering(t, its, "m5.large", "us-east-1a", "on-demand"); o.Estimated {
		t.Errorf("on-demand offering %+v should still come from the price list", o)
	}
	srv.SetFaults(awssim.Faults{})
	now.Add(instancetype.DiscoveryRetry)
	its, _ = p.InstanceTypes(ctx, class)
	if o := offering(t, its, "m5.large", "us-east-1a", "spot"); listPrice(o) != 0.02 {
		t.Errorf("after the retry: %+v", o)
	}

	// Launches order their options by the discovered prices: the cheapest spot pool now is
	// m5.large in us-east-1c, so the fleet request lists it first.
	srv.SetSpotPrice("m5.large", "us-east-1c", 0.001)
	now.Add(instancetype.DiscoveryInterval)
	if _, err := p.InstanceTypes(ctx, class); err != nil {
		t.Fatal(err)
	}
	must(t, func() error {
		_, err := iam.NewFromConfig(srv.AWSConfig()).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(nodeRole),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
		return err
	})
	// A launch never writes IAM: before the class controller recorded the profile, it fails.
	if _, err := p.Create(ctx, workshopClaim("default-noprofile"), class); err == nil || !strings.Contains(err.Error(), "not recorded yet") ||
		len(calls(srv, "CreateInstanceProfile")) != 0 {
		t.Fatalf("a launch before the profile was recorded: %v, %d CreateInstanceProfile calls", err, len(calls(srv, "CreateInstanceProfile")))
	}
	profile, err := p.EnsureInstanceProfile(ctx, class) // what the class controller records
	if err != nil {
		t.Fatal(err)
	}
	class.Status.InstanceProfile = profile
	claim := workshopClaim("default-spotdisc")
	claim.Spec.Requirements[1].Values = []string{"spot"}
	if _, err := p.Create(ctx, claim, class); err != nil {
		t.Fatal(err)
	}
	subnets, err := p.Subnets(ctx, class)
	if err != nil {
		t.Fatal(err)
	}
	fleets := calls(srv, "CreateFleet")
	first := fleets[len(fleets)-1].Input.(*ec2.CreateFleetInput).LaunchTemplateConfigs[0].Overrides[0]
	if first.InstanceType != "m5.large" || aws.ToString(first.SubnetId) != subnets[2].ID || subnets[2].Zone != "us-east-1c" {
		t.Errorf("first fleet override %s in %s, want m5.large in the us-east-1c subnet %s", first.InstanceType, aws.ToString(first.SubnetId), subnets[2].ID)
	}
}
