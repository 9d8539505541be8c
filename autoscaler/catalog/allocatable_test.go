package catalog

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

func ptr[T any](v T) *T { return &v }

// m5.large: 2 vCPU, 8192 MiB, 3 ENIs × 10 IPv4. Memory capacity 8192 − ceil(614.4) = 7577Mi;
// kube-reserved memory 11 × 29 + 255 = 574Mi; eviction 100Mi.
const m5Capacity = 7577 * Mi

func TestKubeletOverrides(t *testing.T) {
	c := mustLoad(t, "us-east-1", LoadOptions{})
	for _, tc := range []struct {
		name     string
		typ      string
		opts     NodeClassOptions
		cpu      int64
		memory   int64
		pods     int64
		eph      int64
		capPods  int64
		capEph   int64
		capacity bool // also check capacity pods/eph
	}{
		{name: "defaults", typ: "m5.large", cpu: 1930, memory: 6903 * Mi, pods: 29, eph: 17 * Gi},
		{name: "maxPods on AL2023 keeps the ENI-sized memory reservation", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{MaxPods: ptr[int32](110)}}, cpu: 1930, memory: 6903 * Mi, pods: 110, eph: 17 * Gi},
		{name: "maxPods on Bottlerocket sizes the memory reservation", typ: "m5.large",
			opts: NodeClassOptions{AMIFamily: AMIFamilyBottlerocket, Kubelet: Kubelet{MaxPods: ptr[int32](110)}},
			cpu:  1930, memory: m5Capacity - (11*110+255)*Mi - 100*Mi, pods: 110, eph: 17 * Gi},
		{name: "podsPerCore", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{PodsPerCore: ptr[int32](4)}}, cpu: 1930, memory: 6903 * Mi, pods: 8, eph: 17 * Gi},
		{name: "podsPerCore larger than ENI limit", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{PodsPerCore: ptr[int32](100)}}, cpu: 1930, memory: 6903 * Mi, pods: 29, eph: 17 * Gi},
		{name: "podsPerCore ignored on Bottlerocket", typ: "m5.large",
			opts: NodeClassOptions{AMIFamily: AMIFamilyBottlerocket, Kubelet: Kubelet{PodsPerCore: ptr[int32](4)}}, cpu: 1930, memory: 6903 * Mi, pods: 29, eph: 17 * Gi},
		{name: "kubeReserved replaces defaults", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{KubeReserved: Reserved{CPU: ptr[int64](200), Memory: ptr(1 * Gi), EphemeralStorage: ptr(2 * Gi)}}},
			cpu:  1800, memory: m5Capacity - 1*Gi - 100*Mi, pods: 29, eph: 16 * Gi},
		{name: "systemReserved adds", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{SystemReserved: Reserved{CPU: ptr[int64](100), Memory: ptr(512 * Mi), EphemeralStorage: ptr(1 * Gi)}}},
			cpu:  1830, memory: 6391 * Mi, pods: 29, eph: 16 * Gi},
		{name: "evictionHard percentages", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{EvictionHard: Eviction{
				MemoryAvailable: &Threshold{Percent: 5, IsPercent: true}, NodeFSAvailable: &Threshold{Percent: 15, IsPercent: true}}}},
			cpu: 1930, memory: m5Capacity - 574*Mi - 397253018 /* ceil(7577Mi × 5 %) = ceil(397253017.6) */, pods: 29, eph: 20*Gi - 1*Gi - 3*Gi},
		{name: "evictionHard quantity", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{EvictionHard: Eviction{MemoryAvailable: &Threshold{Bytes: 500 * Mi}}}},
			cpu:  1930, memory: 6503 * Mi, pods: 29, eph: 17 * Gi},
		{name: "evictionHard 100% disables the threshold", typ: "m5.large",
			opts: NodeClassOptions{Kubelet: Kubelet{EvictionHard: Eviction{MemoryAvailable: &Threshold{Percent: 100, IsPercent: true}}}},
			cpu:  1930, memory: 7003 * Mi, pods: 29, eph: 17 * Gi},
		{name: "root volume 100Gi", typ: "m5.large", opts: NodeClassOptions{RootVolumeSize: 100 * Gi},
			cpu: 1930, memory: 6903 * Mi, pods: 29, eph: 89 * Gi, capacity: true, capPods: 29, capEph: 100 * Gi},
		{name: "RAID0 instance store", typ: "m5d.large", opts: NodeClassOptions{InstanceStoreRAID0: true},
			cpu: 1930, memory: 6903 * Mi, pods: 29, eph: 75_000_000_000 - 1*Gi - 7_500_000_000, capacity: true, capPods: 29, capEph: 75_000_000_000},
		{name: "RAID0 without local disks keeps the root volume", typ: "m5.large", opts: NodeClassOptions{InstanceStoreRAID0: true},
			cpu: 1930, memory: 6903 * Mi, pods: 29, eph: 17 * Gi},
		{name: "reserved ENIs", typ: "m5.large", opts: NodeClassOptions{ReservedENIs: 1},
			cpu: 1930, memory: 6903 * Mi, pods: 2*9 + 2, eph: 17 * Gi},
		{name: "no VM memory overhead", typ: "m5.large", opts: NodeClassOptions{VMMemoryOverheadPercent: ptr(0.0)},
			cpu: 1930, memory: (8192 - 574 - 100) * Mi, pods: 29, eph: 17 * Gi},
		{name: "arm64 CMA reservation", typ: "m6g.large", // 8192 − 64 = 8128; − ceil(609.6) = 7518; − 574 − 100
			cpu: 1930, memory: 6844 * Mi, pods: 29, eph: 17 * Gi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := c.InstanceType(tc.typ, tc.opts)
			if !ok {
				t.Fatalf("%s not offered", tc.typ)
			}
			a := it.Allocatable
			if a[CPU] != tc.cpu || a[Memory] != tc.memory || a[Pods] != tc.pods || a[EphemeralStorage] != tc.eph {
				t.Errorf("allocatable cpu %d memory %d pods %d eph %d; want cpu %d memory %d pods %d eph %d",
					a[CPU], a[Memory], a[Pods], a[EphemeralStorage], tc.cpu, tc.memory, tc.pods, tc.eph)
			}
			if tc.capacity && (it.Capacity[Pods] != tc.capPods || it.Capacity[EphemeralStorage] != tc.capEph) {
				t.Errorf("capacity pods %d eph %d; want %d %d", it.Capacity[Pods], it.Capacity[EphemeralStorage], tc.capPods, tc.capEph)
			}
		})
	}
}

func TestAllocatableNeverNegative(t *testing.T) {
	c := mustLoad(t, "us-east-1", LoadOptions{})
	it, _ := c.InstanceType("t3.nano", NodeClassOptions{Kubelet: Kubelet{SystemReserved: Reserved{Memory: ptr(10 * Gi), CPU: ptr[int64](5000)}}})
	if it.Allocatable[Memory] != 0 || it.Allocatable[CPU] != 0 {
		t.Errorf("allocatable = %v", it.Allocatable)
	}
}

func TestNodeClassOptionsFor(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	raid := awsv1.InstanceStorePolicyRAID0
	spec := &awsv1.EC2NodeClassSpec{
		AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Kubelet: &awsv1.KubeletConfiguration{
			MaxPods:        ptr[int32](50),
			PodsPerCore:    ptr[int32](10),
			KubeReserved:   map[string]awsv1.ReservedQuantity{"cpu": "250m", "memory": "1Gi", "pid": "100"},
			SystemReserved: map[string]awsv1.ReservedQuantity{"ephemeral-storage": "2Gi"},
			EvictionHard:   map[string]awsv1.EvictionThreshold{"memory.available": "10%", "nodefs.available": "5Gi", "imagefs.available": "10%"},
			EvictionSoft:   map[string]awsv1.EvictionThreshold{"memory.available": "20%"},
		},
		BlockDeviceMappings: []*awsv1.BlockDeviceMapping{
			{DeviceName: ptr("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: q("500Gi")}},
			{DeviceName: ptr("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: q("100Gi")}},
		},
		InstanceStorePolicy: &raid,
	}
	o, err := NodeClassOptionsFor(spec)
	if err != nil {
		t.Fatal(err)
	}
	k := o.Kubelet
	if o.AMIFamily != AMIFamilyAL2023 || *k.MaxPods != 50 || *k.PodsPerCore != 10 ||
		*k.KubeReserved.CPU != 250 || *k.KubeReserved.Memory != Gi || k.KubeReserved.EphemeralStorage != nil ||
		*k.SystemReserved.EphemeralStorage != 2*Gi ||
		!k.EvictionHard.MemoryAvailable.IsPercent || k.EvictionHard.MemoryAvailable.Percent != 10 ||
		k.EvictionHard.NodeFSAvailable.Bytes != 5*Gi ||
		o.RootVolumeSize != 100*Gi || !o.InstanceStoreRAID0 {
		t.Errorf("options = %+v", o)
	}

	// Bottlerocket keeps kubelet data on /dev/xvdb; a rootVolume mapping wins over device names.
	spec = &awsv1.EC2NodeClassSpec{AMIFamily: ptr("Bottlerocket"), BlockDeviceMappings: spec.BlockDeviceMappings}
	if o, err := NodeClassOptionsFor(spec); err != nil || o.RootVolumeSize != 500*Gi || o.AMIFamily != AMIFamilyBottlerocket {
		t.Errorf("bottlerocket: %+v %v", o, err)
	}
	spec.BlockDeviceMappings = append(spec.BlockDeviceMappings, &awsv1.BlockDeviceMapping{RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: q("64Gi")}})
	if o, _ := NodeClassOptionsFor(spec); o.RootVolumeSize != 64*Gi {
		t.Errorf("rootVolume mapping: %d", o.RootVolumeSize)
	}
	// No mapping for the ephemeral device: default.
	spec = &awsv1.EC2NodeClassSpec{AMIFamily: ptr("AL2023"), BlockDeviceMappings: []*awsv1.BlockDeviceMapping{{DeviceName: ptr("/dev/xvdc"), EBS: &awsv1.BlockDevice{VolumeSize: q("1Ti")}}}}
	if o, _ := NodeClassOptionsFor(spec); o.RootVolumeSize != 0 {
		t.Errorf("unrelated mapping: %d", o.RootVolumeSize)
	}
	// Custom: the last mapping.
	spec.AMIFamily = ptr("Custom")
	if o, _ := NodeClassOptionsFor(spec); o.RootVolumeSize != 1<<40 {
		t.Errorf("custom: %d", o.RootVolumeSize)
	}

	for _, bad := range []struct {
		spec *awsv1.EC2NodeClassSpec
		want string
	}{
		{&awsv1.EC2NodeClassSpec{AMIFamily: ptr("Windows2012")}, `"Windows2012" is not an AMI family`},
		{&awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]awsv1.ReservedQuantity{"memory": "lots"}}}, "spec.kubelet.kubeReserved.memory"},
		{&awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]awsv1.EvictionThreshold{"memory.available": "150%"}}}, "spec.kubelet.evictionHard[memory.available]"},
	} {
		if _, err := NodeClassOptionsFor(bad.spec); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error = %v, want it to mention %s", err, bad.want)
		}
	}
}

// spec.networkInterfaces, as Karpenter counts them: the node offers one EFA per EFA-only
// interface, and an EFA-only interface on card 0 takes an ENI from the pod count.
func TestNetworkInterfacesShapeTheNode(t *testing.T) {
	cat, err := Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NodeClassOptionsFor(&awsv1.EC2NodeClassSpec{})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := NodeClassOptionsFor(&awsv1.EC2NodeClassSpec{NetworkInterfaces: []*awsv1.NetworkInterface{
		{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
		{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	before, ok1 := cat.InstanceType("c5n.18xlarge", plain)
	after, ok2 := cat.InstanceType("c5n.18xlarge", listed)
	spec, _ := cat.Spec("c5n.18xlarge")
	if !ok1 || !ok2 || spec.EFA == 0 {
		t.Fatalf("c5n.18xlarge: %v %v, EFA %d", ok1, ok2, spec.EFA)
	}
	if before.Capacity[EFA] != spec.EFA || after.Capacity[EFA] != 2 {
		t.Errorf("EFA capacity %d plain, %d listed; want the type's %d and the 2 EFA-only interfaces", before.Capacity[EFA], after.Capacity[EFA], spec.EFA)
	}
	if want := before.Capacity[Pods] - (spec.IPv4PerENI - 1); after.Capacity[Pods] != want {
		t.Errorf("pods %d with an EFA-only interface on card 0, want %d (one ENI fewer than %d)", after.Capacity[Pods], want, before.Capacity[Pods])
	}
	// Types without that many EFA interfaces are not offered to the class.
	for _, it := range cat.InstanceTypes(listed) {
		if s, _ := cat.Spec(it.Name); s.EFA < 2 {
			t.Fatalf("%s (%d EFA) offered to a class with 2 EFA-only interfaces", it.Name, s.EFA)
		}
	}
	if n := len(cat.InstanceTypes(listed)); n == 0 || n >= len(cat.InstanceTypes(plain)) {
		t.Errorf("%d types offered with EFA-only interfaces, %d without", n, len(cat.InstanceTypes(plain)))
	}
}

// Connection tracking needs a Nitro type (Karpenter's check).
func TestConnectionTrackingNeedsNitro(t *testing.T) {
	cat, err := Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	o, err := NodeClassOptionsFor(&awsv1.EC2NodeClassSpec{ConnectionTracking: &awsv1.ConnectionTracking{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range cat.InstanceTypes(o) {
		if s, _ := cat.Spec(it.Name); s.Hypervisor != "nitro" {
			t.Fatalf("%s (hypervisor %q) offered with connection tracking", it.Name, s.Hypervisor)
		}
	}
	plain, _ := NodeClassOptionsFor(nil)
	if len(cat.InstanceTypes(o)) >= len(cat.InstanceTypes(plain)) {
		t.Errorf("connection tracking removed no type")
	}
}

// TestWindowsNodes: a Windows2022 class offers amd64 types only, labelled windows with the
// 2022 build, with Karpenter's Windows arithmetic: 110 pods, kube-reserved memory for them
// (11Mi × 110 + 255Mi), a 50Gi root volume on /dev/sda1, and the primary interface's secondary
// IPv4 addresses as vpc.amazonaws.com/PrivateIPv4Address.
func TestWindowsNodes(t *testing.T) {
	cat, err := Load("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	o, err := NodeClassOptionsFor(&awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}})
	if err != nil || o.AMIFamily != AMIFamilyWindows2022 {
		t.Fatalf("options %+v, %v", o, err)
	}
	its := cat.InstanceTypes(o)
	for _, it := range its {
		if it.Labels[LabelArch] != "amd64" || it.Labels[LabelOS] != "windows" || it.Labels[LabelWindowsBuild] != "10.0.20348" {
			t.Fatalf("%s labels %v: want amd64, windows, build 10.0.20348", it.Name, it.Labels)
		}
	}
	m5, ok := cat.InstanceType("m5.large", o)
	if !ok {
		t.Fatal("no m5.large")
	}
	linux, _ := cat.InstanceType("m5.large", NodeClassOptions{})
	if m5.Capacity[Pods] != 110 || m5.Capacity[PrivateIPv4] != 9 || m5.Capacity[EphemeralStorage] != 50*Gi {
		t.Errorf("m5.large pods %d, PrivateIPv4Address %d, storage %d; want 110, 9 (10 IPv4 per ENI − 1), 50Gi", m5.Capacity[Pods], m5.Capacity[PrivateIPv4], m5.Capacity[EphemeralStorage])
	}
	// Kube-reserved memory for 110 pods instead of the 29 the VPC CNI allows on Linux.
	if diff := linux.Allocatable[Memory] - m5.Allocatable[Memory]; diff != (110-29)*11*Mi {
		t.Errorf("Windows allocatable memory is %d below Linux's, want %d", diff, (110-29)*11*Mi)
	}
	if vs := DefaultVolumes(AMIFamilyWindows2022); len(vs) != 1 || vs[0].Device != "/dev/sda1" || vs[0].SizeGiB != 50 {
		t.Errorf("default volumes %+v, want 50Gi on /dev/sda1", vs)
	}
	if linux.Labels[LabelOS] != "linux" {
		t.Errorf("the Linux labels changed: %v", linux.Labels)
	}
}
