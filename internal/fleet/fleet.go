// Package fleet is the one model of a fleet of nodes and what it costs, for every report that
// shows one: pools of node groups (instance type, capacity type, zone), their price, the pods'
// requests against what the nodes offer and what the pools' limits allow, and how money and
// quantities are written. `karpool simulate`, `karpool plan`, the status commits and
// `karpool nodes` all use it, so a pool reads the same wherever it is shown.
package fleet

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// HoursPerMonth is the month AWS bills by, as every cost report uses it.
const HoursPerMonth = catalog.HoursPerMonth

// NodeGroup is the nodes of one instance type, capacity type and zone.
type NodeGroup struct {
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Zone         string  `json:"zone"`
	Count        int     `json:"count"`
	PerHour      float64 `json:"perHour"`
}

// Pool is one NodePool's nodes. Quantities are in millicores for cpu and bytes for memory.
type Pool struct {
	Name    string      `json:"name"`
	Nodes   int         `json:"nodes"`
	Groups  []NodeGroup `json:"groups"` // dearest first (Sort)
	PerHour float64     `json:"perHour"`
	Pods    int         `json:"pods"`
	// ReqCPU and ReqMem are the pods' requests; AllocCPU and AllocMem what the nodes offer
	// them; CapCPU and CapMem the nodes' capacity, which the pool's limits count.
	ReqCPU, ReqMem     int64 `json:"-"`
	AllocCPU, AllocMem int64 `json:"-"`
	CapCPU, CapMem     int64 `json:"-"`
	// LimitCPU and LimitMem are the pool's limits, -1 when it sets none.
	LimitCPU, LimitMem int64 `json:"-"`
}

// NewPool is an empty pool with the NodePool's name and limits.
func NewPool(np *karpv1.NodePool) Pool {
	p := Pool{Name: np.Name, LimitCPU: -1, LimitMem: -1, Groups: []NodeGroup{}}
	if q, ok := np.Spec.Limits[corev1.ResourceCPU]; ok {
		p.LimitCPU = q.MilliValue()
	}
	if q, ok := np.Spec.Limits[corev1.ResourceMemory]; ok {
		p.LimitMem = q.Value()
	}
	return p
}

// Node is one node as a pool counts it.
type Node struct {
	InstanceType, CapacityType, Zone string
	PerHour                          float64
	AllocCPU, AllocMem               int64
	CapCPU, CapMem                   int64
}

// Add counts a node in the pool and in its group.
func (p *Pool) Add(n Node) {
	p.Nodes++
	p.PerHour += n.PerHour
	p.AllocCPU += n.AllocCPU
	p.AllocMem += n.AllocMem
	p.CapCPU += n.CapCPU
	p.CapMem += n.CapMem
	for i := range p.Groups {
		g := &p.Groups[i]
		if g.InstanceType == n.InstanceType && g.CapacityType == n.CapacityType && g.Zone == n.Zone {
			g.Count++
			g.PerHour += n.PerHour
			return
		}
	}
	p.Groups = append(p.Groups, NodeGroup{n.InstanceType, n.CapacityType, n.Zone, 1, n.PerHour})
}

// Sort orders the groups dearest first, then by instance type, capacity type and zone.
func (p *Pool) Sort() {
	slices.SortStableFunc(p.Groups, func(a, b NodeGroup) int {
		if c := cmp.Compare(b.PerHour, a.PerHour); c != 0 {
			return c
		}
		if c := cmp.Compare(a.InstanceType, b.InstanceType); c != 0 {
			return c
		}
		if c := cmp.Compare(a.CapacityType, b.CapacityType); c != 0 {
			return c
		}
		return cmp.Compare(a.Zone, b.Zone)
	})
}
