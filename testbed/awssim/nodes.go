package awssim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// Annotations and labels node bootstrap puts on the Nodes it registers.
const (
	// KwokNodeAnnotation makes kwok run the node (it plays the kubelet).
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// InstanceAnnotation names the simulated instance behind a Node.
	InstanceAnnotation = "awssim.karpool.io/instance-id"
	labelZoneID        = "topology.k8s.aws/zone-id"
)

type nodeBootstrapper struct {
	s      *Server
	client kubernetes.Interface
	// failed remembers instances whose user data the kubelet could not start with.
	failed map[string]string
}

func newNodeBootstrapper(s *Server, cfg *rest.Config) (*nodeBootstrapper, error) {
	c, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("awssim: node bootstrap client: %w", err)
	}
	return &nodeBootstrapper{s: s, client: c, failed: map[string]string{}}, nil
}

// nodeSpec is a Node to register (or, with remove, to delete).
type nodeSpec struct {
	instanceID string
	node       *corev1.Node
	remove     bool
	err        string
}

func (nb *nodeBootstrapper) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		nb.s.mu.Lock()
		ch := nb.s.changed
		specs := nb.desired(nb.s.now())
		nb.s.mu.Unlock()
		nb.sync(ctx, specs)
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-t.C:
		}
	}
}

// desired computes the Nodes instances should have now. Call with s.mu.
func (nb *nodeBootstrapper) desired(now time.Time) []nodeSpec {
	var out []nodeSpec
	for _, id := range nb.s.st.order {
		in := nb.s.st.instances[id]
		if in == nil {
			continue
		}
		switch {
		case in.state == ec2types.InstanceStateNameRunning && !now.Before(in.registerAt):
			if in.node == nil && in.nodeErr == nil {
				in.node, in.nodeErr = nb.s.kubeletNode(in)
			}
			n, err := in.node, in.nodeErr
			if err != nil {
				out = append(out, nodeSpec{instanceID: id, err: err.Error()})
				continue
			}
			out = append(out, nodeSpec{instanceID: id, node: n.DeepCopy()})
		case in.state == ec2types.InstanceStateNameTerminated:
			out = append(out, nodeSpec{instanceID: id, remove: true, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.dnsName}}})
		}
	}
	return out
}

func (nb *nodeBootstrapper) sync(ctx context.Context, specs []nodeSpec) {
	list, err := nb.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			nb.s.logf("node bootstrap: listing nodes: %v", err)
		}
		return
	}
	existing := map[string]*corev1.Node{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	var work []nodeSpec
	for _, sp := range specs {
		if sp.err != "" {
			if nb.failed[sp.instanceID] != sp.err {
				nb.failed[sp.instanceID] = sp.err
				nb.s.logf("node bootstrap: instance %s: kubelet cannot start: %s", sp.instanceID, sp.err)
			}
			continue
		}
		cur, found := existing[sp.node.Name]
		switch {
		case sp.remove && found && cur.Annotations[InstanceAnnotation] == sp.instanceID: // the instance's own Node goes
			work = append(work, sp)
		case !sp.remove && !found: // a running kubelet (re-)registers its Node whenever it is missing
			work = append(work, sp)
		}
	}
	// Each instance has its own kubelet: Nodes register (and go) side by side, not one after
	// another (25–50 ms each on a busy API server: the last of 18 came half a second late).
	workqueue.ParallelizeUntil(ctx, bootstrapParallelism, len(work), func(i int) { nb.apply(ctx, work[i]) })
}

// bootstrapParallelism bounds the Node writes of one sync.
const bootstrapParallelism = 16

// apply registers or deletes one instance's Node.
func (nb *nodeBootstrapper) apply(ctx context.Context, sp nodeSpec) {
	name := sp.node.Name
	if sp.remove {
		if err := nb.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			nb.s.logf("node bootstrap: deleting node %s: %v", name, err)
		} else if err == nil {
			nb.s.logf("node bootstrap: deleted node %s (instance %s terminated)", name, sp.instanceID)
		}
		return
	}
	if _, err := nb.client.CoreV1().Nodes().Create(ctx, sp.node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		nb.s.logf("node bootstrap: registering node %s: %v", name, err)
	} else if err == nil {
		nb.s.logf("node bootstrap: registered node %s for %s (%s)", name, sp.instanceID, sp.node.Spec.ProviderID)
	}
}

// kubeletAllowedLabel reports whether the kubelet accepts a label in --node-labels (the
// NodeRestriction rules: no kubernetes.io or k8s.io labels except the well-known ones and the
// kubelet.kubernetes.io and node.kubernetes.io namespaces).
func kubeletAllowedLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	ns = strings.ToLower(ns)
	restricted := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
	if !restricted {
		return true
	}
	if ns == "kubelet.kubernetes.io" || strings.HasSuffix(ns, ".kubelet.kubernetes.io") || ns == "node.kubernetes.io" || strings.HasSuffix(ns, ".node.kubernetes.io") {
		return true
	}
	switch key {
	case corev1.LabelHostname, corev1.LabelArchStable, corev1.LabelOSStable, corev1.LabelInstanceTypeStable, corev1.LabelInstanceType,
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch", corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion:
		return true
	}
	return false
}

// kubeletNode builds the Node the instance's kubelet registers. Call with s.mu.
// drives reports whether the image has the drivers and device plugin that make a node offer
// the accelerator resource: GPUs need an NVIDIA image, Neuron devices a Neuron-capable one
// (AL2023's Neuron variant, AL2's GPU image, Bottlerocket's standard x86_64 image), as
// Karpenter's AMI variants say. An image of the account's own (Custom) is trusted to have them.
func (im *image) drives(r catalog.Resource) bool {
	if im == nil || im.family == familyCustom || im.family == "" {
		return true
	}
	switch r {
	case catalog.NvidiaGPU, catalog.AMDGPU, catalog.HabanaGaudi:
		return im.variant == "nvidia"
	case catalog.Neuron, catalog.NeuronCore:
		return im.variant == "neuron" || im.family == familyAL2 && im.variant == "nvidia" ||
			im.family == familyBottlerocket && im.variant == "standard" && im.arch == "amd64"
	}
	return true
}

func (s *Server) kubeletNode(in *instance) (*corev1.Node, error) {
	bs, err := parseUserData(in.userData)
	if err != nil {
		return nil, err
	}
	for k := range bs.labels {
		if !kubeletAllowedLabel(k) {
			return nil, fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [%s]", k)
		}
	}
	family := in.image.family
	if family == familyCustom || family == "" {
		family = bs.family
	}
	if family == "Windows" { // a custom image bootstrapped as Windows: the current build
		family = catalog.AMIFamilyWindows2022
	}
	build, windows := catalog.WindowsBuild(family)
	opts := catalog.NodeClassOptions{AMIFamily: family, Kubelet: bs.kubelet}
	if family == "" {
		opts.AMIFamily = catalog.AMIFamilyAL2023
	}
	// The volume that holds the kubelet root: the root device, or Bottlerocket's data volume.
	dev := "/dev/xvda"
	switch {
	case family == catalog.AMIFamilyBottlerocket:
		dev = "/dev/xvdb"
	case windows:
		dev = "/dev/sda1"
	}
	if size, ok := in.rootSizeGiB[dev]; ok && size > 0 {
		opts.RootVolumeSize = int64(size) * catalog.Gi
	}
	it, ok := s.catalog.InstanceType(in.spec.Name, opts)
	if !ok {
		return nil, fmt.Errorf("instance type %s is not in the catalog", in.spec.Name)
	}
	labels := map[string]string{}
	for k, v := range bs.labels {
		labels[k] = v
	}
	for k, v := range map[string]string{
		corev1.LabelHostname: in.dnsName, corev1.LabelArchStable: in.spec.Arch, corev1.LabelOSStable: "linux",
		"beta.kubernetes.io/arch": in.spec.Arch, "beta.kubernetes.io/os": "linux",
		corev1.LabelInstanceTypeStable: in.spec.Name, corev1.LabelTopologyZone: in.zone.name,
		corev1.LabelTopologyRegion: s.opts.Region, labelZoneID: in.zone.id,
		// The cloud controller manager still sets the deprecated beta labels, and the EBS CSI
		// driver its topology key.
		corev1.LabelInstanceType: in.spec.Name, corev1.LabelFailureDomainBetaZone: in.zone.name,
		corev1.LabelFailureDomainBetaRegion: s.opts.Region, "topology.ebs.csi.aws.com/zone": in.zone.name,
	} {
		labels[k] = v
	}
	osName := "linux"
	if windows {
		// The kubelet on Windows labels its OS and build itself.
		osName = "windows"
		labels[corev1.LabelWindowsBuild] = build
	}
	labels[corev1.LabelOSStable], labels["beta.kubernetes.io/os"] = osName, osName
	capacity, allocatable := corev1.ResourceList{}, corev1.ResourceList{}
	for r := catalog.Resource(0); r < catalog.NumResources; r++ {
		name := corev1.ResourceName(catalog.ResourceNames[r])
		c, a := it.Capacity[r], it.Allocatable[r]
		if c == 0 && r > catalog.Pods || !in.image.drives(r) {
			continue
		}
		switch r {
		case catalog.CPU:
			capacity[name] = *resource.NewMilliQuantity(c, resource.DecimalSI)
			allocatable[name] = *resource.NewMilliQuantity(a, resource.DecimalSI)
		case catalog.Memory, catalog.EphemeralStorage:
			capacity[name] = *resource.NewQuantity(c, resource.BinarySI)
			allocatable[name] = *resource.NewQuantity(a, resource.BinarySI)
		default:
			capacity[name] = *resource.NewQuantity(c, resource.DecimalSI)
			allocatable[name] = *resource.NewQuantity(a, resource.DecimalSI)
		}
	}
	// vpc.amazonaws.com/efa comes from the EFA device plugin, which offers the interfaces the
	// instance was launched with, not the most its type could have.
	efa := corev1.ResourceName(catalog.ResourceNames[catalog.EFA])
	delete(capacity, efa)
	delete(allocatable, efa)
	if in.efa > 0 {
		capacity[efa] = *resource.NewQuantity(int64(in.efa), resource.DecimalSI)
		allocatable[efa] = capacity[efa]
	}
	for _, hp := range []corev1.ResourceName{"hugepages-1Gi", "hugepages-2Mi"} {
		capacity[hp] = resource.MustParse("0")
		allocatable[hp] = resource.MustParse("0")
	}
	taints := append([]corev1.Taint(nil), bs.taints...)
	sort.SliceStable(taints, func(i, j int) bool { return taints[i].Key < taints[j].Key })
	osImage, kernel := "Amazon Linux 2023.9.20261101", "6.12.40-63.114.amzn2023."+archSuffix(in.spec.Arch)
	switch family {
	case catalog.AMIFamilyAL2:
		osImage, kernel = "Amazon Linux 2", "5.10.240-238.959.amzn2."+archSuffix(in.spec.Arch)
	case catalog.AMIFamilyBottlerocket:
		osImage, kernel = "Bottlerocket OS 1.50.0 (aws-k8s-"+s.opts.KubernetesVersion+")", "6.12.40"
	}
	if windows {
		osImage, kernel = "Windows Server "+strings.TrimPrefix(family, "Windows")+" Datacenter", build+".4294"
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   in.dnsName,
			Labels: labels,
			Annotations: map[string]string{
				KwokNodeAnnotation:                                       "fake",
				InstanceAnnotation:                                       in.id,
				"alpha.kubernetes.io/provided-node-ip":                   in.privateIP,
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: providerID(in), Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: in.privateIP},
				{Type: corev1.NodeInternalDNS, Address: in.dnsName},
				{Type: corev1.NodeHostName, Address: in.dnsName},
			},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: strings.ReplaceAll(in.id, "-", "") + "0000000000000000", SystemUUID: "ec2" + strings.TrimPrefix(in.id, "i-"),
				BootID: "awssim-" + in.id, KernelVersion: kernel, OSImage: osImage, ContainerRuntimeVersion: "containerd://2.1.4",
				KubeletVersion: "v" + s.opts.KubernetesVersion + ".0-eks", KubeProxyVersion: "", OperatingSystem: osName, Architecture: in.spec.Arch,
			},
		},
	}
	return node, nil
}

func archSuffix(arch string) string {
	if arch == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}
