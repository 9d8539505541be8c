package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/userdata"
)

// ValidateClass checks what karpool can tell about a class without asking AWS: its AMI family
// and kubelet settings are supported, its block devices are sized, and its spec.userData
// merges with karpool's user data for the family. Errors match awserr.ErrInvalidClass.
func (p *Provider) ValidateClass(nc *awsv1.EC2NodeClass) error {
	opts, err := p.classOptions(nc)
	if err != nil {
		return awserr.Invalidf("EC2NodeClass %s: %v", nc.Name, err)
	}
	if _, err := blockDevices(nc, opts.AMIFamily); err != nil {
		return awserr.Invalidf("%v", err)
	}
	// Placeholder cluster facts: only the class's own inputs can make rendering fail.
	b := userdata.Bootstrap{ClusterName: p.opts.ClusterName, Endpoint: "https://cluster.invalid", CIDR: "10.100.0.0/16", DNSIP: "10.100.0.10",
		MaxPods: 110, Kubelet: nc.Spec.Kubelet, Custom: aws.ToString(nc.Spec.UserData)}
	if _, err := userdata.Render(opts.AMIFamily, b); err != nil {
		return awserr.Invalidf("EC2NodeClass %s: %v", nc.Name, err)
	}
	return nil
}
