package catalog

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// NodeClassOptionsFor derives the options of an EC2NodeClass: AMI family (spec.amiFamily, or the
// family of an alias term), kubelet settings, the size of the volume holding the kubelet root
// directory, the EBS volumes of a node, and the instance-store policy. Zones are left empty
// (all of the region's zones): set them from the NodeClass's resolved subnets when known. A nil
// spec gives the defaults of a class that sets nothing (AL2023).
func NodeClassOptionsFor(spec *awsv1.EC2NodeClassSpec) (NodeClassOptions, error) {
	if spec == nil {
		spec = &awsv1.EC2NodeClassSpec{}
	}
	var o NodeClassOptions
	family, err := amiFamilyOf(spec)
	if err != nil {
		return o, err
	}
	o.AMIFamily = family
	if spec.Kubelet != nil {
		k, err := KubeletFromAPI(spec.Kubelet)
		if err != nil {
			return o, err
		}
		o.Kubelet = k
	}
	size, err := rootVolumeSize(family, spec.BlockDeviceMappings)
	if err != nil {
		return o, err
	}
	o.RootVolumeSize = size
	o.Volumes = volumesOf(family, spec.BlockDeviceMappings)
	o.InstanceStoreRAID0 = spec.InstanceStorePolicy != nil && *spec.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0
	o.ConnectionTracking = spec.ConnectionTracking != nil
	if spec.NetworkInterfaces != nil {
		o.Interfaces = &Interfaces{}
		for _, ni := range spec.NetworkInterfaces {
			if ni != nil && ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
				o.Interfaces.EFAOnly++
				if ni.NetworkCardIndex == 0 {
					o.Interfaces.EFAOnlyOnCard0++
				}
			}
		}
	}
	return o, nil
}

// aliasFamilies maps the alias families to the AMI families they imply.
var aliasFamilies = map[string]string{
	awsv1.AliasFamilyAL2023: AMIFamilyAL2023, awsv1.AliasFamilyAL2: AMIFamilyAL2, awsv1.AliasFamilyBottlerocket: AMIFamilyBottlerocket,
	awsv1.AliasFamilyWindows2019: AMIFamilyWindows2019, awsv1.AliasFamilyWindows2022: AMIFamilyWindows2022, awsv1.AliasFamilyWindows2025: AMIFamilyWindows2025,
}

func amiFamilyOf(spec *awsv1.EC2NodeClassSpec) (string, error) {
	family := ""
	if spec.AMIFamily != nil {
		family = *spec.AMIFamily
	}
	if family == "" {
		for _, t := range spec.AMISelectorTerms {
			if t.Alias == "" {
				continue
			}
			name, _, _ := strings.Cut(t.Alias, "@")
			family = name
			if f, ok := aliasFamilies[strings.ToLower(name)]; ok {
				family = f
			}
			break
		}
	}
	switch family {
	case "", AMIFamilyAL2023, AMIFamilyAL2, AMIFamilyBottlerocket, AMIFamilyCustom,
		AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025:
		if family == "" {
			family = AMIFamilyAL2023
		}
		return family, nil
	}
	return "", fmt.Errorf("spec.amiFamily: %q is not an AMI family (AL2023, AL2, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025)", family)
}

// ephemeralDevice is the device holding the kubelet root directory, per AMI family.
func ephemeralDevice(family string) string {
	if family == AMIFamilyBottlerocket {
		return "/dev/xvdb"
	}
	if _, windows := WindowsBuild(family); windows {
		return "/dev/sda1"
	}
	return "/dev/xvda"
}

// rootVolumeSize follows Karpenter: the mapping marked rootVolume; for Custom the last mapping;
// otherwise the mapping of the family's ephemeral device; else the default 20Gi (0 here).
func rootVolumeSize(family string, bdms []*awsv1.BlockDeviceMapping) (int64, error) {
	size := func(i int) (int64, bool) {
		b := bdms[i]
		if b == nil || b.EBS == nil || b.EBS.VolumeSize == nil {
			return 0, false
		}
		return b.EBS.VolumeSize.Value(), true
	}
	for i, b := range bdms {
		if b != nil && b.RootVolume {
			if v, ok := size(i); ok {
				return v, nil
			}
			break
		}
	}
	if len(bdms) == 0 {
		return 0, nil
	}
	if family == AMIFamilyCustom {
		v, _ := size(len(bdms) - 1)
		return v, nil
	}
	for i, b := range bdms {
		if b != nil && b.DeviceName != nil && *b.DeviceName == ephemeralDevice(family) {
			v, _ := size(i)
			return v, nil
		}
	}
	return 0, nil
}

// KubeletFromAPI converts the EC2NodeClass kubelet settings that affect allocatable. Errors name
// the field and the bad value.
func KubeletFromAPI(k *awsv1.KubeletConfiguration) (Kubelet, error) {
	var out Kubelet
	if k == nil {
		return out, nil
	}
	out.MaxPods = k.MaxPods
	out.PodsPerCore = k.PodsPerCore
	var err error
	if out.KubeReserved, err = reservedFromAPI("spec.kubelet.kubeReserved", k.KubeReserved); err != nil {
		return out, err
	}
	if out.SystemReserved, err = reservedFromAPI("spec.kubelet.systemReserved", k.SystemReserved); err != nil {
		return out, err
	}
	if out.EvictionHard, err = evictionFromAPI("spec.kubelet.evictionHard", k.EvictionHard); err != nil {
		return out, err
	}
	return out, nil
}

func reservedFromAPI(field string, m map[string]awsv1.ReservedQuantity) (Reserved, error) {
	var r Reserved
	for _, key := range sortedKeys(m) {
		q, err := resource.ParseQuantity(string(m[key]))
		if err != nil {
			return r, fmt.Errorf("%s.%s: %q is not a resource quantity (e.g. 100m, 1Gi)", field, key, m[key])
		}
		if q.Sign() < 0 {
			return r, fmt.Errorf("%s.%s: %q is negative", field, key, m[key])
		}
		switch key {
		case "cpu":
			v := q.MilliValue()
			r.CPU = &v
		case "memory":
			v := q.Value()
			r.Memory = &v
		case "ephemeral-storage":
			v := q.Value()
			r.EphemeralStorage = &v
		case "pid":
			// pids are not a scheduled resource
		default:
			return r, fmt.Errorf("%s: unknown key %q (valid: cpu, memory, ephemeral-storage, pid)", field, key)
		}
	}
	return r, nil
}

func evictionFromAPI(field string, m map[string]awsv1.EvictionThreshold) (Eviction, error) {
	var e Eviction
	for _, key := range sortedKeys(m) {
		if key != "memory.available" && key != "nodefs.available" {
			continue // inode, imagefs and pid signals do not change allocatable
		}
		t, err := parseThreshold(string(m[key]))
		if err != nil {
			return e, fmt.Errorf("%s[%s]: %w", field, key, err)
		}
		if key == "memory.available" {
			e.MemoryAvailable = &t
		} else {
			e.NodeFSAvailable = &t
		}
	}
	return e, nil
}

func parseThreshold(v string) (Threshold, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return Threshold{}, fmt.Errorf("%q is not a percentage between 0%% and 100%%", v)
		}
		return Threshold{Percent: f, IsPercent: true}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return Threshold{}, fmt.Errorf("%q is neither a quantity (e.g. 500Mi) nor a percentage (e.g. 10%%)", v)
	}
	return Threshold{Bytes: q.Value()}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
