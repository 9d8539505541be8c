package localenv

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The metrics API on the local control plane: kwok serves each fake node's kubelet resource
// metrics (kwok-metrics.yaml: how much each container uses comes from pod annotations),
// metrics-server scrapes them, and the API server serves metrics.k8s.io from metrics-server
// through the aggregation layer, so the kube-controller-manager's HPA controller scales on them as
// it would in a cluster.

//go:embed kwok-metrics.yaml
var kwokMetricsConfig []byte

// metricsServerUser is metrics-server's identity (a token user), bound to the roles its
// upstream manifests give its ServiceAccount.
const metricsServerUser = "system:metrics-server"

// apiserverAggregationFlags let the API server proxy to aggregated API servers as the front
// proxy, passing the user in the headers they trust.
func apiserverAggregationFlags(certs *pki) []string {
	return []string{
		"--requestheader-client-ca-file=" + certs.frontProxyCA,
		"--requestheader-allowed-names=" + frontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + certs.frontProxyCert,
		"--proxy-client-key-file=" + certs.frontProxyKey,
	}
}

// hpaFlags make the HPA controller act in seconds rather than minutes: it looks every 2 s (15 s
// upstream), scales down after 10 s of lower recommendations (5 min), and trusts the CPU of pods
// 10 s old (5 min) — on kwok a pod is ready at once and its first metrics arrive within ~30 s.
var hpaFlags = []string{
	"--horizontal-pod-autoscaler-sync-period=2s",
	"--horizontal-pod-autoscaler-downscale-stabilization=10s",
	"--horizontal-pod-autoscaler-cpu-initialization-period=10s",
	"--horizontal-pod-autoscaler-initial-readiness-delay=1s",
}

// kwokMetricsFlags make kwok serve the metrics of kwok-metrics.yaml on its server port and give
// its nodes that port and 127.0.0.1 as the kubelet's endpoint.
func kwokMetricsFlags(configPath string, port int) []string {
	return []string{"--config=" + configPath, "--node-port=" + strconv.Itoa(port), "--node-ip=127.0.0.1"}
}

// startMetricsServer starts metrics-server on port as metricsServerUser (kubeconfig), registers
// it as the metrics.k8s.io API and waits until the API server reports it available.
func (e *Env) startMetricsServer(ctx context.Context, c client.Client, bin, kubeconfig string, certs *pki, port, kwokPort int) error {
	if err := metricsServerRBAC(ctx, c); err != nil {
		return err
	}
	ms, err := e.start("metrics-server", filepath.Join(bin, "metrics-server"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+certs.servingCert,
		"--tls-private-key-file="+certs.servKey,
		// kwok presents a self-signed certificate and is reached at the nodes' ExternalIP.
		"--kubelet-insecure-tls",
		"--kubelet-preferred-address-types=ExternalIP",
		"--kubelet-use-node-status-port",
		"--kubelet-port="+strconv.Itoa(kwokPort),
		// Its shortest resolution; it must exceed the scrape timeout.
		"--metric-resolution=10s",
		"--kubelet-request-timeout=5s",
	)
	if err != nil {
		return err
	}
	for _, obj := range metricsAPIObjects(port) {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering metrics-server: %w", err)
		}
	}
	// metrics-server's /readyz fails until it has scraped a node with pods; the API server's
	// availability check is what clients depend on.
	err = poll(ctx, 200*time.Millisecond, func() (bool, error) {
		if ms.exited() {
			return false, fmt.Errorf("metrics-server exited: %v", ms.err)
		}
		return apiServiceAvailable(ctx, c)
	})
	if err != nil {
		return fmt.Errorf("waiting for the metrics.k8s.io API to become available: %w", err)
	}
	return nil
}

// apiServiceAvailable reports whether the API server found metrics-server answering.
func apiServiceAvailable(ctx context.Context, c client.Client) (bool, error) {
	svc := &unstructured.Unstructured{}
	svc.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	if err := c.Get(ctx, client.ObjectKey{Name: "v1beta1.metrics.k8s.io"}, svc); err != nil {
		return false, err
	}
	conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			return true, nil
		}
	}
	return false, nil
}

// metricsAPIObjects register metrics-server with the aggregation layer. The Service is an
// ExternalName of 127.0.0.1: Endpoints may not point at loopback addresses, and the API server
// resolves an ExternalName Service to its name and the APIService's port.
func metricsAPIObjects(port int) []client.Object {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: metav1.NamespaceSystem},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"},
	}
	api := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"service": map[string]any{"name": "metrics-server", "namespace": metav1.NamespaceSystem, "port": int64(port)},
			"group":   "metrics.k8s.io", "version": "v1beta1",
			// metrics-server presents the environment's serving certificate, which names
			// 127.0.0.1 but not the Service's DNS name the API server would check.
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100), "versionPriority": int64(100),
		},
	}}
	return []client.Object{svc, api}
}

// metricsServerRBAC gives metricsServerUser what metrics-server's upstream manifests give its
// ServiceAccount: read nodes, their metrics and pods; delegate authentication and authorization;
// read the API server's client-authentication configuration.
func metricsServerRBAC(ctx context.Context, c client.Client) error {
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: metricsServerUser}}
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser}, Subjects: user,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsServerUser}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server:system:auth-delegator"}, Subjects: user,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader", Namespace: metav1.NamespaceSystem}, Subjects: user,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("metrics-server's RBAC: %w", err)
		}
	}
	return nil
}
