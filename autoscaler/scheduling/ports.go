package scheduling

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// portRules holds the host ports pods and daemonsets use.
type portRules struct {
	// portTab interns the host ports pods and daemonsets use.
	portTab portTable
}

// hostPort is one (IP, port, protocol) a pod reserves on its node. Two pods whose host ports
// conflict never share a node, as the kube-scheduler's NodePorts plugin decides: same port and
// protocol, and the same IP or either of them the wildcard.
type hostPort struct {
	ip    string // canonical; "0.0.0.0" when unset
	port  int32
	proto corev1.Protocol
}

func (a hostPort) conflicts(b hostPort) bool {
	if a.port != b.port || a.proto != b.proto {
		return false
	}
	return a.ip == b.ip || isWildcard(a.ip) || isWildcard(b.ip)
}

func isWildcard(ip string) bool { return ip == "0.0.0.0" || ip == "::" }

// hostPortsOf lists a pod's host ports: those of its containers and of its restartable (sidecar)
// init containers, which run as long as the pod does. Unset IP and protocol take the API
// server's defaults.
func hostPortsOf(spec *corev1.PodSpec) []hostPort {
	var out []hostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: "0.0.0.0", port: p.HostPort, proto: p.Protocol}
			if ip := net.ParseIP(p.HostIP); ip != nil {
				hp.ip = ip.String()
			}
			if hp.proto == "" {
				hp.proto = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range spec.Containers {
		add(&spec.Containers[i])
	}
	return out
}

// portTable interns the host ports of one solve and their conflicts. Only solves where some pod
// or daemonset asks for a host port use it; elsewhere every port set is nil.
type portTable struct {
	ports []hostPort
	idx   map[hostPort]int
	// conf[i] holds the ports conflicting with port i (i included).
	conf []bitset
}

func (t *portTable) intern(ps []hostPort) []int {
	if len(ps) == 0 {
		return nil
	}
	if t.idx == nil {
		t.idx = map[hostPort]int{}
	}
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		i, ok := t.idx[p]
		if !ok {
			i = len(t.ports)
			t.idx[p] = i
			t.ports = append(t.ports, p)
		}
		out = append(out, i)
	}
	return out
}

// seal computes the conflicts once every port is interned.
func (t *portTable) seal() {
	t.conf = make([]bitset, len(t.ports))
	for i, a := range t.ports {
		t.conf[i] = newBitset(len(t.ports))
		for j, b := range t.ports {
			if a.conflicts(b) {
				t.conf[i].set(j)
			}
		}
	}
}

// set turns interned ports into a set (nil when there are none).
func (t *portTable) set(ids []int) bitset {
	if len(ids) == 0 {
		return nil
	}
	b := newBitset(len(t.ports))
	for _, i := range ids {
		b.set(i)
	}
	return b
}

// conflictSet is the set of ports that conflict with any of ids.
func (t *portTable) conflictSet(ids []int) bitset {
	if len(ids) == 0 {
		return nil
	}
	b := newBitset(len(t.ports))
	for _, i := range ids {
		for w := range b {
			b[w] |= t.conf[i][w]
		}
	}
	return b
}

// intersects reports whether two port sets (nil: empty) share a member.
func intersects(a, b bitset) bool {
	if a == nil || b == nil {
		return false
	}
	for i := range a {
		if a[i]&b[i] != 0 {
			return true
		}
	}
	return false
}

// union adds o into *b (allocating it when nil).
func union(b *bitset, o bitset) {
	if o == nil {
		return
	}
	if *b == nil {
		*b = o.clone()
		return
	}
	for i := range o {
		(*b)[i] |= o[i]
	}
}

// preparePorts turns the interned host ports of classes, bins and instance types into sets, once
// every port of the solve is known.
func (r *portRules) preparePorts(classes []*class, bins []*bin, pools []*poolState) {
	t := &r.portTab
	if len(t.ports) == 0 {
		return
	}
	t.seal()
	for _, c := range classes {
		c.portSet, c.portConf = t.set(c.ports), t.conflictSet(c.ports)
	}
	for _, b := range bins {
		b.ports, b.portIDs = t.set(b.portIDs), nil
	}
	for _, p := range pools {
		for i := range p.types {
			ti := &p.types[i]
			ti.dsPorts = t.set(ti.dsPortIDs)
			p.dsPorts = p.dsPorts || ti.dsPorts != nil
		}
	}
}

// portsFree reports whether the class's host ports are free on the bin: on its pods, and on a
// new NodeClaim also on the daemonsets of its target type (its pool among pools).
func (r *portRules) portsFree(c *class, b *bin, pools []*poolState) bool {
	if c.portConf == nil {
		return true
	}
	if intersects(c.portConf, b.ports) {
		return false
	}
	return b.kind != binNew || !intersects(c.portConf, pools[b.pool].types[b.target].dsPorts)
}

// withoutPortClashes removes from types those whose daemonsets use a host port of the class.
// It returns types itself when nothing needs removing, else a copy.
func (r *portRules) withoutPortClashes(c *class, p *poolState, types bitset) bitset {
	if c.portConf == nil || !p.dsPorts {
		return types
	}
	out, copied := types, false
	types.each(func(i int) bool {
		if intersects(c.portConf, p.types[i].dsPorts) {
			if !copied {
				out, copied = types.clone(), true
			}
			out.clear(i)
		}
		return true
	})
	return out
}

// describePorts renders a class's host ports for reasons, e.g. "8080/TCP".
func (r *portRules) describePorts(c *class) string {
	var b strings.Builder
	for i, id := range c.ports {
		if i > 0 {
			b.WriteString(", ")
		}
		hp := r.portTab.ports[id]
		if !isWildcard(hp.ip) {
			b.WriteString(hp.ip + ":")
		}
		fmt.Fprintf(&b, "%d/%s", hp.port, hp.proto)
	}
	return b.String()
}
