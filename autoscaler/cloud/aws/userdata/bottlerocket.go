package userdata

import (
	"fmt"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// bottlerocketUserData renders Bottlerocket user data: the TOML of spec.userData with karpool's
// settings.kubernetes merged in. karpool's settings (cluster, labels, taints, pod limit, kubelet
// reservations) win over the same keys in the custom TOML; everything else in it is kept.
func bottlerocketUserData(b Bootstrap) ([]byte, error) {
	doc := map[string]any{}
	if strings.TrimSpace(b.Custom) != "" {
		if err := toml.Unmarshal([]byte(b.Custom), &doc); err != nil {
			return nil, fmt.Errorf("spec.userData: Bottlerocket user data must be TOML: %w", err)
		}
	}
	settings, err := tomlTable(doc, "settings", "settings")
	if err != nil {
		return nil, err
	}
	k, err := tomlTable(settings, "kubernetes", "settings.kubernetes")
	if err != nil {
		return nil, err
	}
	k["cluster-name"] = b.ClusterName
	k["api-server"] = b.Endpoint
	k["cluster-certificate"] = b.CA
	if b.DNSIP != "" {
		k["cluster-dns-ip"] = b.DNSIP
	}
	labels, err := tomlTable(k, "node-labels", "settings.kubernetes.node-labels")
	if err != nil {
		return nil, err
	}
	for key, v := range b.Labels {
		labels[key] = v
	}
	if len(labels) == 0 {
		delete(k, "node-labels")
	}
	taints, err := tomlTable(k, "node-taints", "settings.kubernetes.node-taints")
	if err != nil {
		return nil, err
	}
	// Bottlerocket lists "value:Effect" per taint key; karpool's taints replace the custom
	// entries of the same key.
	byKey := map[string][]any{}
	for _, t := range b.Taints {
		byKey[t.Key] = append(byKey[t.Key], t.Value+":"+string(t.Effect))
	}
	for key, v := range byKey {
		taints[key] = v
	}
	if len(taints) == 0 {
		delete(k, "node-taints")
	}
	if kc := b.Kubelet; kc != nil && kc.MaxPods != nil {
		k["max-pods"] = int64(*kc.MaxPods)
	} else if b.MaxPods > 0 {
		k["max-pods"] = int64(b.MaxPods)
	}
	if kc := b.Kubelet; kc != nil {
		setStringTable(k, "kube-reserved", kc.KubeReserved)
		setStringTable(k, "system-reserved", kc.SystemReserved)
		setStringTable(k, "eviction-hard", kc.EvictionHard)
		setStringTable(k, "eviction-soft", kc.EvictionSoft)
		if len(kc.EvictionSoftGracePeriod) > 0 {
			grace := map[string]string{}
			for sig, d := range kc.EvictionSoftGracePeriod {
				grace[sig] = d.Duration.String()
			}
			setStringTable(k, "eviction-soft-grace-period", grace)
		}
		if kc.EvictionMaxPodGracePeriod != nil {
			k["eviction-max-pod-grace-period"] = int64(*kc.EvictionMaxPodGracePeriod)
		}
		if kc.ImageGCHighThresholdPercent != nil {
			k["image-gc-high-threshold-percent"] = int64(*kc.ImageGCHighThresholdPercent)
		}
		if kc.ImageGCLowThresholdPercent != nil {
			k["image-gc-low-threshold-percent"] = int64(*kc.ImageGCLowThresholdPercent)
		}
		if kc.CPUCFSQuota != nil {
			k["cpu-cfs-quota-enforced"] = *kc.CPUCFSQuota
		}
	}
	// go-toml sorts map keys, so the same inputs give the same bytes.
	return toml.Marshal(doc)
}

// tomlTable returns the table under key, creating it when absent; path names it in errors.
func tomlTable(parent map[string]any, key, path string) (map[string]any, error) {
	switch v := parent[key].(type) {
	case nil:
		t := map[string]any{}
		parent[key] = t
		return t, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("spec.userData: %s must be a TOML table, got %T", path, v)
	}
}

// setStringTable sets parent[key] to a table of the map's values, when the map is not empty.
func setStringTable[V ~string](parent map[string]any, key string, m map[string]V) {
	if len(m) == 0 {
		return
	}
	t := map[string]any{}
	for k, v := range m {
		t[k] = string(v)
	}
	parent[key] = t
}
