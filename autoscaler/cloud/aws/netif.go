package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// interfaceSpec is a launch template's network interface.
type interfaceSpec = ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest

// networkInterfaces are the launch template's network interfaces, as Karpenter writes them:
// the class's spec.networkInterfaces when it lists them; else, for a NodeClaim that asks for
// vpc.amazonaws.com/efa, efaCount EFA interfaces, one per network card; else one primary
// interface when the class sets something only an interface can carry (a public address, IPv4
// prefixes, connection tracking). nil leaves the security groups to the template itself.
// EFA-only interfaces carry no IP traffic, so they get no prefixes, public address or
// connection tracking.
func networkInterfaces(nc *awsv1.EC2NodeClass, sgs []string, efaCount int) []interfaceSpec {
	spec := &nc.Spec
	ip := func(ni interfaceSpec) interfaceSpec {
		ni.Groups = sgs
		ni.Ipv4PrefixCount = spec.IPPrefixCount
		ni.AssociatePublicIpAddress = spec.AssociatePublicIPAddress
		ni.ConnectionTrackingSpecification = connectionTracking(spec.ConnectionTracking)
		return ni
	}
	var out []interfaceSpec
	switch {
	case len(spec.NetworkInterfaces) > 0:
		for _, ni := range spec.NetworkInterfaces {
			if ni == nil {
				continue
			}
			one := interfaceSpec{NetworkCardIndex: aws.Int32(ni.NetworkCardIndex), DeviceIndex: aws.Int32(ni.DeviceIndex),
				InterfaceType: aws.String(ni.InterfaceType)}
			if ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
				one.Groups = sgs
			} else {
				one = ip(one)
			}
			out = append(out, one)
		}
	case efaCount > 0:
		for i := range efaCount {
			// The first card's interface is the primary one (device 0); the others attach
			// behind it, so only it is reachable without an address on every card.
			device := int32(1)
			if i == 0 {
				device = 0
			}
			out = append(out, ip(interfaceSpec{NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(device), InterfaceType: aws.String("efa")}))
		}
	case spec.AssociatePublicIPAddress != nil || spec.IPPrefixCount != nil || spec.ConnectionTracking != nil:
		out = []interfaceSpec{ip(interfaceSpec{DeviceIndex: aws.Int32(0)})}
	}
	return out
}

// connectionTracking is the class's spec.connectionTracking as EC2 takes it.
func connectionTracking(ct *awsv1.ConnectionTracking) *ec2types.ConnectionTrackingSpecificationRequest {
	if ct == nil {
		return nil
	}
	return &ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: ct.TCPEstablishedTimeout,
		UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout}
}

// efaInterfaces is how many EFA interfaces a launch as this type needs: all the type has when
// the NodeClaim asks for vpc.amazonaws.com/efa and the class does not list its own interfaces.
func efaInterfaces(claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, it *catalog.InstanceType) int {
	if _, ok := claim.Spec.Resources.Requests[corev1.ResourceName(catalog.ResourceNames[catalog.EFA])]; !ok || len(nc.Spec.NetworkInterfaces) > 0 {
		return 0
	}
	return int(it.Capacity[catalog.EFA])
}

// cpuOptions is the class's spec.cpuOptions as the launch template takes it (nil: EC2's
// defaults). nestedVirtualization: enabled is not implemented (karpool cannot tell which types
// support it): it is refused before a launch, and ignored here for a class that accepted that
// (internal/unimplemented's opt-out).
func cpuOptions(o *awsv1.CPUOptions) *ec2types.LaunchTemplateCpuOptionsRequest {
	if o == nil || o.NestedVirtualization == nil || *o.NestedVirtualization != string(ec2types.NestedVirtualizationSpecificationDisabled) {
		return nil
	}
	return &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecificationDisabled}
}
