package schedulingcheck

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
)

// hostPort is a host (IP, port, protocol) a pod reserves on its node, as the kube-scheduler's
// NodePorts filter sees it.
type hostPort struct {
	ip    net.IP
	port  int32
	proto corev1.Protocol
}

// hostPorts lists the host ports of a pod's containers and of its sidecar (restartable init)
// containers, with the API server's defaults (TCP, every address).
func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	containers := p.Spec.Containers
	for _, ic := range p.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers[:len(containers):len(containers)], ic)
		}
	}
	for _, ct := range containers {
		for _, cp := range ct.Ports {
			if cp.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: net.ParseIP(cp.HostIP), port: cp.HostPort, proto: cp.Protocol}
			if hp.ip == nil {
				hp.ip = net.IPv4zero
			}
			if hp.proto == "" {
				hp.proto = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	return out
}

// portClash explains the first of want that a port in use takes ("" if none): same port and
// protocol on the same address, or on the wildcard address on either side.
func portClash(want, inUse []hostPort) string {
	for _, w := range want {
		for _, u := range inUse {
			if w.port == u.port && w.proto == u.proto && (w.ip.Equal(u.ip) || w.ip.IsUnspecified() || u.ip.IsUnspecified()) {
				return fmt.Sprintf("host port %s:%d/%s is already in use", w.ip, w.port, w.proto)
			}
		}
	}
	return ""
}
