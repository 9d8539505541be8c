// Package instancetype says which instance types can be launched in the region and at what
// price: the embedded catalog's types (capacity and allocatable by its rules), narrowed to what
// EC2 lists and offers per zone, priced from the Price List API (on-demand) and the spot price
// history, read again every DiscoveryInterval. Offerings marked unavailable are left out.
package instancetype

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// DiscoveryInterval is how often the instance types, their zones and their prices are read
// again from AWS; DiscoveryRetry is how soon after a failed read.
const (
	DiscoveryInterval = 12 * time.Hour
	DiscoveryRetry    = 5 * time.Minute
)

// discovered is what the EC2 and Price List APIs said about the region. A nil map means that
// source has never been read successfully, and the embedded catalog stands in for it.
type discovered struct {
	// types are the instance types DescribeInstanceTypes lists.
	types map[string]bool
	// zones are the zones DescribeInstanceTypeOfferings offers each type in.
	zones map[string]map[string]bool
	// onDemand is the Linux on-demand price per hour from Pricing GetProducts.
	onDemand map[string]float64
	// spot is the current spot price per (type, zone) from DescribeSpotPriceHistory.
	spot map[[2]string]float64
}

// Provider discovers and serves the region's instance types.
type Provider struct {
	ec2         *ec2.Client
	pricing     *pricing.Client
	region      string
	catalog     *catalog.Catalog
	unavailable *catalog.Unavailable
	now         func() time.Time
	discovery   discovery
	listed      listCache
}

// listCache keeps List's types per class options until the discovered facts change: a
// scheduling round, a disruption pass and every launch list them, and building ~900 types with
// their offerings each time was most of the controller's allocations. The types are values
// whose slices and maps nobody writes (Unavailable.Apply and the overlays copy what they change).
type listCache struct {
	mu    sync.Mutex
	gen   uint64 // discovery.gen the entries were built from
	types map[string][]catalog.InstanceType
}

// New returns the provider. The pricing client must use the endpoint PricingRegion names;
// unavailable is shared with the launches that mark offerings.
func New(ec2Client *ec2.Client, pricingClient *pricing.Client, region string, cat *catalog.Catalog, unavailable *catalog.Unavailable, now func() time.Time) *Provider {
	return &Provider{ec2: ec2Client, pricing: pricingClient, region: region, catalog: cat, unavailable: unavailable, now: now}
}

// discovery keeps the discovered facts and when to read them again.
type discovery struct {
	// refresh serializes reads of the APIs; mu guards the fields.
	refresh sync.Mutex
	mu      sync.Mutex
	data    discovered
	gen     uint64 // counts the refreshes that changed data
	next    time.Time
	// errs are the failures of the last refresh, for logs and tests.
	errs []error
}

// PricingRegion is the Price List API endpoint that serves a region's prices: it runs in
// us-east-1, ap-south-1 and eu-central-1 only.
func PricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "eu-"), strings.HasPrefix(region, "me-"), strings.HasPrefix(region, "af-"), strings.HasPrefix(region, "il-"):
		return "eu-central-1"
	}
	return "us-east-1"
}

// Refresh reads instance types, offerings and prices from AWS now, keeping what it
// had (or the embedded catalog) for each source that fails. It returns the failures. Launches
// and the provider's InstanceTypes call it when DiscoveryInterval has passed; a controller may call it at
// start-up to have current prices before the first scheduling round.
func (p *Provider) Refresh(ctx context.Context) error {
	d := &p.discovery
	d.refresh.Lock()
	defer d.refresh.Unlock()
	var errs []error
	types, err := p.discoverTypes(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("DescribeInstanceTypes: %w", err))
	}
	zones, err := p.discoverOfferings(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("DescribeInstanceTypeOfferings: %w", err))
	}
	onDemand, err := p.discoverOnDemandPrices(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("pricing GetProducts: %w", err))
	}
	spot, err := p.discoverSpotPrices(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("DescribeSpotPriceHistory: %w", err))
	}
	now := p.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if types != nil {
		d.data.types = types
	}
	if zones != nil {
		d.data.zones = zones
	}
	if onDemand != nil {
		d.data.onDemand = onDemand
	}
	if spot != nil {
		d.data.spot = spot
	}
	if types != nil || zones != nil || onDemand != nil || spot != nil {
		d.gen++
	}
	d.errs = errs
	d.next = now.Add(DiscoveryInterval)
	if len(errs) > 0 {
		d.next = now.Add(DiscoveryRetry)
		return fmt.Errorf("reading instance types and prices from AWS (the embedded catalog stands in for what failed): %v", errs)
	}
	return nil
}

// RefreshIfDue refreshes when the interval has passed. Failures are not returned: the last
// good data or the catalog stand in, and the next call after DiscoveryRetry tries again.
func (p *Provider) RefreshIfDue(ctx context.Context) {
	d := &p.discovery
	d.mu.Lock()
	due := !p.now().Before(d.next)
	d.mu.Unlock()
	if due {
		_ = p.Refresh(ctx)
	}
}

func (p *Provider) discoverTypes(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	pg := ec2.NewDescribeInstanceTypesPaginator(p.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.InstanceTypes {
			out[string(it.InstanceType)] = true
		}
	}
	return out, nil
}

func (p *Provider) discoverOfferings(ctx context.Context) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	pg := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(1000)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.InstanceTypeOfferings {
			t := string(o.InstanceType)
			if out[t] == nil {
				out[t] = map[string]bool{}
			}
			out[t][aws.ToString(o.Location)] = true
		}
	}
	return out, nil
}

// priceListProduct is the part of a Price List product document karpool reads.
type priceListProduct struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// discoverOnDemandPrices reads the region's Linux, shared-tenancy, no-license on-demand prices
// (not Capacity Block prices).
func (p *Provider) discoverOnDemandPrices(ctx context.Context) (map[string]float64, error) {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(field), Value: aws.String(value), Type: pricingtypes.FilterTypeTermMatch}
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(100), Filters: []pricingtypes.Filter{
		term("regionCode", p.region), term("operatingSystem", "Linux"), term("tenancy", "Shared"), term("preInstalledSw", "NA"),
		term("capacitystatus", "Used"), term("licenseModel", "No License required"),
		// Capacity Blocks of accelerated types are listed with the same attributes otherwise.
		term("marketoption", "OnDemand"),
	}}
	out := map[string]float64{}
	pg := pricing.NewGetProductsPaginator(p.pricing, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, doc := range page.PriceList {
			var prod priceListProduct
			if err := json.Unmarshal([]byte(doc), &prod); err != nil {
				return nil, fmt.Errorf("a price list document is not the JSON AWS documents: %w", err)
			}
			for _, t := range prod.Terms.OnDemand {
				for _, dim := range t.PriceDimensions {
					usd, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
					if err == nil && usd > 0 && prod.Product.Attributes.InstanceType != "" {
						out[prod.Product.Attributes.InstanceType] = usd
					}
				}
			}
		}
	}
	return out, nil
}

// discoverSpotPrices reads the spot prices in effect now, per type and zone.
func (p *Provider) discoverSpotPrices(ctx context.Context) (map[[2]string]float64, error) {
	out := map[[2]string]float64{}
	latest := map[[2]string]time.Time{}
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}, StartTime: aws.Time(p.now()), MaxResults: aws.Int32(1000)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, sp := range page.SpotPriceHistory {
			k := [2]string{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
				continue
			}
			if at := aws.ToTime(sp.Timestamp); latest[k].IsZero() || at.After(latest[k]) {
				out[k], latest[k] = price, at
			}
		}
	}
	return out, nil
}

// List is the catalog's view of the instance types (capacity and allocatable always
// follow the catalog's rules) with what AWS said applied: only types EC2 lists, offerings only
// in the zones EC2 offers them, current on-demand and spot prices (plus the node's volumes, as
// the catalog adds them). Marked offerings are unavailable.
func (p *Provider) List(opts catalog.NodeClassOptions, now time.Time) []catalog.InstanceType {
	p.discovery.mu.Lock()
	d, gen := p.discovery.data, p.discovery.gen
	p.discovery.mu.Unlock()
	key, _ := json.Marshal(opts) // plain data (strings, numbers, slices): it always encodes
	c := &p.listed
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.types == nil {
		c.gen, c.types = gen, map[string][]catalog.InstanceType{}
	}
	its, ok := c.types[string(key)]
	if !ok {
		its = p.build(opts, d)
		c.types[string(key)] = its
	}
	return p.unavailable.Apply(its, now)
}

// build applies the discovered facts to the catalog's types under the options.
func (p *Provider) build(opts catalog.NodeClassOptions, d discovered) []catalog.InstanceType {
	its := p.catalog.InstanceTypes(opts)
	out := its[:0]
	for _, it := range its {
		if d.types != nil && !d.types[it.Name] {
			continue
		}
		spec, _ := p.catalog.Spec(it.Name)
		var offerings []catalog.Offering
		for _, o := range it.Offerings {
			if o.CapacityType != catalog.CapacityTypeOnDemand || (d.zones != nil && !d.zones[it.Name][o.Zone]) {
				continue
			}
			// The catalog offers on-demand in every zone it knows; spot only where it has a price.
			if price, ok := d.onDemand[it.Name]; ok {
				o.PricePerHour, o.Estimated = price+o.VolumesPerHour, false
			}
			offerings = append(offerings, o)
			switch {
			case d.spot != nil:
				if price, ok := d.spot[[2]string{it.Name, o.Zone}]; ok {
					offerings = append(offerings, catalog.Offering{Zone: o.Zone, CapacityType: catalog.CapacityTypeSpot,
						PricePerHour: price + o.VolumesPerHour, VolumesPerHour: o.VolumesPerHour, Available: true})
				}
			case spec.SpotPrice > 0:
				offerings = append(offerings, catalog.Offering{Zone: o.Zone, CapacityType: catalog.CapacityTypeSpot,
					PricePerHour: spec.SpotPrice + o.VolumesPerHour, VolumesPerHour: o.VolumesPerHour, Available: true, Estimated: true})
			}
		}
		if len(offerings) == 0 {
			continue
		}
		catalog.SortOfferings(offerings)
		it.Offerings = offerings
		out = append(out, it)
	}
	return out
}
