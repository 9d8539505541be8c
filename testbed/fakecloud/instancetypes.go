package fakecloud

import (
	"github.com/karpool/karpool/autoscaler/catalog"
)

// InstanceType builds an amd64 Linux instance type with cpu vCPUs, memGiB GiB of memory and
// 110 pods, all of it allocatable, sold as the offerings.
func InstanceType(name string, cpu, memGiB int64, offerings ...catalog.Offering) catalog.InstanceType {
	var r catalog.Resources
	r[catalog.CPU] = cpu * 1000
	r[catalog.Memory] = memGiB << 30
	r[catalog.Pods] = 110
	return catalog.InstanceType{
		Name:        name,
		Labels:      map[string]string{catalog.LabelInstanceType: name, catalog.LabelArch: "amd64", catalog.LabelOS: "linux"},
		Capacity:    r,
		Allocatable: r,
		Offerings:   offerings,
	}
}

// Offering is an available offering of an instance type.
func Offering(zone, capacityType string, pricePerHour float64) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: capacityType, PricePerHour: pricePerHour, Available: true}
}
