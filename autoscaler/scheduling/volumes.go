package scheduling

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// maxVolumeAlternatives caps the combinations of volume topology terms one pod is tried with.
const maxVolumeAlternatives = 16

// volumeIndex holds the claims, volumes and storage classes of the input by name.
type volumeIndex struct {
	claims  map[string]*corev1.PersistentVolumeClaim // namespace/name
	volumes map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

// newVolumeIndex indexes the input's claims, volumes and storage classes.
func newVolumeIndex(in *Input) volumeIndex {
	var ix volumeIndex
	ix.claims = make(map[string]*corev1.PersistentVolumeClaim, len(in.PersistentVolumeClaims))
	for _, c := range in.PersistentVolumeClaims {
		if c != nil {
			ix.claims[c.Namespace+"/"+c.Name] = c
		}
	}
	ix.volumes = make(map[string]*corev1.PersistentVolume, len(in.PersistentVolumes))
	for _, v := range in.PersistentVolumes {
		if v != nil {
			ix.volumes[v.Name] = v
		}
	}
	ix.classes = make(map[string]*storagev1.StorageClass, len(in.StorageClasses))
	for _, c := range in.StorageClasses {
		if c != nil {
			ix.classes[c.Name] = c
		}
	}
	return ix
}

// volumeTerms returns the node requirements a pod's volumes add, as alternatives (OR; nil when
// its volumes constrain nothing): a claim bound to a volume takes the volume's node affinity
// terms, an unbound claim its storage class's allowed topologies. A pod with several such
// volumes must meet one term of each. A claim, volume or class that does not exist keeps the
// pod from being scheduled: the reason says which.
func (ix *volumeIndex) volumeTerms(pod *corev1.Pod) ([][]req, string) {
	alts := [][]req{nil}
	constrained := false
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var claim string
		switch {
		case vol.PersistentVolumeClaim != nil:
			claim = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claim = pod.Name + "-" + vol.Name // the claim the ephemeral volume controller creates
		default:
			continue
		}
		terms, why := ix.claimTerms(pod.Namespace, claim)
		if why != "" {
			return nil, why
		}
		if len(terms) == 0 {
			continue
		}
		constrained = true
		var next [][]req
		for _, a := range alts {
			for _, t := range terms {
				if len(next) < maxVolumeAlternatives {
					next = append(next, append(append([]req(nil), a...), t...))
				}
			}
		}
		alts = next
	}
	if !constrained {
		return nil, ""
	}
	return alts, ""
}

// claimTerms are the node requirement terms of one claim (OR).
func (ix *volumeIndex) claimTerms(ns, name string) ([][]req, string) {
	pvc := ix.claims[ns+"/"+name]
	if pvc == nil {
		return nil, fmt.Sprintf("persistent volume claim %s/%s does not exist", ns, name)
	}
	if pvc.Spec.VolumeName != "" {
		pv := ix.volumes[pvc.Spec.VolumeName]
		if pv == nil {
			return nil, fmt.Sprintf("persistent volume %s (bound to claim %s/%s) does not exist", pvc.Spec.VolumeName, ns, name)
		}
		return volumeAffinityTerms(pv), ""
	}
	sc := ""
	if pvc.Spec.StorageClassName != nil {
		sc = *pvc.Spec.StorageClassName
	}
	if sc == "" {
		return nil, ""
	}
	class := ix.classes[sc]
	if class == nil {
		return nil, fmt.Sprintf("storage class %q of claim %s/%s does not exist", sc, ns, name)
	}
	var terms [][]req
	for _, t := range class.AllowedTopologies {
		var term []req
		for _, e := range t.MatchLabelExpressions {
			term = append(term, newReq(e.Key, corev1.NodeSelectorOpIn, e.Values))
		}
		if len(term) > 0 {
			terms = append(terms, term)
		}
	}
	return mergeZoneTerms(terms), ""
}

// mergeZoneTerms joins terms that are each one `In` requirement on the same key (zones, written
// with the stable or the EBS CSI key) into one: a NodeClaim may then list the zones of all of
// them, as a single term listing them would allow, instead of trying each zone apart.
func mergeZoneTerms(terms [][]req) [][]req {
	if len(terms) < 2 {
		return terms
	}
	var vals []string
	for _, t := range terms {
		if len(t) != 1 || t[0].Operator != corev1.NodeSelectorOpIn || t[0].Key != terms[0][0].Key {
			return terms
		}
		vals = append(vals, t[0].Values...)
	}
	slices.Sort(vals)
	return [][]req{{newReq(terms[0][0].Key, corev1.NodeSelectorOpIn, slices.Compact(vals))}}
}

// volumeAffinityTerms are a volume's node affinity terms. The hostname of a local or hostPath
// volume is left out: a new node cannot have it, and such a pod moves without its data.
func volumeAffinityTerms(pv *corev1.PersistentVolume) [][]req {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	local := pv.Spec.Local != nil || pv.Spec.HostPath != nil
	var terms [][]req
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		term := []req{}
		for _, e := range t.MatchExpressions {
			if local && e.Key == corev1.LabelHostname {
				continue
			}
			term = append(term, newReq(e.Key, e.Operator, e.Values))
		}
		terms = append(terms, term)
	}
	return mergeZoneTerms(terms)
}

// withVolumeTerms combines each of a pod's node terms with each volume alternative.
func withVolumeTerms(terms, vols [][]req) [][]req {
	if vols == nil {
		return terms
	}
	var out [][]req
	for _, t := range terms {
		for _, v := range vols {
			out = append(out, append(append([]req(nil), t...), v...))
		}
	}
	return out
}

// appendVolumeKey encodes volume alternatives into a class key.
func appendVolumeKey(buf []byte, vols [][]req, why string) []byte {
	buf = append(buf, why...)
	for _, alt := range vols {
		for _, r := range alt {
			buf = appendReq(buf, r.Key, r.Operator, r.Values)
		}
		buf = append(buf, 3)
	}
	return append(buf, 6)
}
