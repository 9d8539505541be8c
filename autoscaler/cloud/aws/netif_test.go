package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// The launch template's interfaces, as Karpenter's launch template provider writes them.
func TestNetworkInterfaces(t *testing.T) {
	sgs := []string{"sg-1"}
	plain := &awsv1.EC2NodeClass{}
	if got := networkInterfaces(plain, sgs, 0); got != nil {
		t.Fatalf("a plain class: %+v, want none (security groups on the template)", got)
	}
	// An EFA NodeClaim: one EFA interface per card, the first primary.
	got := networkInterfaces(plain, sgs, 3)
	if len(got) != 3 || aws.ToString(got[0].InterfaceType) != "efa" || aws.ToInt32(got[0].DeviceIndex) != 0 ||
		aws.ToInt32(got[2].NetworkCardIndex) != 2 || aws.ToInt32(got[2].DeviceIndex) != 1 || got[1].Groups[0] != "sg-1" {
		t.Fatalf("EFA interfaces: %+v", got)
	}
	// Prefixes and connection tracking ride on a primary interface.
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{IPPrefixCount: aws.Int32(2),
		ConnectionTracking: &awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(3600)}}}
	got = networkInterfaces(nc, sgs, 0)
	if len(got) != 1 || aws.ToInt32(got[0].Ipv4PrefixCount) != 2 || aws.ToInt32(got[0].ConnectionTrackingSpecification.TcpEstablishedTimeout) != 3600 ||
		aws.ToInt32(got[0].DeviceIndex) != 0 {
		t.Fatalf("prefixes and tracking: %+v", got)
	}
	// The class's own interfaces win over the EFA count; EFA-only ones carry no IP settings.
	nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"}}
	got = networkInterfaces(nc, sgs, 4)
	if len(got) != 2 || aws.ToInt32(got[0].Ipv4PrefixCount) != 2 || aws.ToString(got[1].InterfaceType) != "efa-only" ||
		got[1].Ipv4PrefixCount != nil || got[1].ConnectionTrackingSpecification != nil || aws.ToInt32(got[1].NetworkCardIndex) != 1 {
		t.Fatalf("the class's interfaces: %+v", got)
	}
}

func TestEFAInterfacesOnlyWhenAskedFor(t *testing.T) {
	it := &catalog.InstanceType{}
	it.Capacity[catalog.EFA] = 4
	claim := &karpv1.NodeClaim{}
	nc := &awsv1.EC2NodeClass{}
	if n := efaInterfaces(claim, nc, it); n != 0 {
		t.Fatalf("no EFA request: %d interfaces", n)
	}
	claim.Spec.Resources.Requests = corev1.ResourceList{"vpc.amazonaws.com/efa": resource.MustParse("1")}
	if n := efaInterfaces(claim, nc, it); n != 4 {
		t.Fatalf("an EFA request: %d interfaces, want the type's 4", n)
	}
	nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{InterfaceType: "efa-only"}}
	if n := efaInterfaces(claim, nc, it); n != 0 {
		t.Fatalf("the class lists its interfaces: %d EFA interfaces added", n)
	}
}

func TestCPUOptions(t *testing.T) {
	if cpuOptions(nil) != nil || cpuOptions(&awsv1.CPUOptions{}) != nil {
		t.Fatal("no CPU options set, yet the template gets some")
	}
	if got := cpuOptions(&awsv1.CPUOptions{NestedVirtualization: aws.String("disabled")}); got == nil || got.NestedVirtualization != "disabled" {
		t.Fatalf("nested virtualization disabled: %+v", got)
	}
	// Accepted as not implemented (the opt-out annotation): left out, as documented.
	if got := cpuOptions(&awsv1.CPUOptions{NestedVirtualization: aws.String("enabled")}); got != nil {
		t.Fatalf("nested virtualization enabled reached the template: %+v", got)
	}
}
