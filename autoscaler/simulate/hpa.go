package simulate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// owner is a Deployment, ReplicaSet or StatefulSet of the workload: its replicas are the pods
// w.pods[start:start+replicas].
type owner struct {
	kind, namespace, name string
	template              corev1.PodTemplateSpec
	sts                   *statefulSetClaims
	start, replicas       int
}

// expand makes the replicas from..to-1, named <owner>-<i> as the workload names them.
func (o *owner) expand(from, to int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		p := &corev1.Pod{ObjectMeta: *o.template.ObjectMeta.DeepCopy(), Spec: *o.template.Spec.DeepCopy()}
		p.Name = fmt.Sprintf("%s-%d", o.name, i)
		p.Namespace = o.namespace
		if o.sts != nil {
			o.sts.addClaims(p)
		}
		pods = append(pods, p)
	}
	return pods
}

// HPA is a HorizontalPodAutoscaler of the workload and the replica count it scales between.
type HPA struct {
	// Target is Kind/namespace/name of what it scales.
	Target   string `json:"target"`
	Min, Max int    `json:"-"`
	// Replicas is the target's replica count in the workload (-1 when the target is not in it).
	Replicas int `json:"-"`
	where    string
}

// hpaOf reads the fields of a HorizontalPodAutoscaler (autoscaling/v1 and v2 share them).
func hpaOf(d *doc) (HPA, error) {
	var o struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			ScaleTargetRef struct{ Kind, Name string } `json:"scaleTargetRef"`
			MinReplicas    *int32                      `json:"minReplicas"`
			MaxReplicas    int32                       `json:"maxReplicas"`
		}
	}
	if err := yaml.Unmarshal(d.raw, &o); err != nil {
		return HPA{}, fmt.Errorf("%s: HorizontalPodAutoscaler %q: %w", d.where(), d.name, err)
	}
	ns := o.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	h := HPA{Target: o.Spec.ScaleTargetRef.Kind + "/" + ns + "/" + o.Spec.ScaleTargetRef.Name, Min: 1, Max: int(o.Spec.MaxReplicas), where: d.where()}
	if o.Spec.MinReplicas != nil {
		h.Min = int(*o.Spec.MinReplicas)
	}
	if h.Max < 1 || h.Min > h.Max {
		return HPA{}, fmt.Errorf("%s: HorizontalPodAutoscaler %q: minReplicas %d and maxReplicas %d: want 1 ≤ minReplicas ≤ maxReplicas", d.at("spec", "maxReplicas"), d.name, h.Min, h.Max)
	}
	return h, nil
}

// HPAs are the workload's HorizontalPodAutoscalers, each with its target's replica count.
func (w *Workload) HPAs() []HPA {
	out := make([]HPA, len(w.hpas))
	for i, h := range w.hpas {
		h.Replicas = -1
		if o := w.ownerOf(h.Target); o != nil {
			h.Replicas = o.replicas
		}
		out[i] = h
	}
	return out
}

func (w *Workload) ownerOf(target string) *owner {
	for _, o := range w.owners {
		if o.kind+"/"+o.namespace+"/"+o.name == target {
			return o
		}
	}
	return nil
}

// AtMax is the workload with every HPA's target at its maxReplicas: the worst case the pools
// must be ready for. The cap on pods still holds.
func (w *Workload) AtMax() (*Workload, error) {
	scaled := map[*owner]int{}
	total := len(w.pods)
	for _, h := range w.hpas {
		if o := w.ownerOf(h.Target); o != nil {
			scaled[o] = h.Max
			total += h.Max - o.replicas
		}
	}
	if total > w.maxPods {
		return nil, fmt.Errorf("every HorizontalPodAutoscaler at its maxReplicas makes %d pods, more than the %d karpool plans at most", total, w.maxPods)
	}
	out := *w
	out.pods = make([]*corev1.Pod, 0, total)
	out.owners = nil
	next := 0
	for _, o := range w.owners {
		out.pods = append(out.pods, w.pods[next:o.start]...)
		moved := *o
		moved.start = len(out.pods)
		if n, ok := scaled[o]; ok {
			moved.replicas = n
			out.pods = append(out.pods, w.pods[o.start:o.start+min(n, o.replicas)]...)
			out.pods = append(out.pods, o.expand(o.replicas, n)...)
		} else {
			out.pods = append(out.pods, w.pods[o.start:o.start+o.replicas]...)
		}
		out.owners = append(out.owners, &moved)
		next = o.start + o.replicas
	}
	out.pods = append(out.pods, w.pods[next:]...)
	return &out, nil
}
