package up

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/testbed/loadsim"
)

// The hpa example's objects (examples/hpa).
const (
	backend     = "backend"
	backendPool = "default"
	lowLoad     = "100m"
	highLoad    = "20"
)

// hpaSteps are seed 002's point, shown: the backend's HPA follows the load with pods, karpool
// follows the pods with t3.small nodes up to the pool's limit, and back down.
func (d *demo) hpaSteps() []demoStep {
	annotate := fmt.Sprintf("kubectl annotate deployment/%s %s=%%s --overwrite", backend, loadsim.LoadAnnotation)
	return []demoStep{
		{fmt.Sprintf("the backend at its low load (%s=%s)", loadsim.LoadAnnotation, lowLoad), 3 * time.Minute, d.atLowLoad},
		{fmt.Sprintf(annotate, highLoad), 4 * time.Minute, d.loadRises},
		{fmt.Sprintf(annotate, lowLoad), 8 * time.Minute, d.loadFalls},
	}
}

// hpaView is what the demo reads back after each change.
type hpaView struct {
	desired, max        int32 // the HPA's desired and maximum replicas
	utilization         int32 // the CPU the HPA measured, in % of the request
	measured            bool
	running, pending    int // the backend's pods
	claims, initialized int // karpool's NodeClaims, and how many of them are initialized
	limitNodes          int // nodes the pool's cpu limit allows, from its limit and a node's capacity
	limitEvent          string
}

// atLowLoad waits until the HPA measures the one backend pod, which runs on one t3.small.
func (d *demo) atLowLoad(ctx context.Context) (string, error) {
	v, err := d.settle(ctx, "", func(v hpaView) error {
		if !v.measured || v.running != 1 || v.claims != 1 || v.initialized != 1 {
			return fmt.Errorf("HPA measured: %t; %d backend pods running; %d NodeClaims, %d initialized", v.measured, v.running, v.claims, v.initialized)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("HPA %s: 1 replica at %d%% of its cpu request (target 50%%), on one t3.small", backend, v.utilization), nil
}

// loadRises raises the load: the HPA asks for its maximum, karpool launches t3.small nodes up to
// the pool's cpu limit and no further, and the pods that do not fit stay pending, the limit named.
func (d *demo) loadRises(ctx context.Context) (string, error) {
	v, err := d.settle(ctx, highLoad, func(v hpaView) error {
		if v.desired != v.max || v.running+v.pending != int(v.desired) || v.claims != v.limitNodes || v.initialized != v.claims || v.pending == 0 || v.limitEvent == "" {
			return fmt.Errorf("HPA wants %d; %d backend pods running, %d pending; %d of %d NodeClaims, %d initialized; limit event: %t",
				v.desired, v.running, v.pending, v.claims, v.limitNodes, v.initialized, v.limitEvent != "")
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(d.out, "  a pending pod's event: %s\n", v.limitEvent)
	return fmt.Sprintf("HPA %s: %d replicas (it measured %d%% of the cpu request); %d Running on %d t3.small nodes, the pool's limit; %d Pending",
		backend, v.desired, v.utilization, v.running, v.claims, v.pending), nil
}

// loadFalls lowers the load: the HPA goes back to one replica and karpool consolidates the
// emptied nodes away, down to the one node the backend needs.
func (d *demo) loadFalls(ctx context.Context) (string, error) {
	_, err := d.settle(ctx, lowLoad, func(v hpaView) error {
		if v.desired != 1 || v.running != 1 || v.pending != 0 || v.claims != 1 {
			return fmt.Errorf("HPA wants %d; %d backend pods running, %d pending; %d NodeClaims left", v.desired, v.running, v.pending, v.claims)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("HPA %s: back to 1 replica; the emptied nodes consolidated away, one t3.small left", backend), nil
}

// settle sets the load (unless empty), waits until settled accepts what the demo reads back (the
// NodeClaims never beyond the pool's limit meanwhile), and shows the nodes.
func (d *demo) settle(ctx context.Context, load string, settled func(hpaView) error) (hpaView, error) {
	if load != "" {
		if err := d.setLoad(ctx, load); err != nil {
			return hpaView{}, err
		}
	}
	var v hpaView
	err := poll(ctx, func() (err error) {
		if v, err = d.readHPA(ctx); err != nil {
			return err
		}
		if v.limitNodes > 0 && v.claims > v.limitNodes {
			return fmt.Errorf("%d NodeClaims, beyond the %d the pool's limit allows", v.claims, v.limitNodes)
		}
		return settled(v)
	})
	if err != nil {
		return v, err
	}
	return v, d.showNodes(ctx)
}

// setLoad sets the backend's load, as `kubectl annotate --overwrite` does.
func (d *demo) setLoad(ctx context.Context, load string) error {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: backend}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, loadsim.LoadAnnotation, load)
	return d.c.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// readHPA reads the HPA, the backend's pods, karpool's NodeClaims, the pool's limit and the
// provisioner's events about the limit.
func (d *demo) readHPA(ctx context.Context) (hpaView, error) {
	var v hpaView
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: backend}, hpa); err != nil {
		return v, err
	}
	v.desired, v.max = hpa.Status.DesiredReplicas, hpa.Spec.MaxReplicas
	for _, m := range hpa.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			v.measured, v.utilization = true, *m.Resource.Current.AverageUtilization
		}
	}
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(metav1.NamespaceDefault), client.MatchingLabels{"app": backend}); err != nil {
		return v, err
	}
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodRunning:
			v.running++
		case p.Status.Phase == corev1.PodPending:
			v.pending++
		}
	}
	var claims karpv1.NodeClaimList
	if err := d.c.List(ctx, &claims); err != nil {
		return v, err
	}
	v.claims = len(claims.Items)
	var nodeCPU int64
	for _, nc := range claims.Items {
		if c := nc.Status.Capacity.Cpu(); !c.IsZero() {
			nodeCPU = c.MilliValue()
		}
		for _, cond := range nc.Status.Conditions {
			if cond.Type == karpv1.ConditionTypeInitialized && cond.Status == metav1.ConditionTrue {
				v.initialized++
			}
		}
	}
	np := &karpv1.NodePool{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: backendPool}, np); err != nil {
		return v, err
	}
	if limit, ok := np.Spec.Limits[corev1.ResourceCPU]; ok && nodeCPU > 0 {
		v.limitNodes = int(limit.MilliValue() / nodeCPU)
	}
	var events corev1.EventList
	if err := d.c.List(ctx, &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		return v, err
	}
	for _, e := range events.Items {
		if e.Reason == "FailedScheduling" && strings.Contains(e.Message, fmt.Sprintf("nodepool %q limits exceeded", backendPool)) {
			v.limitEvent = e.Message
		}
	}
	return v, nil
}
