// Package loadsim plays the load on the local environment's workloads, so that a real
// HorizontalPodAutoscaler has something to scale on. A Deployment annotated
// karpool.dev/cpu-load (a quantity: "20", "1500m") is asked for that much CPU in total, shared
// evenly by its running pods: each pod gets its share in the annotation kwok.x-k8s.io/usage-cpu,
// which kwok's simulated kubelet reports as its containers' usage (localenv's kwok-metrics.yaml),
// metrics-server scrapes and the HPA controller reads. As with real traffic, more replicas means
// less CPU each, so the HPA settles where the load needs it. Raising the load is one
// `kubectl annotate`.
package loadsim

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpool/karpool/internal/periodic"
)

const (
	// LoadAnnotation on a Deployment is the CPU its pods are asked for in total.
	LoadAnnotation = "karpool.dev/cpu-load"
	// UsageAnnotation on a pod is what kwok reports each of its containers uses.
	UsageAnnotation = "kwok.x-k8s.io/usage-cpu"
)

// Share is the usage one pod should report.
type Share struct {
	Pod   types.NamespacedName
	Usage string // "" removes the annotation (kwok's default)
}

// Shares computes what each of a Deployment's pods should report (pure). With the load
// annotation, the running pods share the load evenly, each container of a pod taking an equal
// part of the pod's share (kwok applies the annotation to every container); without it, pods
// whose usage the simulator wrote before go back to kwok's default. Only pods whose annotation
// must change are returned. An unreadable load is an error naming the Deployment.
func Shares(d *appsv1.Deployment, pods []corev1.Pod) ([]Share, error) {
	raw, loaded := d.Annotations[LoadAnnotation]
	var running []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	var out []Share
	if !loaded {
		for _, p := range running {
			if _, ok := p.Annotations[UsageAnnotation]; ok {
				out = append(out, Share{Pod: client.ObjectKeyFromObject(&p)})
			}
		}
		return out, nil
	}
	total, err := resource.ParseQuantity(raw)
	if err != nil || total.Sign() < 0 {
		return nil, fmt.Errorf("deployment %s/%s: annotation %s=%q is not a CPU quantity (e.g. \"20\" or \"1500m\")", d.Namespace, d.Name, LoadAnnotation, raw)
	}
	for _, p := range running {
		containers := int64(max(len(p.Spec.Containers), 1))
		milli := total.MilliValue() / int64(len(running)) / containers
		// kwok's metrics-server ignores a container that used nothing: never report 0.
		usage := resource.NewMilliQuantity(max(milli, 1), resource.DecimalSI).String()
		if p.Annotations[UsageAnnotation] != usage {
			out = append(out, Share{Pod: client.ObjectKeyFromObject(&p), Usage: usage})
		}
	}
	return out, nil
}

// Run applies the shares of every Deployment every interval until ctx ends.
func Run(ctx context.Context, c client.Client, interval time.Duration) error {
	return periodic.Run(ctx, "loadsim", interval, func(ctx context.Context) error { return Apply(ctx, c) })
}

// Apply writes the shares of every Deployment once.
func Apply(ctx context.Context, c client.Client) error {
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments); err != nil {
		return err
	}
	for i := range deployments.Items {
		d := &deployments.Items[i]
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return err
		}
		shares, err := Shares(d, pods.Items)
		if err != nil {
			log.FromContext(ctx).Error(err, "load not applied")
			continue
		}
		for _, s := range shares {
			if err := annotate(ctx, c, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// annotate sets (or removes) a pod's usage annotation with a merge patch.
func annotate(ctx context.Context, c client.Client, s Share) error {
	value := "null"
	if s.Usage != "" {
		value = fmt.Sprintf("%q", s.Usage)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.Pod.Namespace, Name: s.Pod.Name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, UsageAnnotation, value)
	return client.IgnoreNotFound(c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(patch))))
}
