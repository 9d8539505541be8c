package catalog

import (
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Volume is one EBS volume every node of an EC2NodeClass gets.
type Volume struct {
	Device string
	// SizeGiB is the provisioned size; 0 when the mapping leaves it to the snapshot (unknown
	// here, and not priced).
	SizeGiB int64
	// Type is the EBS volume type (gp3, gp2, io1, io2, st1, sc1, standard).
	Type string
	// IOPS and Throughput (MiB/s) as provisioned; 0 = the type's baseline.
	IOPS, Throughput int64
}

// ebsPrice is a volume type's list price in us-east-1 (USD per month, of 730 hours): storage per
// GiB, provisioned IOPS above the free baseline, provisioned throughput (MiB/s) above the free
// baseline. The embedded data has no EBS prices for other regions; these stand in for them.
type ebsPrice struct {
	perGiB, perIOPS, perMiBps float64
	freeIOPS, freeMiBps       int64
}

var ebsPrices = map[string]ebsPrice{
	"gp3":      {perGiB: 0.08, perIOPS: 0.005, perMiBps: 0.04, freeIOPS: 3000, freeMiBps: 125},
	"gp2":      {perGiB: 0.10},
	"io1":      {perGiB: 0.125, perIOPS: 0.065},
	"io2":      {perGiB: 0.125, perIOPS: 0.065},
	"st1":      {perGiB: 0.045},
	"sc1":      {perGiB: 0.015},
	"standard": {perGiB: 0.05},
}

// HoursPerMonth is AWS's billing month, the one monthly figures use everywhere in karpool.
const HoursPerMonth = 730

// PricePerHour is what the volume costs per hour while its node runs. An unknown type costs
// what gp2 costs (EC2's default type when a mapping names none).
func (v Volume) PricePerHour() float64 {
	p, ok := ebsPrices[v.Type]
	if !ok {
		p = ebsPrices["gp2"]
	}
	month := float64(v.SizeGiB)*p.perGiB +
		float64(max(v.IOPS-p.freeIOPS, 0))*p.perIOPS +
		float64(max(v.Throughput-p.freeMiBps, 0))*p.perMiBps
	return month / HoursPerMonth
}

// VolumesPerHour sums the volumes' hourly prices.
func VolumesPerHour(vs []Volume) float64 {
	total := 0.0
	for _, v := range vs {
		total += v.PricePerHour()
	}
	return total
}

// DefaultVolumes are the volumes Karpenter gives a node when the EC2NodeClass has no
// blockDeviceMappings: a 20 GiB encrypted gp3 root volume on /dev/xvda (AL2023, AL2); for
// Bottlerocket a 4 GiB OS volume on /dev/xvda and a 20 GiB data volume on /dev/xvdb; none for
// Custom (the AMI's own mappings apply, unknown here).
func DefaultVolumes(family string) []Volume {
	gp3 := func(dev string, gib int64) Volume { return Volume{Device: dev, SizeGiB: gib, Type: "gp3"} }
	switch family {
	case AMIFamilyBottlerocket:
		return []Volume{gp3("/dev/xvda", 4), gp3(ephemeralDevice(family), DefaultRootVolumeSize/Gi)}
	case AMIFamilyCustom:
		return nil
	}
	if _, windows := WindowsBuild(family); windows {
		return []Volume{gp3(ephemeralDevice(family), windowsRootVolumeSize/Gi)}
	}
	return []Volume{gp3(ephemeralDevice(family), DefaultRootVolumeSize/Gi)}
}

// volumesOf is what a node of the class gets: its mappings, or the family's defaults.
func volumesOf(family string, bdms []*awsv1.BlockDeviceMapping) []Volume {
	if len(bdms) == 0 {
		return DefaultVolumes(family)
	}
	var out []Volume
	for _, b := range bdms {
		if b == nil || b.EBS == nil {
			continue
		}
		v := Volume{Type: "gp2"}
		if b.DeviceName != nil {
			v.Device = *b.DeviceName
		}
		if e := b.EBS; e.VolumeType != nil {
			v.Type = *e.VolumeType
		}
		if s := b.EBS.VolumeSize; s != nil {
			v.SizeGiB = (s.Value() + Gi - 1) / Gi // EBS sizes are whole GiB, rounded up
		}
		if b.EBS.IOPS != nil {
			v.IOPS = *b.EBS.IOPS
		}
		if b.EBS.Throughput != nil {
			v.Throughput = *b.EBS.Throughput
		}
		out = append(out, v)
	}
	return out
}
