package awssim

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"sort"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// bootstrap is what a node's user data tells its kubelet: the labels and taints it registers
// with and the settings that change its allocatable.
type bootstrap struct {
	// family is the bootstrap format found: AL2023 (nodeadm), AL2 (bootstrap.sh) or Bottlerocket.
	family      string
	clusterName string
	labels      map[string]string
	taints      []corev1.Taint
	kubelet     catalog.Kubelet
}

// parseUserData reads base64 user data in any of the three formats. Unknown content (plain
// shell scripts, cloud-config) yields an empty bootstrap with family "".
func parseUserData(b64 string) (bootstrap, error) {
	b := bootstrap{labels: map[string]string{}}
	if b64 == "" {
		return b, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return b, fmt.Errorf("user data is not base64: %w", err)
	}
	return b, b.parse(raw)
}

func (b *bootstrap) parse(raw []byte) error {
	trimmed := bytes.TrimSpace(raw)
	switch {
	case isMIME(trimmed):
		return b.parseMIME(trimmed)
	case bytes.Contains(trimmed, []byte("node.eks.aws/")):
		return b.parseNodeConfigs(trimmed)
	case bytes.Contains(trimmed, []byte("[settings")):
		return b.parseBottlerocket(trimmed)
	case bytes.Contains(trimmed, []byte("bootstrap.sh")):
		return b.parseAL2(trimmed)
	case bytes.Contains(trimmed, []byte("Start-EKSBootstrap.ps1")):
		return b.parseWindows(trimmed)
	}
	return nil
}

// parseWindows reads the Start-EKSBootstrap.ps1 call of Windows user data: -EKSClusterName and
// -KubeletExtraArgs, PowerShell verbatim strings (a doubled single quote is one quote).
func (b *bootstrap) parseWindows(script []byte) error {
	b.family = "Windows"
	for _, line := range strings.Split(string(script), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "& $EKSBootstrapScriptFile") {
			continue
		}
		args, err := psWords(line)
		if err != nil {
			return fmt.Errorf("Start-EKSBootstrap.ps1 line: %w", err)
		}
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-EKSClusterName":
				b.clusterName = args[i+1]
			case "-KubeletExtraArgs":
				flags, err := shellWords(args[i+1])
				if err != nil {
					return fmt.Errorf("-KubeletExtraArgs: %w", err)
				}
				if err := b.kubeletFlags(flags); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// psWords splits a PowerShell command line on spaces, reading '...' verbatim strings.
func psWords(s string) ([]string, error) {
	var words []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] != '\'' {
			w, rest, _ := strings.Cut(s, " ")
			words, s = append(words, w), rest
			continue
		}
		var w strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					w.WriteByte('\'')
					i++
					continue
				}
				break
			}
			w.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("unterminated quote")
		}
		words, s = append(words, w.String()), s[i+1:]
	}
	return words, nil
}

func isMIME(raw []byte) bool {
	head := raw
	if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		head = raw[:i]
	}
	h := strings.ToLower(string(head))
	return strings.Contains(h, "mime-version:") || strings.Contains(h, "content-type: multipart/")
}

func (b *bootstrap) parseMIME(raw []byte) error {
	// net/mail wants CRLF or LF line endings and a blank line after the headers.
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("MIME user data: %w", err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return fmt.Errorf("MIME user data: Content-Type %q is not multipart", msg.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("MIME user data: %w", err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return fmt.Errorf("MIME user data: %w", err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch {
		case ct == "application/node.eks.aws":
			if err := b.parseNodeConfigs(body); err != nil {
				return err
			}
		case strings.Contains(ct, "shellscript") && bytes.Contains(body, []byte("bootstrap.sh")):
			if err := b.parseAL2(body); err != nil {
				return err
			}
		case ct == "application/toml":
			if err := b.parseBottlerocket(body); err != nil {
				return err
			}
		}
	}
}

// nodeConfig is the part of nodeadm's NodeConfig (node.eks.aws/v1alpha1) that matters here.
type nodeConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Cluster struct {
			Name string `json:"name"`
		} `json:"cluster"`
		Kubelet struct {
			Config map[string]any `json:"config"`
			Flags  []string       `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

func (b *bootstrap) parseNodeConfigs(raw []byte) error {
	b.family = catalog.AMIFamilyAL2023
	for _, doc := range splitYAMLDocs(raw) {
		var nc nodeConfig
		if err := yaml.Unmarshal(doc, &nc); err != nil {
			return fmt.Errorf("NodeConfig: %w", err)
		}
		if nc.Kind != "" && nc.Kind != "NodeConfig" {
			continue
		}
		if nc.Spec.Cluster.Name != "" {
			b.clusterName = nc.Spec.Cluster.Name
		}
		if err := b.kubeletFlags(nc.Spec.Kubelet.Flags); err != nil {
			return err
		}
		if err := b.kubeletConfig(nc.Spec.Kubelet.Config); err != nil {
			return err
		}
	}
	return nil
}

func splitYAMLDocs(raw []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "---" {
			if cur.Len() > 0 {
				docs = append(docs, append([]byte(nil), cur.Bytes()...))
			}
			cur.Reset()
			continue
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	if len(bytes.TrimSpace(cur.Bytes())) > 0 {
		docs = append(docs, cur.Bytes())
	}
	return docs
}

// kubeletConfig reads a KubeletConfiguration fragment (nodeadm's spec.kubelet.config).
func (b *bootstrap) kubeletConfig(c map[string]any) error {
	if c == nil {
		return nil
	}
	if v, ok := c["maxPods"]; ok {
		n, err := toInt32(v)
		if err != nil {
			return fmt.Errorf("kubelet config maxPods: %w", err)
		}
		b.kubelet.MaxPods = &n
	}
	if v, ok := c["podsPerCore"]; ok {
		n, err := toInt32(v)
		if err != nil {
			return fmt.Errorf("kubelet config podsPerCore: %w", err)
		}
		b.kubelet.PodsPerCore = &n
	}
	if v, ok := c["registerWithTaints"].([]any); ok {
		for _, t := range v {
			m, _ := t.(map[string]any)
			taint := corev1.Taint{Key: fmt.Sprint(m["key"]), Effect: corev1.TaintEffect(fmt.Sprint(m["effect"]))}
			if val, ok := m["value"]; ok && val != nil {
				taint.Value = fmt.Sprint(val)
			}
			b.addTaint(taint)
		}
	}
	for key, dst := range map[string]*catalog.Reserved{"kubeReserved": &b.kubelet.KubeReserved, "systemReserved": &b.kubelet.SystemReserved} {
		if m, ok := c[key].(map[string]any); ok {
			if err := reservedFrom(stringMap(m), dst); err != nil {
				return fmt.Errorf("kubelet config %s: %w", key, err)
			}
		}
	}
	if m, ok := c["evictionHard"].(map[string]any); ok {
		if err := evictionFrom(stringMap(m), &b.kubelet.EvictionHard); err != nil {
			return fmt.Errorf("kubelet config evictionHard: %w", err)
		}
	}
	if labels, ok := c["nodeLabels"].(map[string]any); ok {
		for k, v := range labels {
			b.labels[k] = fmt.Sprint(v)
		}
	}
	return nil
}

func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func toInt32(v any) (int32, error) {
	switch x := v.(type) {
	case float64:
		return int32(x), nil
	case int64:
		return int32(x), nil
	case int:
		return int32(x), nil
	case string:
		n, err := strconv.Atoi(x)
		return int32(n), err
	}
	return 0, fmt.Errorf("%v is not a number", v)
}

func reservedFrom(m map[string]string, dst *catalog.Reserved) error {
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("%s=%q: %w", k, v, err)
		}
		switch k {
		case "cpu":
			n := q.MilliValue()
			dst.CPU = &n
		case "memory":
			n := q.Value()
			dst.Memory = &n
		case "ephemeral-storage":
			n := q.Value()
			dst.EphemeralStorage = &n
		}
	}
	return nil
}

func evictionFrom(m map[string]string, dst *catalog.Eviction) error {
	for k, v := range m {
		var t catalog.Threshold
		if p, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return fmt.Errorf("%s=%q: %w", k, v, err)
			}
			t = catalog.Threshold{Percent: f, IsPercent: true}
		} else {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("%s=%q: %w", k, v, err)
			}
			t = catalog.Threshold{Bytes: q.Value()}
		}
		switch k {
		case "memory.available":
			dst.MemoryAvailable = &t
		case "nodefs.available":
			dst.NodeFSAvailable = &t
		}
	}
	return nil
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// kubeletFlags reads kubelet command-line flags.
func (b *bootstrap) kubeletFlags(flags []string) error {
	for i := 0; i < len(flags); i++ {
		f := strings.TrimSpace(flags[i])
		name, val, hasVal := strings.Cut(f, "=")
		if !hasVal && i+1 < len(flags) && !strings.HasPrefix(flags[i+1], "--") {
			val, hasVal = flags[i+1], true
			i++
		}
		val = unquote(val)
		switch name {
		case "--node-labels":
			for _, kv := range strings.Split(val, ",") {
				if kv = strings.TrimSpace(kv); kv == "" {
					continue
				}
				k, v, _ := strings.Cut(kv, "=")
				b.labels[k] = v
			}
		case "--register-with-taints":
			for _, t := range strings.Split(val, ",") {
				if t = strings.TrimSpace(t); t == "" {
					continue
				}
				taint, err := parseTaint(t)
				if err != nil {
					return err
				}
				b.addTaint(taint)
			}
		case "--max-pods":
			n, err := strconv.Atoi(val)
			if err != nil {
				return fmt.Errorf("--max-pods=%q: %w", val, err)
			}
			n32 := int32(n)
			b.kubelet.MaxPods = &n32
		case "--pods-per-core":
			n, err := strconv.Atoi(val)
			if err != nil {
				return fmt.Errorf("--pods-per-core=%q: %w", val, err)
			}
			n32 := int32(n)
			b.kubelet.PodsPerCore = &n32
		case "--kube-reserved", "--system-reserved":
			m := map[string]string{}
			for _, kv := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(kv, "=")
				m[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			dst := &b.kubelet.KubeReserved
			if name == "--system-reserved" {
				dst = &b.kubelet.SystemReserved
			}
			if err := reservedFrom(m, dst); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case "--eviction-hard":
			m := map[string]string{}
			for _, kv := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(kv, "<")
				m[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			if err := evictionFrom(m, &b.kubelet.EvictionHard); err != nil {
				return fmt.Errorf("--eviction-hard: %w", err)
			}
		}
	}
	return nil
}

// parseTaint reads key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect (want key=value:Effect)", s)
	}
	switch corev1.TaintEffect(effect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q has an unknown effect %q", s, effect)
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}

func (b *bootstrap) addTaint(t corev1.Taint) {
	for i, x := range b.taints {
		if x.Key == t.Key && x.Effect == t.Effect {
			b.taints[i] = t
			return
		}
	}
	b.taints = append(b.taints, t)
}

// parseAL2 reads /etc/eks/bootstrap.sh CLUSTER [--kubelet-extra-args '...'] [--use-max-pods false].
func (b *bootstrap) parseAL2(script []byte) error {
	b.family = catalog.AMIFamilyAL2
	text := strings.ReplaceAll(string(script), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, "bootstrap.sh") {
			continue
		}
		words, err := shellWords(line[strings.Index(line, "bootstrap.sh"):])
		if err != nil {
			return fmt.Errorf("bootstrap.sh line: %w", err)
		}
		for i := 1; i < len(words); i++ {
			w := words[i]
			name, val, hasVal := strings.Cut(w, "=")
			if !strings.HasPrefix(name, "--") {
				if b.clusterName == "" {
					b.clusterName = w
				}
				continue
			}
			if !hasVal && i+1 < len(words) {
				val = words[i+1]
				i++
			}
			if name == "--kubelet-extra-args" {
				args, err := shellWords(val)
				if err != nil {
					return fmt.Errorf("--kubelet-extra-args: %w", err)
				}
				if err := b.kubeletFlags(args); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// shellWords splits a command line the way sh does for quotes and backslashes (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == ';' || c == '&' || c == '|' || c == '#':
			if inWord {
				words = append(words, cur.String())
			}
			return words, nil
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseBottlerocket reads settings.kubernetes from Bottlerocket TOML user data.
func (b *bootstrap) parseBottlerocket(raw []byte) error {
	b.family = catalog.AMIFamilyBottlerocket
	var doc map[string]any
	if err := toml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("Bottlerocket TOML: %w", err)
	}
	settings, _ := doc["settings"].(map[string]any)
	k, _ := settings["kubernetes"].(map[string]any)
	if k == nil {
		return nil
	}
	if v, ok := k["cluster-name"].(string); ok {
		b.clusterName = v
	}
	if v, ok := k["max-pods"]; ok {
		n, err := toInt32(v)
		if err != nil {
			return fmt.Errorf("settings.kubernetes.max-pods: %w", err)
		}
		b.kubelet.MaxPods = &n
	}
	if m, ok := k["node-labels"].(map[string]any); ok {
		for lk, lv := range m {
			b.labels[lk] = fmt.Sprint(lv)
		}
	}
	if m, ok := k["node-taints"].(map[string]any); ok {
		keys := make([]string, 0, len(m))
		for tk := range m {
			keys = append(keys, tk)
		}
		sort.Strings(keys)
		for _, tk := range keys {
			var vals []string
			switch x := m[tk].(type) {
			case string:
				vals = []string{x}
			case []any:
				for _, e := range x {
					vals = append(vals, fmt.Sprint(e))
				}
			}
			for _, ve := range vals {
				taint, err := parseTaint(tk + "=" + ve)
				if err != nil {
					return fmt.Errorf("settings.kubernetes.node-taints: %w", err)
				}
				if strings.HasPrefix(ve, ":") {
					taint.Value = ""
				}
				b.addTaint(taint)
			}
		}
	}
	for key, dst := range map[string]*catalog.Reserved{"kube-reserved": &b.kubelet.KubeReserved, "system-reserved": &b.kubelet.SystemReserved} {
		if m, ok := k[key].(map[string]any); ok {
			if err := reservedFrom(stringMap(m), dst); err != nil {
				return fmt.Errorf("settings.kubernetes.%s: %w", key, err)
			}
		}
	}
	if m, ok := k["eviction-hard"].(map[string]any); ok {
		if err := evictionFrom(stringMap(m), &b.kubelet.EvictionHard); err != nil {
			return fmt.Errorf("settings.kubernetes.eviction-hard: %w", err)
		}
	}
	return nil
}
