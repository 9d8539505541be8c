package overlay

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/internal/requirements"
)

// compiled is an overlay read once: its requirements split into those on instance type and
// pool labels and those on offerings (zone, capacity type), its price change and capacity.
type compiled struct {
	name      string
	weight    int32
	labels    []requirements.Requirement
	offerings []requirements.Requirement
	price     *change
	// names are every capacity resource, sorted; modelled those the engine schedules on.
	names      []string
	modelled   map[string]amount
	unmodelled []string
}

type amount struct {
	index  catalog.Resource
	amount int64
}

// compile checks what Karpenter checks at run time (and what the CRD checks, for overlays read
// from files) and reads the overlay.
func compile(o *v1alpha1.NodeOverlay) (*compiled, error) {
	c := &compiled{name: o.Name, weight: weight(o), modelled: map[string]amount{}}
	var errs []error
	for i, r := range o.Spec.Requirements {
		if err := checkRequirement(r); err != nil {
			errs = append(errs, fmt.Errorf("spec.requirements[%d]: %w", i, err))
			continue
		}
		rq := requirements.New(r.Key, r.Operator, r.Values)
		if rq.Key == catalog.LabelZone || rq.Key == catalog.LabelCapacityType {
			c.offerings = append(c.offerings, rq)
		} else {
			c.labels = append(c.labels, rq)
		}
	}
	if err := c.readPrice(&o.Spec); err != nil {
		errs = append(errs, err)
	}
	for name, q := range o.Spec.Capacity {
		if wellKnown[name] {
			errs = append(errs, fmt.Errorf("spec.capacity: %s cannot be changed by an overlay (only extended resources can be added)", name))
			continue
		}
		c.names = append(c.names, string(name))
		if r, ok := scheduling.ResourceIndex(name); ok {
			c.modelled[string(name)] = amount{r, q.Value()}
		} else {
			c.unmodelled = append(c.unmodelled, string(name))
		}
	}
	slices.Sort(c.names)
	slices.Sort(c.unmodelled)
	return c, errors.Join(errs...)
}

var wellKnown = map[corev1.ResourceName]bool{
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true, corev1.ResourcePods: true,
}

func (c *compiled) readPrice(spec *v1alpha1.NodeOverlaySpec) error {
	var ch change
	var err error
	switch {
	case spec.Price != nil && spec.PriceAdjustment != nil:
		return errors.New("spec: set price or priceAdjustment, not both")
	case spec.Price != nil:
		ch, err = parsePrice(*spec.Price)
	case spec.PriceAdjustment != nil:
		ch, err = parseAdjustment(*spec.PriceAdjustment)
	default:
		return nil
	}
	if err == nil {
		c.price = &ch
	}
	return err
}

// checkRequirement holds the operator and value rules of the CRD.
func checkRequirement(r v1alpha1.NodeSelectorRequirement) error {
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return fmt.Errorf("%s %s needs at least one value", r.Key, r.Operator)
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) != 0 {
			return fmt.Errorf("%s %s takes no values", r.Key, r.Operator)
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, requirements.Gte, requirements.Lte:
		if len(r.Values) != 1 {
			return fmt.Errorf("%s %s takes exactly one integer value", r.Key, r.Operator)
		}
		if n, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil || n < 0 {
			return fmt.Errorf("%s %s %q: the value must be a non-negative integer", r.Key, r.Operator, r.Values[0])
		}
	default:
		return fmt.Errorf("operator %q is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte", r.Operator)
	}
	return nil
}

// selects returns the offerings of instance type t of pool p the overlay selects: none when
// the type's labels, the pool's name or its template labels fail a requirement (a key none of
// them defines fails In, Exists and the numeric operators, as in Karpenter).
func (c *compiled) selects(p *scheduling.Pool, t int) []int {
	it := &p.InstanceTypes[t]
	for i := range c.labels {
		if !matchesPool(&c.labels[i], p.NodePool, it.Labels) {
			return nil
		}
	}
	var out []int
	for i := range it.Offerings {
		if matchesOffering(c.offerings, &it.Offerings[i]) {
			out = append(out, i)
		}
	}
	return out
}

// matchesPool evaluates a requirement against the labels a node of the type in the pool
// would have from the type and from the pool (name and template labels); where both define
// the key, both must satisfy it.
func matchesPool(r *requirements.Requirement, np *karpv1.NodePool, typeLabels map[string]string) bool {
	if r.Key == karpv1.LabelNodePool {
		return r.Matches(np.Name, true)
	}
	tv, inType := typeLabels[r.Key]
	pv, inPool := np.Spec.Template.Labels[r.Key]
	switch {
	case inType && inPool:
		return r.Matches(tv, true) && r.Matches(pv, true)
	case inPool:
		return r.Matches(pv, true)
	default:
		return r.Matches(tv, inType)
	}
}

func matchesOffering(reqs []requirements.Requirement, o *catalog.Offering) bool {
	for i := range reqs {
		v := o.Zone
		if reqs[i].Key == catalog.LabelCapacityType {
			v = o.CapacityType
		}
		if !reqs[i].Matches(v, true) {
			return false
		}
	}
	return true
}
