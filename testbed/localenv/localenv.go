// Package localenv runs a real, local Kubernetes control plane for end-to-end tests and for
// `karpool up`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (which plays
// the kubelet for nodes annotated kwok.x-k8s.io/node=fake, resource metrics included) and
// metrics-server (the metrics API HorizontalPodAutoscalers read). Every component is a real binary
// built by `make tools`, listening on free 127.0.0.1 ports in a private temporary directory, so
// several environments can run side by side.
package localenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/config/crd"
)

// KwokNodeAnnotation marks the nodes kwok manages; a node without it is left alone (and would
// never become Ready).
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Binaries the environment runs, all found in Options.BinDir.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml", "metrics-server"}

// Options configures Start. The zero value works inside this repository after `make tools`.
type Options struct {
	// BinDir holds the binaries; default $KARPOOL_BIN_DIR, else bin/ at the repository root.
	BinDir string
	// Dir is the parent of the environment's temporary directory; default os.TempDir().
	Dir string
	// SkipCRDs leaves out installing karpool's CRDs.
	SkipCRDs bool
	// ReadyTimeout bounds the whole start-up; default 4 minutes: `make test` starts two control
	// planes while it compiles on a cold cache, and an API server starved of CPU takes minutes
	// to answer /readyz (90 s was too short in a cold run).
	ReadyTimeout time.Duration
	// Logf receives progress lines; nil means silent.
	Logf func(format string, args ...any)
	// ComponentQPS, when positive, is the kube-controller-manager's and kube-scheduler's client
	// QPS (burst twice that). Their defaults (20 and 50) make the ReplicaSet controller take
	// about 50 s to create 1,000 pods, which hides what an autoscaler does in benchmarks.
	ComponentQPS int
}

// Env is a running control plane. Stop it when done.
type Env struct {
	// Config is an administrator's client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same administrator.
	Kubeconfig string
	// Dir is the private directory holding certificates, data and component logs.
	Dir string
	// SchedulerURL is the kube-scheduler's secure endpoint (its /metrics answers Config's
	// administrator): benchmarks read how often it tried to place pods.
	SchedulerURL string

	procs []*process
	logf  func(format string, args ...any)
}

// qpsFlags are the client rate flags both components take.
func qpsFlags(qps int) []string {
	if qps <= 0 {
		return nil
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(qps), "--kube-api-burst=" + strconv.Itoa(2*qps)}
}

// MissingBinariesError lists the binaries Start could not find.
type MissingBinariesError struct {
	Dir     string
	Missing []string
}

func (e *MissingBinariesError) Error() string {
	return fmt.Sprintf("local control plane binaries missing from %s: %s (run `make tools`)", e.Dir, strings.Join(e.Missing, ", "))
}

// CheckBinaries reports which binaries are missing from dir (default as in Options.BinDir).
func CheckBinaries(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultBinDir(); err != nil {
			return "", err
		}
	}
	var missing []string
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return dir, &MissingBinariesError{Dir: dir, Missing: missing}
	}
	return dir, nil
}

// DefaultBinDir is $KARPOOL_BIN_DIR, or bin/ in the repository that contains the working directory.
func DefaultBinDir() (string, error) {
	if d := os.Getenv("KARPOOL_BIN_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(data), "module github.com/karpool/karpool\n") {
			return filepath.Join(d, "bin"), nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("cannot find the karpool repository above the working directory; set KARPOOL_BIN_DIR")
		}
	}
}

// tokens of the local users; the file lives in the private directory and dies with it.
type tokens struct{ admin, scheduler, controllerManager, metricsServer string }

// Start launches the control plane and returns when it is ready: the API server answers /readyz,
// the scheduler and controller manager answer /healthz, kwok runs, the default ServiceAccount
// exists (so pods can be created), karpool's CRDs are established and the metrics API is
// available. On failure every started
// process is stopped and the error carries the tail of each component's log.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	bin, err := CheckBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 4 * time.Minute
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()

	dir, err := os.MkdirTemp(opts.Dir, "karpool-localenv-")
	if err != nil {
		return nil, err
	}
	env = &Env{Dir: dir, logf: logf}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, env.logTails())
			_ = env.Stop()
		}
	}()

	certs, err := newPKI(dir)
	if err != nil {
		return env, fmt.Errorf("creating certificates: %w", err)
	}
	tok := tokens{admin: randomToken(), scheduler: randomToken(), controllerManager: randomToken(), metricsServer: randomToken()}
	tokenFile := filepath.Join(dir, "tokens.csv")
	// Each component authenticates as the user its bootstrap RBAC role is bound to, so it has the
	// permissions it has in a real cluster and no more; kwok stands in for kubelets and runs as admin.
	tokenCSV := fmt.Sprintf("%s,karpool-admin,1,system:masters\n%s,system:kube-scheduler,2\n%s,system:kube-controller-manager,3\n%s,%s,4\n",
		tok.admin, tok.scheduler, tok.controllerManager, tok.metricsServer, metricsServerUser)
	if err := os.WriteFile(tokenFile, []byte(tokenCSV), 0o600); err != nil {
		return env, err
	}

	ports, err := freePorts(7)
	if err != nil {
		return env, err
	}
	etcdClient, etcdPeer, apiPort, cmPort, schedPort, kwokPort, msPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	apiURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)

	logf("localenv: starting etcd on %s", etcdURL)
	etcd, err := env.start("etcd", filepath.Join(bin, "etcd"),
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster=default=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		// The data is thrown away with the environment, so durability buys nothing here.
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return env, err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitHTTP(ctx, plain, etcdURL+"/health", "", etcd); err != nil {
		return env, err
	}

	logf("localenv: starting kube-apiserver on %s", apiURL)
	api, err := env.start("kube-apiserver", filepath.Join(bin, "kube-apiserver"), append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + certs.servingCert,
		"--tls-private-key-file=" + certs.servKey,
		"--client-ca-file=" + certs.caCert,
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.saPub,
		"--service-account-signing-key-file=" + certs.saKey,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/24",
		"--allow-privileged=true",
	}, apiserverAggregationFlags(certs)...)...,
	)
	if err != nil {
		return env, err
	}
	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(certs.caPEM), MinVersion: tls.VersionTLS12}}}
	if err := waitHTTP(ctx, tlsClient, apiURL+"/readyz", tok.admin, api); err != nil {
		return env, err
	}

	env.Config = &rest.Config{Host: apiURL, BearerToken: tok.admin, TLSClientConfig: rest.TLSClientConfig{CAData: certs.caPEM}, QPS: 200, Burst: 400}
	env.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(env.Kubeconfig, apiURL, certs.caPEM, "karpool-admin", tok.admin); err != nil {
		return env, err
	}
	schedKubeconfig := filepath.Join(dir, "scheduler.kubeconfig")
	if err := writeKubeconfig(schedKubeconfig, apiURL, certs.caPEM, "system:kube-scheduler", tok.scheduler); err != nil {
		return env, err
	}
	cmKubeconfig := filepath.Join(dir, "controller-manager.kubeconfig")
	if err := writeKubeconfig(cmKubeconfig, apiURL, certs.caPEM, "system:kube-controller-manager", tok.controllerManager); err != nil {
		return env, err
	}
	msKubeconfig := filepath.Join(dir, "metrics-server.kubeconfig")
	if err := writeKubeconfig(msKubeconfig, apiURL, certs.caPEM, metricsServerUser, tok.metricsServer); err != nil {
		return env, err
	}
	kwokMetrics := filepath.Join(dir, "kwok-metrics.yaml")
	if err := os.WriteFile(kwokMetrics, kwokMetricsConfig, 0o600); err != nil {
		return env, err
	}

	logf("localenv: starting kube-controller-manager and kube-scheduler")
	cm, err := env.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), append([]string{
		"--kubeconfig=" + cmKubeconfig,
		"--authentication-kubeconfig=" + cmKubeconfig,
		"--authorization-kubeconfig=" + cmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cmPort),
		"--tls-cert-file=" + certs.servingCert,
		"--tls-private-key-file=" + certs.servKey,
		// nodeipam would need a cluster CIDR and assigns pod CIDRs kwok does not use; every other
		// controller runs, including nodelifecycle, which lifts the not-ready taint from new nodes.
		"--controllers=*,-nodeipam",
		"--service-account-private-key-file=" + certs.saKey,
		"--root-ca-file=" + certs.caCert,
		"--cluster-signing-cert-file=" + certs.caCert,
		"--cluster-signing-key-file=" + certs.caKey,
		// Each controller acts as its own service account, as in a real cluster; the
		// system:kube-controller-manager role alone cannot even patch nodes.
		"--use-service-account-credentials=true",
		"--leader-elect=false",
	}, slices.Concat(hpaFlags, qpsFlags(opts.ComponentQPS))...)...,
	)
	if err != nil {
		return env, err
	}
	sched, err := env.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"), append([]string{
		"--kubeconfig=" + schedKubeconfig,
		"--authentication-kubeconfig=" + schedKubeconfig,
		"--authorization-kubeconfig=" + schedKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(schedPort),
		"--tls-cert-file=" + certs.servingCert,
		"--tls-private-key-file=" + certs.servKey,
		"--leader-elect=false",
	}, qpsFlags(opts.ComponentQPS)...)...,
	)
	if err != nil {
		return env, err
	}
	logf("localenv: starting kwok")
	kwok, err := env.start("kwok", filepath.Join(bin, "kwok"), append([]string{
		"--kubeconfig=" + env.Kubeconfig,
		"--config=" + filepath.Join(bin, "kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		// Leases keep nodelifecycle from declaring kwok's nodes unreachable after the grace period.
		"--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:" + strconv.Itoa(kwokPort),
	}, kwokMetricsFlags(kwokMetrics, kwokPort)...)...,
	)
	if err != nil {
		return env, err
	}
	if err := waitHTTP(ctx, tlsClient, "https://127.0.0.1:"+strconv.Itoa(cmPort)+"/healthz", "", cm); err != nil {
		return env, err
	}
	env.SchedulerURL = "https://127.0.0.1:" + strconv.Itoa(schedPort)
	if err := waitHTTP(ctx, tlsClient, env.SchedulerURL+"/healthz", "", sched); err != nil {
		return env, err
	}
	if err := waitHTTP(ctx, plain, "http://127.0.0.1:"+strconv.Itoa(kwokPort)+"/healthz", "", kwok); err != nil {
		return env, err
	}

	c, err := env.Client()
	if err != nil {
		return env, err
	}
	if err := waitDefaultServiceAccount(ctx, c, cm); err != nil {
		return env, err
	}
	if !opts.SkipCRDs {
		logf("localenv: installing CRDs")
		if err := InstallCRDs(ctx, c); err != nil {
			return env, err
		}
	}
	logf("localenv: starting metrics-server")
	if err := env.startMetricsServer(ctx, c, bin, msKubeconfig, certs, msPort, kwokPort); err != nil {
		return env, err
	}
	logf("localenv: ready (kubeconfig %s)", env.Kubeconfig)
	return env, nil
}

// Client returns a controller-runtime client for the administrator, knowing the built-in types,
// CRDs and karpool's API types.
func (e *Env) Client() (client.Client, error) {
	return client.New(e.Config, client.Options{Scheme: scheme.Scheme})
}

// PIDs returns the process IDs of the running components.
func (e *Env) PIDs() []int {
	var pids []int
	for _, p := range e.procs {
		pids = append(pids, p.pid())
	}
	return pids
}

// Stop stops every component by its PID in reverse start order and removes the private directory.
// It is safe to call more than once.
func (e *Env) Stop() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		if err := e.procs[i].stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	e.procs = nil
	if e.Dir != "" && len(errs) == 0 {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Env) start(name, binary string, args ...string) (*process, error) {
	p, err := startProcess(e.Dir, name, binary, args...)
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// logTails renders the last lines of every component's log for an error message.
func (e *Env) logTails() string {
	var b strings.Builder
	for _, p := range e.procs {
		state := "running"
		if p.exited() {
			state = fmt.Sprintf("exited: %v", p.err)
		}
		fmt.Fprintf(&b, "\n--- %s (pid %d, %s), last lines of %s:\n%s", p.name, p.pid(), state, p.logPath, p.tail(15))
	}
	return b.String()
}

// InstallCRDs creates (or updates) karpool's CRDs and waits until the API server serves them.
func InstallCRDs(ctx context.Context, c client.Client) error {
	crds, err := crd.All()
	if err != nil {
		return err
	}
	return ApplyCRDs(ctx, c, crds)
}

// ApplyCRDs creates (or updates) the CRDs and waits until the API server serves them.
func ApplyCRDs(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, want := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, types.NamespacedName{Name: want.Name}, got)
		switch {
		case apierrors.IsNotFound(err):
			if err := c.Create(ctx, want.DeepCopy()); err != nil {
				return fmt.Errorf("creating CRD %s: %w", want.Name, err)
			}
		case err != nil:
			return err
		default:
			got.Spec = want.Spec
			if err := c.Update(ctx, got); err != nil {
				return fmt.Errorf("updating CRD %s: %w", want.Name, err)
			}
		}
	}
	for _, want := range crds {
		err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", want.Name, err)
		}
	}
	return nil
}

func waitDefaultServiceAccount(ctx context.Context, c client.Client, cm *process) error {
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if cm.exited() {
			return false, fmt.Errorf("kube-controller-manager exited: %v", cm.err)
		}
		err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the default ServiceAccount (created by kube-controller-manager): %w", err)
	}
	return nil
}

// waitHTTP polls url until it answers 200, failing early if the component has exited.
func waitHTTP(ctx context.Context, c *http.Client, url, token string, p *process) error {
	var last string
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited: %v", p.name, p.err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready at %s (last answer: %s): %w", p.name, url, last, err)
	}
	return nil
}

// poll calls check every interval until it returns true, an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// freePorts reserves n distinct free ports on 127.0.0.1. The listeners are held until all are
// chosen so that the same port is not handed out twice; another process could still take one
// before the component binds it, which start-up then reports as a failed component.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func certPool(pemData []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemData)
	return p
}
