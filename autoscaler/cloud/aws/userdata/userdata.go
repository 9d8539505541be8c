// Package userdata renders the user data that makes an EC2 instance join the cluster as a
// node, for each AMI family: nodeadm NodeConfig in MIME for AL2023, bootstrap.sh for AL2,
// settings TOML for Bottlerocket, Start-EKSBootstrap.ps1 in PowerShell for Windows, the class's
// own user data for Custom. It is pure.
package userdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// mimeBoundary is fixed so the same inputs give the same user data bytes (and so the same
// launch template hash).
const mimeBoundary = "//"

// Bootstrap is what a node needs to join the cluster, in AMI-family-neutral form.
type Bootstrap struct {
	ClusterName, Endpoint, CA, CIDR string
	// DNSIP is the cluster DNS address (AL2 and Bottlerocket need it; nodeadm derives it from
	// CIDR).
	DNSIP   string
	Labels  map[string]string
	Taints  []corev1.Taint
	Kubelet *awsv1.KubeletConfiguration
	// MaxPods is the kubelet's pod limit, the instance type's pod capacity (AL2 and
	// Bottlerocket; 0 leaves it to the AMI). The class's kubelet maxPods wins over it.
	MaxPods int32
	// Custom is the EC2NodeClass spec.userData, merged in front of karpool's own part.
	Custom string
}

// Render renders the user data of an AMI family. Custom AMIs get spec.userData unchanged:
// their owners bootstrap the node themselves.
func Render(family string, b Bootstrap) ([]byte, error) {
	switch family {
	case catalog.AMIFamilyAL2023:
		return al2023UserData(b)
	case catalog.AMIFamilyAL2:
		return al2UserData(b)
	case catalog.AMIFamilyBottlerocket:
		return bottlerocketUserData(b)
	case catalog.AMIFamilyCustom:
		return []byte(b.Custom), nil
	case catalog.AMIFamilyWindows2019, catalog.AMIFamilyWindows2022, catalog.AMIFamilyWindows2025:
		return windowsUserData(b)
	}
	return nil, fmt.Errorf("AMI family %q: karpool renders user data for AL2023, AL2, Bottlerocket, Windows and Custom", family)
}

// ClusterDNS is the cluster DNS address: the class's kubelet clusterDNS, else the tenth
// address of the service CIDR, where EKS puts kube-dns.
func ClusterDNS(k *awsv1.KubeletConfiguration, cidr string) (string, error) {
	if k != nil && len(k.ClusterDNS) > 0 {
		return k.ClusterDNS[0], nil
	}
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("the cluster's service CIDR %q is not a CIDR (%v); set spec.kubelet.clusterDNS or fix the cluster facts", cidr, err)
	}
	a := prefix.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String(), nil
}

// labelList is key=value,... sorted by key: the kubelet's --node-labels syntax.
func labelList(labels map[string]string) string {
	kv := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return strings.Join(kv, ",")
}

func taintList(taints []corev1.Taint) string {
	ts := make([]string, len(taints))
	for i, t := range taints {
		ts[i] = t.ToString()
	}
	return strings.Join(ts, ",")
}

// nodeConfig is nodeadm's NodeConfig (node.eks.aws/v1alpha1), the fields karpool sets.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster struct {
		Name                 string `json:"name"`
		APIServerEndpoint    string `json:"apiServerEndpoint"`
		CertificateAuthority string `json:"certificateAuthority"`
		CIDR                 string `json:"cidr"`
	} `json:"cluster"`
	Kubelet struct {
		Config map[string]any `json:"config,omitempty"`
		Flags  []string       `json:"flags,omitempty"`
	} `json:"kubelet"`
}

type mimePart struct {
	contentType string
	body        []byte
}

// al2023UserData renders AL2023 user data: a MIME multipart document whose parts are the
// custom user data's parts followed by karpool's NodeConfig. nodeadm merges NodeConfigs in
// order, so karpool's cluster settings, labels and taints win over custom ones.
func al2023UserData(b Bootstrap) ([]byte, error) {
	parts, err := customParts(b.Custom)
	if err != nil {
		return nil, err
	}
	var nc nodeConfig
	nc.APIVersion, nc.Kind = "node.eks.aws/v1alpha1", "NodeConfig"
	nc.Spec.Cluster.Name = b.ClusterName
	nc.Spec.Cluster.APIServerEndpoint = b.Endpoint
	nc.Spec.Cluster.CertificateAuthority = b.CA
	nc.Spec.Cluster.CIDR = b.CIDR
	if b.Kubelet != nil {
		// The API type uses the kubelet configuration file's field names, so its JSON form is
		// a valid KubeletConfiguration fragment.
		raw, err := json.Marshal(b.Kubelet)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &nc.Spec.Kubelet.Config); err != nil {
			return nil, err
		}
		if len(nc.Spec.Kubelet.Config) == 0 {
			nc.Spec.Kubelet.Config = nil
		}
	}
	if len(b.Labels) > 0 {
		nc.Spec.Kubelet.Flags = append(nc.Spec.Kubelet.Flags, "--node-labels="+labelList(b.Labels))
	}
	if len(b.Taints) > 0 {
		nc.Spec.Kubelet.Flags = append(nc.Spec.Kubelet.Flags, "--register-with-taints="+taintList(b.Taints))
	}
	body, err := yaml.Marshal(nc)
	if err != nil {
		return nil, err
	}
	parts = append(parts, mimePart{contentType: "application/node.eks.aws", body: body})
	return writeMIME(parts), nil
}

// customParts splits EC2NodeClass spec.userData into MIME parts: the parts of a MIME document,
// or the whole text as one part (a NodeConfig if it looks like one, else a shell script).
func customParts(custom string) ([]mimePart, error) {
	if strings.TrimSpace(custom) == "" {
		return nil, nil
	}
	head, _, _ := strings.Cut(custom, "\n\n")
	if !strings.Contains(strings.ToLower(head), "mime-version:") {
		ct := "text/x-shellscript; charset=\"us-ascii\""
		if strings.Contains(custom, "node.eks.aws/") {
			ct = "application/node.eks.aws"
		}
		return []mimePart{{contentType: ct, body: []byte(custom)}}, nil
	}
	msg, err := mail.ReadMessage(strings.NewReader(custom))
	if err != nil {
		return nil, fmt.Errorf("spec.userData: not a valid MIME document: %w", err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("spec.userData: MIME user data must be multipart (Content-Type is %q)", msg.Header.Get("Content-Type"))
	}
	var out []mimePart
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("spec.userData: reading MIME part %d: %w", len(out)+1, err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, fmt.Errorf("spec.userData: reading MIME part %d: %w", len(out)+1, err)
		}
		out = append(out, mimePart{contentType: part.Header.Get("Content-Type"), body: body})
	}
}

func writeMIME(parts []mimePart) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=%q\n\n", mimeBoundary)
	for _, p := range parts {
		fmt.Fprintf(&buf, "--%s\nContent-Type: %s\n\n", mimeBoundary, p.contentType)
		buf.Write(p.body)
		if !bytes.HasSuffix(p.body, []byte("\n")) {
			buf.WriteByte('\n')
		}
		buf.WriteByte('\n')
	}
	fmt.Fprintf(&buf, "--%s--\n", mimeBoundary)
	return buf.Bytes()
}
