package metrics

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/state"
)

// The operator_*_status_condition_* family: what Karpenter's status controllers (operatorpkg)
// report about the conditions of NodeClaims, NodePools, Nodes and EC2NodeClasses. Per kind,
// operator_<kind>_status_condition_count (1 per object, condition and its status and reason),
// _current_status_seconds (time since the condition's last transition), _transitions_total and
// _transition_seconds (time spent in the status left); the older operator_status_condition_*
// names, with group and kind labels, are served too for the kinds Karpenter still serves them
// for.

// condition is a status condition of any kind.
type condition struct {
	Type, Status, Reason string
	Since                time.Time
}

// conditionKind describes one kind's metrics.
type conditionKind struct {
	metric, group, kind string
	// extra are object label keys copied onto the metrics (as snake-cased label names).
	extra []string
	// deprecated: the kind is also counted under the operator_status_condition_* names.
	deprecated bool
	buckets    []float64

	count, current *prometheus.Desc
}

var (
	nodeClaimKind = newConditionKind("nodeclaim", karpv1.GroupVersion.Group, "NodeClaim", true,
		prometheus.ExponentialBuckets(0.5, 2, 15), awsv1.LabelNodeClass, karpv1.LabelNodePool)
	nodePoolKind  = newConditionKind("nodepool", karpv1.GroupVersion.Group, "NodePool", true, prometheus.ExponentialBuckets(0.5, 2, 15))
	nodeClassKind = newConditionKind("ec2nodeclass", awsv1.GroupVersion.Group, "EC2NodeClass", true, prometheus.DefBuckets)
	nodeKind      = newConditionKind("node", "", "Node", false,
		prometheus.ExponentialBuckets(0.5, 2, 15), awsv1.LabelNodeClass, karpv1.LabelNodePool, karpv1.LabelNodeInitialized)

	conditionKinds = []*conditionKind{nodeClaimKind, nodePoolKind, nodeClassKind, nodeKind}

	gaugeLabels       = []string{"namespace", "name", "type", "status", labelReason}
	deprecatedCount   = conditionGauge("operator_status_condition_count", append(gaugeLabels, "group", "kind"))
	deprecatedCurrent = conditionCurrent("operator_status_condition_current_status_seconds", append(gaugeLabels, "group", "kind"))
)

func newConditionKind(metric, group, kind string, deprecated bool, buckets []float64, extra ...string) *conditionKind {
	k := &conditionKind{metric: metric, group: group, kind: kind, extra: extra, deprecated: deprecated, buckets: buckets}
	labels := append(append([]string{}, gaugeLabels...), k.extraNames()...)
	k.count = conditionGauge("operator_"+metric+"_status_condition_count", labels)
	k.current = conditionCurrent("operator_"+metric+"_status_condition_current_status_seconds", labels)
	return k
}

func conditionGauge(name string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, "1 for each object, condition type, status and reason.", labels, nil)
}

func conditionCurrent(name string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, "Time since the condition last changed status, per object and condition type.", labels, nil)
}

// extraNames are the metric labels of the extra object labels (operatorpkg's spelling: "/",
// "." and "-" become "_").
func (k *conditionKind) extraNames() []string {
	out := make([]string, len(k.extra))
	for i, key := range k.extra {
		out[i] = strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(key)
	}
	return out
}

// extraValues are the object's values of the extra labels.
func (k *conditionKind) extraValues(obj client.Object) []string {
	out := make([]string, len(k.extra))
	for i, key := range k.extra {
		out[i] = obj.GetLabels()[key]
	}
	return out
}

// conditionsOf returns an object's kind and conditions (nil kind for other objects).
func conditionsOf(obj client.Object) (*conditionKind, []condition) {
	switch o := obj.(type) {
	case *karpv1.NodeClaim:
		out := make([]condition, len(o.Status.Conditions))
		for i, c := range o.Status.Conditions {
			out[i] = condition{c.Type, string(c.Status), c.Reason, c.LastTransitionTime.Time}
		}
		return nodeClaimKind, out
	case *karpv1.NodePool:
		return nodePoolKind, metaConditions(o.Status.Conditions)
	case *awsv1.EC2NodeClass:
		return nodeClassKind, metaConditions(o.Status.Conditions)
	case *corev1.Node:
		out := make([]condition, len(o.Status.Conditions))
		for i, c := range o.Status.Conditions {
			out[i] = condition{string(c.Type), string(c.Status), c.Reason, c.LastTransitionTime.Time}
		}
		return nodeKind, out
	}
	return nil, nil
}

func metaConditions(cs []metav1.Condition) []condition {
	out := make([]condition, len(cs))
	for i, c := range cs {
		out[i] = condition{c.Type, string(c.Status), c.Reason, c.LastTransitionTime.Time}
	}
	return out
}

// conditionSamples computes the count and current-status gauges of every object's conditions.
func conditionSamples(c *state.Cluster, now time.Time) []sample {
	var objs []client.Object
	for _, o := range c.NodeClaims {
		objs = append(objs, o)
	}
	for _, o := range c.NodePools {
		objs = append(objs, o)
	}
	for _, o := range c.NodeClasses {
		objs = append(objs, o)
	}
	for _, o := range c.Nodes {
		objs = append(objs, o)
	}
	var out []sample
	for _, obj := range objs {
		kind, conds := conditionsOf(obj)
		extra := kind.extraValues(obj)
		for _, cond := range conds {
			base := []string{obj.GetNamespace(), obj.GetName(), cond.Type, cond.Status, cond.Reason}
			labels := append(base[:len(base):len(base)], extra...)
			out = append(out, sample{kind.count, 1, labels})
			if !cond.Since.IsZero() {
				out = append(out, sample{kind.current, now.Sub(cond.Since).Seconds(), labels})
			}
			if !kind.deprecated {
				continue
			}
			old := append(base[:len(base):len(base)], kind.group, kind.kind)
			out = append(out, sample{deprecatedCount, 1, old})
			if !cond.Since.IsZero() {
				out = append(out, sample{deprecatedCurrent, now.Sub(cond.Since).Seconds(), old})
			}
		}
	}
	return out
}
