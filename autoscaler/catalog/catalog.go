package catalog

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// LoadOptions choose what Load includes.
type LoadOptions struct {
	// IncludeEstimated adds the types whose regional price is an estimate and whose regional
	// availability is unknown (ap-northeast-2: newer generations). Their offerings are marked
	// Estimated.
	IncludeEstimated bool
}

// Catalog is the embedded EC2 catalog of one region. It is immutable and safe to share.
type Catalog struct {
	region string
	zones  []string
	specs  []Spec // sorted by name
	byName map[string]int
	labels []map[string]string // per spec; nil when the type is not offered
}

var (
	loadMu    sync.Mutex
	loadCache = map[string]*Catalog{}
)

// Regions lists the regions with an embedded catalog, sorted.
func Regions() []string {
	out := make([]string, 0, len(regionFiles))
	for r := range regionFiles {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Load returns the embedded catalog of a region (confirmed types only).
func Load(region string) (*Catalog, error) {
	return LoadWithOptions(region, LoadOptions{})
}

// LoadWithOptions returns the embedded catalog of a region. Catalogs are parsed once and shared.
func LoadWithOptions(region string, opts LoadOptions) (*Catalog, error) {
	files, ok := regionFiles[region]
	if !ok {
		return nil, fmt.Errorf("no embedded EC2 catalog for region %q (have %s)", region, strings.Join(Regions(), ", "))
	}
	key := fmt.Sprintf("%s/%t", region, opts.IncludeEstimated)
	loadMu.Lock()
	defer loadMu.Unlock()
	if c, ok := loadCache[key]; ok {
		return c, nil
	}
	extra, err := readExtra()
	if err != nil {
		return nil, err
	}
	specs, err := readSpecs(files.confirmed, extra)
	if err != nil {
		return nil, err
	}
	if opts.IncludeEstimated && files.estimated != "" {
		est, err := readSpecs(files.estimated, extra)
		if err != nil {
			return nil, err
		}
		have := make(map[string]bool, len(specs))
		for _, s := range specs {
			have[s.Name] = true
		}
		for _, s := range est {
			if !have[s.Name] {
				specs = append(specs, s)
			}
		}
	}
	c := newCatalog(region, specs)
	loadCache[key] = c
	return c, nil
}

// DefaultZones are the zones the catalog offers every type in: the region's a, b and c zones.
// The embedded data has no per-zone availability.
func DefaultZones(region string) []string {
	return []string{region + "a", region + "b", region + "c"}
}

func newCatalog(region string, specs []Spec) *Catalog {
	slices.SortFunc(specs, func(a, b Spec) int { return cmp.Compare(a.Name, b.Name) })
	c := &Catalog{
		region: region,
		zones:  DefaultZones(region),
		specs:  specs,
		byName: make(map[string]int, len(specs)),
		labels: make([]map[string]string, len(specs)),
	}
	for i := range specs {
		c.byName[specs[i].Name] = i
		if offered(&specs[i]) {
			c.labels[i] = specLabels(&specs[i], region)
		}
	}
	return c
}

// offered reports whether the catalog offers a type: Karpenter lists it and it has a price.
func offered(s *Spec) bool {
	return s.Supported && s.OnDemandPrice > 0
}

// Region is the catalog's region.
func (c *Catalog) Region() string { return c.region }

// Zones are the zones offerings are generated for when NodeClassOptions.Zones is empty.
func (c *Catalog) Zones() []string { return slices.Clone(c.zones) }

// Specs returns the raw rows, offered or not, sorted by name.
func (c *Catalog) Specs() []Spec { return slices.Clone(c.specs) }

// Spec returns the raw row of one type.
func (c *Catalog) Spec(name string) (Spec, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Spec{}, false
	}
	return c.specs[i], true
}

// Offered reports whether the catalog offers the named type.
func (c *Catalog) Offered(name string) bool {
	i, ok := c.byName[name]
	return ok && c.labels[i] != nil
}

// zonesFor resolves NodeClassOptions.Zones: zones of this region, sorted and deduplicated.
// Any zone of the region is accepted (the data has no per-zone availability).
func (c *Catalog) zonesFor(want []string) []string {
	if len(want) == 0 {
		return c.zones
	}
	var out []string
	for _, z := range want {
		if strings.HasPrefix(z, c.region) && len(z) > len(c.region) {
			out = append(out, z)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// InstanceTypes returns every offered type as a node of a NodeClass with these options would
// see it: capacity, allocatable, labels and offerings, sorted by name. Every call returns fresh
// slices (callers may modify Offerings); the Labels maps are shared and must not be modified.
// Filtering by NodePool requirements is the scheduler's job.
func (c *Catalog) InstanceTypes(opts NodeClassOptions) []InstanceType {
	zones := c.zonesFor(opts.Zones)
	out := make([]InstanceType, 0, len(c.specs))
	for i := range c.specs {
		if c.labels[i] == nil || !opts.suits(&c.specs[i]) {
			continue
		}
		out = append(out, c.instanceType(i, &opts, zones))
	}
	return out
}

// suits reports whether a node of the type can launch with the class's network settings, as
// far as the catalog knows (Karpenter's compatibility checks): EFA-only interfaces need a type
// with at least as many EFA interfaces, connection tracking a Nitro type. The network cards
// and device indexes Karpenter also checks are not in the catalog; EC2 refuses such a launch.
func (o *NodeClassOptions) suits(s *Spec) bool {
	if _, windows := WindowsBuild(o.AMIFamily); windows && s.Arch != "amd64" {
		return false // the Windows AMIs are x86_64 only
	}
	return (o.Interfaces == nil || int64(o.Interfaces.EFAOnly) <= s.EFA) && (!o.ConnectionTracking || s.Hypervisor == "nitro")
}

// InstanceType returns one offered type under the options.
func (c *Catalog) InstanceType(name string, opts NodeClassOptions) (InstanceType, bool) {
	i, ok := c.byName[name]
	if !ok || c.labels[i] == nil {
		return InstanceType{}, false
	}
	return c.instanceType(i, &opts, c.zonesFor(opts.Zones)), true
}

func (c *Catalog) instanceType(i int, opts *NodeClassOptions, zones []string) InstanceType {
	s := &c.specs[i]
	capacity, allocatable := resources(s, opts)
	return InstanceType{
		Name:        s.Name,
		Labels:      osLabels(c.labels[i], opts.AMIFamily),
		Capacity:    capacity,
		Allocatable: allocatable,
		Offerings:   offerings(s, zones, VolumesPerHour(opts.Volumes)),
	}
}

// offerings: on-demand in every zone; spot in every zone when a spot price is known; each with
// the node's volumes added. Sorted by price, then zone, then capacity type.
func offerings(s *Spec, zones []string, volumes float64) []Offering {
	n := len(zones)
	if s.SpotPrice > 0 {
		n *= 2
	}
	out := make([]Offering, 0, n)
	for _, z := range zones {
		if s.SpotPrice > 0 {
			out = append(out, Offering{Zone: z, CapacityType: CapacityTypeSpot, PricePerHour: s.SpotPrice + volumes,
				VolumesPerHour: volumes, Available: true, Estimated: true})
		}
		out = append(out, Offering{Zone: z, CapacityType: CapacityTypeOnDemand, PricePerHour: s.OnDemandPrice + volumes,
			VolumesPerHour: volumes, Available: true, Estimated: s.PriceEstimated})
	}
	SortOfferings(out)
	return out
}

// SortOfferings sorts offerings by price, then zone, then capacity type.
func SortOfferings(o []Offering) {
	slices.SortFunc(o, func(a, b Offering) int {
		if c := cmp.Compare(a.PricePerHour, b.PricePerHour); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Zone, b.Zone); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.CapacityType, b.CapacityType), cmp.Compare(a.ReservationID, b.ReservationID))
	})
}

// CheapestOffering returns the cheapest available offering (offerings are sorted by price).
func (it *InstanceType) CheapestOffering() (Offering, bool) {
	best, found := Offering{}, false
	for _, o := range it.Offerings {
		if o.Available && (!found || o.PricePerHour < best.PricePerHour) {
			best, found = o, true
		}
	}
	return best, found
}

// Burstable reports whether the type is a burstable-performance type (category t).
func (it *InstanceType) Burstable() bool {
	return it.Labels["karpenter.k8s.aws/instance-category"] == "t"
}

// HPC reports whether the type is an HPC type (category hpc).
func (it *InstanceType) HPC() bool {
	return it.Labels["karpenter.k8s.aws/instance-category"] == "hpc"
}

// BareMetal reports whether the type is a bare-metal type (size metal or metal-*).
func (it *InstanceType) BareMetal() bool {
	return strings.HasPrefix(it.Labels["karpenter.k8s.aws/instance-size"], "metal")
}
