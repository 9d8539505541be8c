package schedulingcheck

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/scheduling"
)

// volumeViolation explains why a node cannot hold a pod's volumes ("" if it can): a claim bound
// to a volume whose node affinity the node does not match (a local or hostPath volume's
// hostname aside, as Karpenter ignores it), an unbound claim whose storage class's allowed
// topologies leave the node out, or a claim, volume or class that does not exist.
func (c *checker) volumeViolation(p *corev1.Pod, n *node) string {
	for _, vol := range p.Spec.Volumes {
		name := ""
		switch {
		case vol.PersistentVolumeClaim != nil:
			name = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			name = p.Name + "-" + vol.Name
		default:
			continue
		}
		pvc := c.find(p.Namespace, name)
		if pvc == nil {
			return fmt.Sprintf("claim %s/%s does not exist", p.Namespace, name)
		}
		if why := c.claimViolation(pvc, n.obj); why != "" {
			return fmt.Sprintf("claim %s/%s: %s", p.Namespace, name, why)
		}
	}
	return ""
}

func (c *checker) claimViolation(pvc *corev1.PersistentVolumeClaim, n *corev1.Node) string {
	if pvc.Spec.VolumeName != "" {
		var pv *corev1.PersistentVolume
		for _, v := range c.in.PersistentVolumes {
			if v != nil && v.Name == pvc.Spec.VolumeName {
				pv = v
			}
		}
		if pv == nil {
			return "volume " + pvc.Spec.VolumeName + " does not exist"
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			return ""
		}
		sel := pv.Spec.NodeAffinity.Required.DeepCopy()
		if pv.Spec.Local != nil || pv.Spec.HostPath != nil {
			for i := range sel.NodeSelectorTerms {
				t := &sel.NodeSelectorTerms[i]
				kept := t.MatchExpressions[:0]
				for _, e := range t.MatchExpressions {
					if e.Key != corev1.LabelHostname {
						kept = append(kept, e)
					}
				}
				t.MatchExpressions = kept
			}
		}
		if ok, _ := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(n); !ok {
			return "the node is outside volume " + pv.Name + "'s node affinity"
		}
		return ""
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return ""
	}
	for _, sc := range c.in.StorageClasses {
		if sc == nil || sc.Name != *pvc.Spec.StorageClassName {
			continue
		}
		if len(sc.AllowedTopologies) == 0 {
			return ""
		}
		for _, t := range sc.AllowedTopologies {
			match := true
			for _, e := range t.MatchLabelExpressions {
				v, ok := n.Labels[e.Key]
				match = match && ok && contains(e.Values, v)
			}
			if match {
				return ""
			}
		}
		return "the node is outside storage class " + sc.Name + "'s allowed topologies"
	}
	return "storage class " + *pvc.Spec.StorageClassName + " does not exist"
}

func (c *checker) find(ns, name string) *corev1.PersistentVolumeClaim {
	for _, pvc := range c.in.PersistentVolumeClaims {
		if pvc != nil && pvc.Namespace == ns && pvc.Name == name {
			return pvc
		}
	}
	return nil
}

func contains(vals []string, v string) bool {
	for _, x := range vals {
		if x == v {
			return true
		}
	}
	return false
}

// checkOfferingVolumes: wherever a NodeClaim may launch as the type, its pods' volumes can be
// attached (a NodeClaim may launch in any zone it lists).
func (c *checker) checkOfferingVolumes(nc *scheduling.NodeClaim, pool *scheduling.Pool, it *catalog.InstanceType, offs []catalog.Offering) {
	for _, p := range nc.Pods {
		if len(p.Spec.Volumes) == 0 {
			continue
		}
		for _, o := range offs {
			obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: c.newNodeLabels(pool, it, o.Zone, o.CapacityType, nc.Name)}}
			if why := c.volumeViolation(p, &node{obj: obj}); why != "" {
				c.fail("nodeclaim %s: pod %s on %s in %s: %s", nc.Name, podName(p), it.Name, o.Zone, why)
				return
			}
		}
	}
}
