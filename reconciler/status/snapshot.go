package status

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// Workload is what the snapshot is made of, besides the pods.
type Workload struct {
	DaemonSets []appsv1.DaemonSet
	HPAs       []autoscalingv2.HorizontalPodAutoscaler
}

// Snapshot writes the workload of the pools as Kubernetes YAML that `karpool simulate` and
// `karpool plan` read: one Deployment or StatefulSet per owner and pod shape, with the replica
// count, the pods' labels, resources and scheduling constraints (node selector, affinity,
// tolerations, topology spread); the DaemonSets' resources and constraints; and each
// HorizontalPodAutoscaler's target and replica range. Nothing else leaves the cluster: no
// images, commands, environment, volumes, annotations or pod names. pods are the pods the
// report counted (on the pools' nodes, and pending).
func Snapshot(header string, pods []corev1.Pod, w Workload) []byte {
	var docs []any
	for _, g := range groupPods(pods) {
		docs = append(docs, g.manifest())
	}
	dss := append([]appsv1.DaemonSet(nil), w.DaemonSets...)
	sort.Slice(dss, func(i, j int) bool { return dss[i].Namespace+"/"+dss[i].Name < dss[j].Namespace+"/"+dss[j].Name })
	for i := range dss {
		docs = append(docs, daemonSet(&dss[i]))
	}
	hpas := append([]autoscalingv2.HorizontalPodAutoscaler(nil), w.HPAs...)
	sort.Slice(hpas, func(i, j int) bool { return hpas[i].Namespace+"/"+hpas[i].Name < hpas[j].Namespace+"/"+hpas[j].Name })
	for i := range hpas {
		docs = append(docs, hpa(&hpas[i]))
	}
	var b bytes.Buffer
	for _, line := range strings.Split(header, "\n") {
		b.WriteString("# " + line + "\n")
	}
	for _, d := range docs {
		data, err := sigsyaml.Marshal(d)
		if err != nil {
			panic(err) // maps of strings, numbers and API structs always marshal
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes()
}

// podGroup is the pods of one owner with one shape.
type podGroup struct {
	kind, namespace, name string
	shape                 map[string]any // the pod template's spec, as JSON values
	labels                map[string]string
	count                 int
	key                   string
}

// groupPods groups pods by owner and shape, in a stable order; an owner with several shapes
// gets -2, -3... after its name.
func groupPods(pods []corev1.Pod) []*podGroup {
	byKey := map[string]*podGroup{}
	for i := range pods {
		p := &pods[i]
		kind, name := ownerOf(p)
		if kind == "DaemonSet" {
			continue // the DaemonSet itself is in the snapshot
		}
		labels := map[string]string{}
		for k, v := range p.Labels {
			if k != appsv1.DefaultDeploymentUniqueLabelKey && k != appsv1.ControllerRevisionHashLabelKey && k != appsv1.StatefulSetPodNameLabel {
				labels[k] = v
			}
		}
		shape := podShape(&p.Spec)
		data, _ := json.Marshal(map[string]any{"labels": labels, "spec": shape})
		sum := sha256.Sum256(data)
		key := fmt.Sprintf("%s/%s/%s/%x", kind, p.Namespace, name, sum[:8])
		g := byKey[key]
		if g == nil {
			g = &podGroup{kind: kind, namespace: p.Namespace, name: name, shape: shape, labels: labels, key: key}
			byKey[key] = g
		}
		g.count++
	}
	out := make([]*podGroup, 0, len(byKey))
	for _, g := range byKey {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	seen := map[string]int{}
	for _, g := range out {
		id := g.kind + "/" + g.namespace + "/" + g.name
		if seen[id]++; seen[id] > 1 {
			g.name = fmt.Sprintf("%s-%d", g.name, seen[id])
		}
	}
	return out
}

// ownerOf names what a pod's replicas come from: the Deployment of its ReplicaSet, its
// StatefulSet, DaemonSet or Job, or "pods" for pods of no controller.
func ownerOf(p *corev1.Pod) (kind, name string) {
	for _, ref := range p.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		switch ref.Kind {
		case "ReplicaSet":
			if hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; hash != "" && strings.HasSuffix(ref.Name, "-"+hash) {
				return "Deployment", strings.TrimSuffix(ref.Name, "-"+hash)
			}
			return "ReplicaSet", ref.Name
		case "StatefulSet", "DaemonSet":
			return ref.Kind, ref.Name
		default:
			return "Deployment", strings.ToLower(ref.Kind) + "-" + ref.Name
		}
	}
	return "Deployment", "pods"
}

// podShape keeps what scheduling reads of a pod spec: resources, overhead, node selector,
// affinity, tolerations and topology spread. Containers are renamed c0, c1...
func podShape(s *corev1.PodSpec) map[string]any {
	ctrs := func(cs []corev1.Container) []any {
		out := make([]any, 0, len(cs))
		for i, c := range cs {
			ctr := map[string]any{"name": fmt.Sprintf("c%d", i), "resources": c.Resources}
			if c.RestartPolicy != nil {
				ctr["restartPolicy"] = *c.RestartPolicy
			}
			out = append(out, ctr)
		}
		return out
	}
	shape := map[string]any{"containers": ctrs(s.Containers)}
	if len(s.InitContainers) > 0 {
		shape["initContainers"] = ctrs(s.InitContainers)
	}
	set := func(key string, v any, present bool) {
		if present {
			shape[key] = v
		}
	}
	set("resources", s.Resources, s.Resources != nil)
	set("overhead", s.Overhead, len(s.Overhead) > 0)
	set("nodeSelector", s.NodeSelector, len(s.NodeSelector) > 0)
	set("affinity", s.Affinity, s.Affinity != nil)
	set("tolerations", s.Tolerations, len(s.Tolerations) > 0)
	set("topologySpreadConstraints", s.TopologySpreadConstraints, len(s.TopologySpreadConstraints) > 0)
	// Round-trip through JSON so that the shape hashes and prints as plain values.
	data, _ := json.Marshal(shape)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

func (g *podGroup) manifest() map[string]any {
	kind := g.kind
	if kind != "StatefulSet" {
		kind = "Deployment"
	}
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": g.name, "namespace": g.namespace},
		"spec": map[string]any{
			"replicas": g.count,
			"selector": map[string]any{"matchLabels": g.labels},
			"template": map[string]any{"metadata": map[string]any{"labels": g.labels}, "spec": g.shape},
		},
	}
}

func daemonSet(ds *appsv1.DaemonSet) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "DaemonSet",
		"metadata":   map[string]any{"name": ds.Name, "namespace": ds.Namespace},
		"spec": map[string]any{
			"selector": ds.Spec.Selector,
			"template": map[string]any{"metadata": map[string]any{"labels": ds.Spec.Template.Labels}, "spec": podShape(&ds.Spec.Template.Spec)},
		},
	}
}

func hpa(h *autoscalingv2.HorizontalPodAutoscaler) map[string]any {
	spec := map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": h.Spec.ScaleTargetRef.APIVersion, "kind": h.Spec.ScaleTargetRef.Kind, "name": h.Spec.ScaleTargetRef.Name},
		"maxReplicas":    h.Spec.MaxReplicas,
	}
	if h.Spec.MinReplicas != nil {
		spec["minReplicas"] = *h.Spec.MinReplicas
	}
	return map[string]any{
		"apiVersion": "autoscaling/v2",
		"kind":       "HorizontalPodAutoscaler",
		"metadata":   map[string]any{"name": h.Name, "namespace": h.Namespace},
		"spec":       spec,
	}
}
