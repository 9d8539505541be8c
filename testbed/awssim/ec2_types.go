package awssim

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// offeredSpecs are the catalog rows the account can launch, sorted by name.
func (s *Server) offeredSpecs() []catalog.Spec {
	var out []catalog.Spec
	for _, sp := range s.catalog.Specs() {
		if s.catalog.Offered(sp.Name) {
			out = append(out, sp)
		}
	}
	return out
}

func (s *Server) spec(name string) (catalog.Spec, bool) {
	if !s.catalog.Offered(name) {
		return catalog.Spec{}, false
	}
	return s.catalog.Spec(name)
}

// ec2Arch is the EC2 spelling of an architecture.
func ec2Arch(arch string) string {
	if arch == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

// displayName turns the catalog's kebab-case device names back into EC2's spelling closely
// enough that Karpenter's lower-kebab-case labels round-trip (a10g → A10G,
// radeon-pro-v520 → Radeon Pro V520).
func displayName(n string) string {
	if strings.ContainsAny(n, " ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return n
	}
	parts := strings.Split(n, "-")
	if len(parts) == 1 {
		return strings.ToUpper(n)
	}
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, " ")
}

func manufacturerName(m string) string {
	switch strings.ToLower(m) {
	case "nvidia":
		return "NVIDIA"
	case "amd":
		return "AMD"
	case "intel":
		return "Intel"
	case "aws", "amazon":
		return "AWS"
	case "habana":
		return "Habana"
	case "xilinx":
		return "Xilinx"
	case "":
		return ""
	}
	return strings.ToUpper(m[:1]) + m[1:]
}

func networkPerformance(mbps int64) string {
	if mbps <= 0 {
		return "Moderate"
	}
	g := float64(mbps) / 1000
	if g < 10 {
		return "Up to 10 Gigabit"
	}
	return strconv.FormatFloat(math.Round(g), 'f', -1, 64) + " Gigabit"
}

// instanceTypeInfo renders a catalog row as DescribeInstanceTypes reports it.
func instanceTypeInfo(sp catalog.Spec) ec2types.InstanceTypeInfo {
	threads := int32(2)
	if sp.Arch == "arm64" || sp.VCPU == 1 {
		threads = 1
	}
	cores := int32(sp.VCPU) / threads
	if cores == 0 {
		cores = 1
	}
	usage := []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand}
	if sp.SpotPrice > 0 {
		usage = append(usage, ec2types.UsageClassTypeSpot)
	}
	info := ec2types.InstanceTypeInfo{
		InstanceType:                  ec2types.InstanceType(sp.Name),
		CurrentGeneration:             aws.Bool(sp.Generation >= 3),
		FreeTierEligible:              aws.Bool(sp.Name == "t2.micro" || sp.Name == "t3.micro"),
		SupportedUsageClasses:         usage,
		SupportedRootDeviceTypes:      []ec2types.RootDeviceType{ec2types.RootDeviceTypeEbs},
		SupportedVirtualizationTypes:  []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		BareMetal:                     aws.Bool(sp.BareMetal),
		BurstablePerformanceSupported: aws.Bool(sp.Burstable()),
		HibernationSupported:          aws.Bool(!sp.BareMetal && sp.MemoryMiB <= 150*1024),
		DedicatedHostsSupported:       aws.Bool(!sp.Burstable()),
		AutoRecoverySupported:         aws.Bool(sp.LocalNVMeGB == 0),
		SupportedInRegion:             aws.Bool(true),
		SupportedBootModes:            []ec2types.BootModeType{ec2types.BootModeTypeLegacyBios, ec2types.BootModeTypeUefi},
		ProcessorInfo: &ec2types.ProcessorInfo{
			SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureType(ec2Arch(sp.Arch))},
		},
		VCpuInfo: &ec2types.VCpuInfo{
			DefaultVCpus: aws.Int32(int32(sp.VCPU)), DefaultCores: aws.Int32(cores), DefaultThreadsPerCore: aws.Int32(threads),
		},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(sp.MemoryMiB)},
		EbsInfo: &ec2types.EbsInfo{
			EbsOptimizedSupport: ec2types.EbsOptimizedSupportDefault,
			EncryptionSupport:   ec2types.EbsEncryptionSupportSupported,
			NvmeSupport:         ec2types.EbsNvmeSupportRequired,
		},
		NetworkInfo: &ec2types.NetworkInfo{
			NetworkPerformance:           aws.String(networkPerformance(sp.NetworkBandwidthMbps)),
			MaximumNetworkInterfaces:     aws.Int32(int32(sp.MaxENIs)),
			MaximumNetworkCards:          aws.Int32(1),
			DefaultNetworkCardIndex:      aws.Int32(0),
			Ipv4AddressesPerInterface:    aws.Int32(int32(sp.IPv4PerENI)),
			Ipv6AddressesPerInterface:    aws.Int32(int32(sp.IPv4PerENI)),
			Ipv6Supported:                aws.Bool(sp.Hypervisor == "nitro" || sp.BareMetal),
			EnaSupport:                   ec2types.EnaSupportRequired,
			EfaSupported:                 aws.Bool(sp.EFA > 0),
			EncryptionInTransitSupported: aws.Bool(sp.EncryptionInTransitSupported == "true"),
			EnaSrdSupported:              aws.Bool(false),
			BandwidthWeightings:          []ec2types.BandwidthWeightingType{ec2types.BandwidthWeightingTypeDefault},
			NetworkCards: []ec2types.NetworkCardInfo{{
				NetworkCardIndex:         aws.Int32(0),
				MaximumNetworkInterfaces: aws.Int32(int32(sp.MaxENIs)),
				NetworkPerformance:       aws.String(networkPerformance(sp.NetworkBandwidthMbps)),
				BaselineBandwidthInGbps:  aws.Float64(float64(sp.NetworkBandwidthMbps) / 1000),
				PeakBandwidthInGbps:      aws.Float64(float64(sp.NetworkBandwidthMbps) / 1000),
			}},
		},
		PlacementGroupInfo: &ec2types.PlacementGroupInfo{SupportedStrategies: []ec2types.PlacementGroupStrategy{
			ec2types.PlacementGroupStrategyCluster, ec2types.PlacementGroupStrategyPartition, ec2types.PlacementGroupStrategySpread}},
		NitroEnclavesSupport: ec2types.NitroEnclavesSupportUnsupported,
		NitroTpmSupport:      ec2types.NitroTpmSupportUnsupported,
		PhcSupport:           ec2types.PhcSupportUnsupported,
	}
	if sp.Hypervisor != "" {
		info.Hypervisor = ec2types.InstanceTypeHypervisor(sp.Hypervisor)
		if sp.Hypervisor == "nitro" {
			info.NitroEnclavesSupport = ec2types.NitroEnclavesSupportSupported
			info.NitroTpmSupport = ec2types.NitroTpmSupportSupported
		}
	} else {
		info.Hypervisor = ""
	}
	if sp.CPUManufacturer != "" {
		info.ProcessorInfo.Manufacturer = aws.String(manufacturerName(sp.CPUManufacturer))
	}
	if sp.CPUSustainedClockSpeedMhz > 0 {
		info.ProcessorInfo.SustainedClockSpeedInGhz = aws.Float64(float64(sp.CPUSustainedClockSpeedMhz) / 1000)
	}
	if sp.EBSBandwidthMbps > 0 {
		info.EbsInfo.EbsOptimizedInfo = &ec2types.EbsOptimizedInfo{
			BaselineBandwidthInMbps: aws.Int32(int32(sp.EBSBandwidthMbps)), MaximumBandwidthInMbps: aws.Int32(int32(sp.EBSBandwidthMbps)),
		}
	}
	if sp.EFA > 0 {
		info.NetworkInfo.EfaInfo = &ec2types.EfaInfo{MaximumEfaInterfaces: aws.Int32(int32(sp.EFA))}
	}
	info.InstanceStorageSupported = aws.Bool(sp.LocalNVMeGB > 0)
	if sp.LocalNVMeGB > 0 {
		info.InstanceStorageInfo = &ec2types.InstanceStorageInfo{
			TotalSizeInGB:     aws.Int64(sp.LocalNVMeGB),
			Disks:             []ec2types.DiskInfo{{Count: aws.Int32(1), SizeInGB: aws.Int64(sp.LocalNVMeGB), Type: ec2types.DiskTypeSsd}},
			NvmeSupport:       ec2types.EphemeralNvmeSupportRequired,
			EncryptionSupport: ec2types.InstanceStorageEncryptionSupportRequired,
		}
	}
	if sp.GPUs > 0 {
		info.GpuInfo = &ec2types.GpuInfo{
			Gpus: []ec2types.GpuDeviceInfo{{
				Name: aws.String(displayName(sp.GPUName)), Manufacturer: aws.String(manufacturerName(sp.GPUManufacturer)),
				Count: aws.Int32(int32(sp.GPUs)), MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(int32(sp.GPUMemoryMiB))},
			}},
			TotalGpuMemoryInMiB: aws.Int32(int32(sp.GPUMemoryMiB * sp.GPUs)),
		}
	}
	if sp.Accelerators > 0 {
		cores := int32(0)
		if sp.NeuronCores > 0 {
			cores = int32(sp.NeuronCores / sp.Accelerators)
		}
		name := displayName(sp.AcceleratorName)
		if len(sp.AcceleratorName) > 1 {
			name = strings.ToUpper(sp.AcceleratorName[:1]) + sp.AcceleratorName[1:]
		}
		info.NeuronInfo = &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{{
			Name: aws.String(name), Count: aws.Int32(int32(sp.Accelerators)),
			CoreInfo: &ec2types.NeuronDeviceCoreInfo{Count: aws.Int32(cores), Version: aws.Int32(2)},
		}}}
	}
	return info
}

func (s *Server) describeInstanceTypes(rc *reqCtx, in *ec2.DescribeInstanceTypesInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	if err := checkMaxResults(in.MaxResults, 5, 100, "", 0); err != nil {
		return nil, err
	}
	for _, t := range in.InstanceTypes {
		if _, ok := s.spec(string(t)); !ok {
			return nil, apiErr(400, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", t)
		}
	}
	out := &ec2.DescribeInstanceTypesOutput{InstanceTypes: []ec2types.InstanceTypeInfo{}}
	for _, sp := range s.offeredSpecs() {
		if len(in.InstanceTypes) > 0 && !contains(in.InstanceTypes, ec2types.InstanceType(sp.Name)) {
			continue
		}
		info := instanceTypeInfo(sp)
		ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "instance-type":
				return []string{sp.Name}, true
			case "current-generation":
				return []string{strconv.FormatBool(aws.ToBool(info.CurrentGeneration))}, true
			case "processor-info.supported-architecture":
				return []string{ec2Arch(sp.Arch)}, true
			case "supported-virtualization-type":
				return []string{"hvm"}, true
			case "supported-root-device-type":
				return []string{"ebs"}, true
			case "bare-metal":
				return []string{strconv.FormatBool(sp.BareMetal)}, true
			case "hypervisor":
				return []string{sp.Hypervisor}, true
			case "vcpu-info.default-vcpus":
				return []string{strconv.FormatInt(sp.VCPU, 10)}, true
			case "memory-info.size-in-mib":
				return []string{strconv.FormatInt(sp.MemoryMiB, 10)}, true
			case "supported-usage-class":
				var u []string
				for _, c := range info.SupportedUsageClasses {
					u = append(u, string(c))
				}
				return u, true
			case "burstable-performance-supported":
				return []string{strconv.FormatBool(sp.Burstable())}, true
			case "instance-storage-supported":
				return []string{strconv.FormatBool(sp.LocalNVMeGB > 0)}, true
			case "network-info.efa-supported":
				return []string{strconv.FormatBool(sp.EFA > 0)}, true
			case "free-tier-eligible":
				return []string{strconv.FormatBool(aws.ToBool(info.FreeTierEligible))}, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.InstanceTypes = append(out.InstanceTypes, info)
		}
	}
	var err error
	out.InstanceTypes, out.NextToken, err = page(out.InstanceTypes, in.MaxResults, in.NextToken, 100)
	return out, err
}

func (s *Server) describeInstanceTypeOfferings(rc *reqCtx, in *ec2.DescribeInstanceTypeOfferingsInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	lt := in.LocationType
	if lt == "" {
		lt = ec2types.LocationTypeRegion
	}
	s.mu.Lock()
	zones := append([]zone(nil), s.st.zones...)
	s.mu.Unlock()
	var locs []string
	switch lt {
	case ec2types.LocationTypeRegion:
		locs = []string{s.opts.Region}
	case ec2types.LocationTypeAvailabilityZone:
		for _, z := range zones {
			locs = append(locs, z.name)
		}
	case ec2types.LocationTypeAvailabilityZoneId:
		for _, z := range zones {
			locs = append(locs, z.id)
		}
	default:
		return nil, apiErr(400, "InvalidParameterValue", "Value (%s) for parameter locationType is invalid.", lt)
	}
	out := &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: []ec2types.InstanceTypeOffering{}}
	for _, sp := range s.offeredSpecs() {
		for _, loc := range locs {
			ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
				switch name {
				case "instance-type":
					return []string{sp.Name}, true
				case "location":
					return []string{loc}, true
				}
				return nil, false
			})
			if err != nil {
				return nil, err
			}
			if ok {
				out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{
					InstanceType: ec2types.InstanceType(sp.Name), LocationType: lt, Location: aws.String(loc),
				})
			}
		}
	}
	var err error
	out.InstanceTypeOfferings, out.NextToken, err = page(out.InstanceTypeOfferings, in.MaxResults, in.NextToken, 1000)
	return out, err
}

// spotPrice is the current spot price of a type in a zone (0 = no spot market). Call with s.mu.
func (s *Server) spotPrice(sp catalog.Spec, zoneName string) float64 {
	if p, ok := s.st.spotPrices[[2]string{sp.Name, zoneName}]; ok {
		return p
	}
	if p, ok := s.st.spotPrices[[2]string{sp.Name, ""}]; ok {
		return p
	}
	return sp.SpotPrice
}

func formatPrice(p float64) string { return strconv.FormatFloat(p, 'f', 6, 64) }

func (s *Server) describeSpotPriceHistory(rc *reqCtx, in *ec2.DescribeSpotPriceHistoryInput) (any, error) {
	if err := dryRun(in); err != nil {
		return nil, err
	}
	products := in.ProductDescriptions
	if len(products) == 0 {
		products = []string{"Linux/UNIX"}
	}
	for _, p := range products {
		if p != "Linux/UNIX" && p != "Linux/UNIX (Amazon VPC)" {
			// Other operating systems are not simulated: they have no price history.
			continue
		}
	}
	for _, t := range in.InstanceTypes {
		if _, ok := s.catalog.Spec(string(t)); !ok {
			return nil, apiErr(400, "InvalidParameterValue", "Value (%s) for parameter instanceType is invalid.", t)
		}
	}
	ts := rc.now.UTC().Truncate(time.Hour)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: []ec2types.SpotPrice{}}
	for _, sp := range s.offeredSpecs() {
		if len(in.InstanceTypes) > 0 && !contains(in.InstanceTypes, ec2types.InstanceType(sp.Name)) {
			continue
		}
		for _, z := range s.st.zones {
			if in.AvailabilityZone != nil && *in.AvailabilityZone != z.name {
				continue
			}
			price := s.spotPrice(sp, z.name)
			if price <= 0 {
				continue
			}
			for _, prod := range products {
				if prod != "Linux/UNIX" && prod != "Linux/UNIX (Amazon VPC)" {
					continue
				}
				ok, err := matchFilters(in.Filters, func(name string) ([]string, bool) {
					switch name {
					case "availability-zone":
						return []string{z.name}, true
					case "instance-type":
						return []string{sp.Name}, true
					case "product-description":
						return []string{prod}, true
					case "spot-price":
						return []string{formatPrice(price)}, true
					case "timestamp":
						return []string{ts.Format("2006-01-02T15:04:05.000Z")}, true
					}
					return nil, false
				})
				if err != nil {
					return nil, err
				}
				if ok {
					out.SpotPriceHistory = append(out.SpotPriceHistory, ec2types.SpotPrice{
						AvailabilityZone: aws.String(z.name), AvailabilityZoneId: aws.String(z.id), InstanceType: ec2types.InstanceType(sp.Name),
						ProductDescription: ec2types.RIProductDescription(prod), SpotPrice: aws.String(formatPrice(price)), Timestamp: aws.Time(ts),
					})
				}
			}
		}
	}
	var err error
	out.SpotPriceHistory, out.NextToken, err = page(out.SpotPriceHistory, in.MaxResults, in.NextToken, 1000)
	if out.NextToken == nil {
		out.NextToken = aws.String("")
	}
	return out, err
}
