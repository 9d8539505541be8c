package catalog

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Every node's EBS volumes are in its offerings' prices: the family's defaults when the class
// maps none, else each mapping by size, type and provisioned performance.
func TestNodeVolumesPriced(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cases := []struct {
		name  string
		spec  *awsv1.EC2NodeClassSpec
		month float64 // USD per node-month, worked out by hand from the us-east-1 list prices
	}{
		{"no class: AL2023's 20 GiB gp3", nil, 20 * 0.08},
		{"AL2 default", &awsv1.EC2NodeClassSpec{AMIFamily: ptr("AL2")}, 20 * 0.08},
		{"Bottlerocket: 4 GiB OS + 20 GiB data", &awsv1.EC2NodeClassSpec{AMIFamily: ptr("Bottlerocket")}, 24 * 0.08},
		{"Custom without mappings: the AMI's own, unknown", &awsv1.EC2NodeClassSpec{AMIFamily: ptr("Custom")}, 0},
		{"gp3 100 GiB, 6000 IOPS, 250 MiB/s; a 1.5Gi gp2 rounds up to 2 GiB", &awsv1.EC2NodeClassSpec{BlockDeviceMappings: []*awsv1.BlockDeviceMapping{
			{DeviceName: ptr("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: q("100Gi"), VolumeType: ptr("gp3"), IOPS: ptr[int64](6000), Throughput: ptr[int64](250)}},
			{DeviceName: ptr("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: q("1.5Gi")}},
		}}, 100*0.08 + 3000*0.005 + 125*0.04 + 2*0.10},
		{"io2 with IOPS; a mapping without EBS costs nothing", &awsv1.EC2NodeClassSpec{BlockDeviceMappings: []*awsv1.BlockDeviceMapping{
			{DeviceName: ptr("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: q("50Gi"), VolumeType: ptr("io2"), IOPS: ptr[int64](1000)}},
			{DeviceName: ptr("/dev/xvdc")},
		}}, 50*0.125 + 1000*0.065},
	}
	cat, err := Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Spec("m5.large")
	for _, c := range cases {
		o, err := NodeClassOptionsFor(c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := c.month / 730
		it, _ := cat.InstanceType("m5.large", o)
		for _, off := range it.Offerings {
			base := spec.OnDemandPrice
			if off.CapacityType == CapacityTypeSpot {
				base = spec.SpotPrice
			}
			if math.Abs(off.VolumesPerHour-want) > 1e-12 || math.Abs(off.PricePerHour-base-want) > 1e-12 {
				t.Errorf("%s: offering %+v, want volumes %.6f/h on top of %.4f", c.name, off, want, base)
			}
		}
	}
}
