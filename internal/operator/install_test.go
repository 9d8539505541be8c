package operator_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// baseNamespace is where config/default installs karpool.
const baseNamespace = "karpool"

// install applies both install manifests server-side, as a user would: the kustomize base
// (config/default) and the Helm chart rendered by `helm template` into the namespace ns, which
// it creates. Both stay until the test's controller has stopped: a ServiceAccount's token
// stops working when the account is deleted, and the controller must outlive the cleanup. Their
// Deployments are scaled to zero (the local control plane has no node they may run on, and
// their Pending pods would be the controller's to plan). It returns a kubeconfig that
// authenticates as the chart's ServiceAccount, with a token from the TokenRequest API.
func (h *harness) install(ns string) (kubeconfig string) {
	h.t.Helper()
	base := h.kustomizeBuild(repoFile("config", "default"))
	chart := h.helmTemplate(ns)
	h.t.Cleanup(func() { h.uninstall(ns) })
	if err := h.c.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		h.t.Fatal(err)
	}
	h.serverSideApply(base)
	h.serverSideApply(chart)
	if got, want := clusterRoleRules(h.t, chart), clusterRoleRules(h.t, base); !reflect.DeepEqual(got, want) {
		h.t.Fatalf("the chart's ClusterRole rules differ from the kustomize base's:\nchart: %v\nbase:  %v", got, want)
	}
	for _, d := range []client.ObjectKey{{Namespace: baseNamespace, Name: "karpool"}, {Namespace: ns, Name: "karpool-helm"}} {
		h.scaleToZero(d)
	}
	return h.tokenKubeconfig(ns, "karpool-helm")
}

func (h *harness) kustomizeBuild(dir string) []*unstructured.Unstructured {
	h.t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		h.t.Fatalf("kustomize build %s: %v", dir, err)
	}
	data, err := res.AsYaml()
	if err != nil {
		h.t.Fatal(err)
	}
	return decodeAll(h.t, dir, data)
}

// helmTemplate renders charts/karpool with the pinned helm (make tools), CRDs included.
func (h *harness) helmTemplate(ns string) []*unstructured.Unstructured {
	h.t.Helper()
	helm := filepath.Join(os.Getenv("KARPOOL_BIN_DIR"), "helm")
	if _, err := os.Stat(helm); err != nil {
		h.t.Fatalf("helm: %v (run make tools)", err)
	}
	cmd := exec.Command(helm, "template", "karpool-helm", repoFile("charts", "karpool"), "--namespace", ns, "--include-crds",
		"--set", "settings.clusterName="+clusterName,
		"--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::111122223333:role/KarpenterControllerRole-"+clusterName)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		h.t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	return decodeAll(h.t, "helm template", out)
}

func decodeAll(t interface{ Fatalf(string, ...any) }, what string, data []byte) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// serverSideApply applies the objects as `kubectl apply --server-side` does, namespaces first.
func (h *harness) serverSideApply(objs []*unstructured.Unstructured) {
	h.t.Helper()
	for _, first := range []bool{true, false} {
		for _, u := range objs {
			if (u.GetKind() == "Namespace") != first {
				continue
			}
			if err := h.c.Apply(h.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("karpool-install-test"), client.ForceOwnership); err != nil {
				h.t.Fatalf("apply %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
	}
}

func clusterRoleRules(t interface{ Fatalf(string, ...any) }, objs []*unstructured.Unstructured) []rbacv1.PolicyRule {
	for _, u := range objs {
		if u.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatalf("ClusterRole %s: %v", u.GetName(), err)
		}
		return role.Rules
	}
	t.Fatalf("no ClusterRole among %d objects", len(objs))
	return nil
}

func (h *harness) scaleToZero(key client.ObjectKey) {
	h.t.Helper()
	d := &appsv1.Deployment{}
	if err := h.c.Get(h.ctx, key, d); err != nil {
		h.t.Fatalf("Deployment %s: %v", key, err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](0)
	if err := h.c.Patch(h.ctx, d, patch); err != nil {
		h.t.Fatal(err)
	}
}

// tokenKubeconfig writes a kubeconfig for the same API server that authenticates with a token
// of the ServiceAccount, so a process using it has exactly that account's permissions.
func (h *harness) tokenKubeconfig(ns, sa string) string {
	h.t.Helper()
	cs, err := kubernetes.NewForConfig(h.env.Config)
	if err != nil {
		h.t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(h.ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("token for ServiceAccount %s/%s: %v", ns, sa, err)
	}
	cfg, err := clientcmd.LoadFromFile(h.env.Kubeconfig)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.ClientCertificate, auth.ClientCertificateData, auth.ClientKey, auth.ClientKeyData = "", nil, "", nil
		auth.Token, auth.TokenFile = tok.Status.Token, ""
	}
	path := filepath.Join(h.t.TempDir(), "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// uninstall removes both installs' namespaces and cluster-wide RBAC objects; the CRDs stay
// (the control plane's own).
func (h *harness) uninstall(chartNamespace string) {
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{},
	} {
		for _, name := range []string{"karpool", "karpool-helm"} {
			o.SetName(name)
			_ = h.c.Delete(h.ctx, o)
		}
	}
	for _, name := range []string{baseNamespace, chartNamespace} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := h.c.Delete(h.ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			h.t.Errorf("deleting namespace %s: %v", name, err)
		}
	}
}
