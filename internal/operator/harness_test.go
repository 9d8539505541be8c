package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/operator"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/localenv"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

// clusterName matches the discovery tags of the examples (karpenter.sh/discovery: karpool-local).
const clusterName = "karpool-local"

// harness is one karpool controller (in this process) on the shared control plane, with its
// own AWS simulator whose node bootstrap registers the instances as kwok nodes.
type harness struct {
	t    testing.TB
	env  *localenv.Env
	c    client.Client
	sim  *awssim.Server
	logs *syncBuffer
	cfg  operator.Config
	ctx  context.Context
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newHarness starts the simulator; startController runs the operator.
func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, awssim.Options{})
}

// newHarnessWith starts the simulator with these options (cluster name and node bootstrap are
// always set).
func newHarnessWith(t testing.TB, simOpts awssim.Options) *harness {
	t.Helper()
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	simOpts.ClusterName, simOpts.Kube = clusterName, env.Config
	sim, err := awssim.Start(simOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	h := &harness{t: t, env: env, c: c, sim: sim, logs: &syncBuffer{}, ctx: ctx}
	h.createNodeRole()
	h.cfg = operator.Config{
		Kube: env.Config, AWS: sim.AWSConfig(), ClusterName: clusterName,
		MetricsAddr: freeAddr(t), ProbeAddr: freeAddr(t),
		GCInterval: 5 * time.Second,
		// Karpenter's 15 s only adds waiting to every disruption test.
		DisruptionValidationDelay: 5 * time.Second,
		Log:                       operator.NewJSONLogger(io.MultiWriter(h.logs, logFile(t)), slog.LevelInfo),
	}
	return h
}

// logFile writes the controller's log to a file that is kept when the test fails.
func logFile(t testing.TB) io.Writer {
	dir, err := os.MkdirTemp("", "karpool-operator-test-")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		if t.Failed() {
			t.Logf("controller log kept: %s", f.Name())
			return
		}
		_ = os.RemoveAll(dir)
	})
	return f
}

// startController runs the operator until the test ends.
func (h *harness) startController() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- operator.Run(ctx, h.cfg, func(operator.Ready) { close(ready) })
	}()
	h.t.Cleanup(func() {
		// The controller itself removes what the test created (its finalizers terminate the
		// instances), so it stops only after the cleanup.
		h.cleanup()
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("controller: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		h.t.Fatalf("controller stopped before it was ready: %v", err)
	case <-h.ctx.Done():
		h.t.Fatal("controller not ready in time")
	}
}

// createNodeRole creates the node role the examples' EC2NodeClass names, as the AWS
// prerequisites would (the instance profile is then created by karpool from it).
func (h *harness) createNodeRole() {
	cli := iam.NewFromConfig(h.sim.AWSConfig())
	_, err := cli.CreateRole(h.ctx, &iam.CreateRoleInput{
		RoleName:                 aws.String("KarpenterNodeRole-" + clusterName),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`),
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// apply creates every object of the YAML files (namespace overridden when ns is set for
// namespaced objects).
func (h *harness) apply(ns string, files ...string) {
	h.t.Helper()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, u := range decodeAll(h.t, f, data) {
			if ns != "" && u.GetNamespace() != "" {
				u.SetNamespace(ns)
			}
			if err := h.c.Create(h.ctx, u); err != nil {
				h.t.Fatalf("%s: create %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// eventually polls check until it returns nil or the deadline passes.
func (h *harness) eventually(what string, timeout time.Duration, check func() error) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within %s: %v", what, timeout, last)
		}
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("%s: %v (last: %v)", what, h.ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// cleanup deletes what the test created in the shared cluster and waits until the autoscaler
// has terminated every node it launched, so the next test starts from an empty cluster.
func (h *harness) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var nss corev1.NamespaceList
	_ = h.c.List(ctx, &nss, client.HasLabels{testNamespaceLabel})
	for i := range nss.Items {
		_ = h.c.Delete(ctx, &nss.Items[i])
	}
	_ = h.c.DeleteAllOf(ctx, &karpv1.NodePool{})
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var claims karpv1.NodeClaimList
		var nodes corev1.NodeList
		_ = h.c.List(ctx, &claims)
		_ = h.c.List(ctx, &nodes, client.HasLabels{karpv1.LabelNodePool})
		if len(claims.Items) == 0 && len(nodes.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			h.t.Errorf("cleanup: %d NodeClaims and %d nodes left", len(claims.Items), len(nodes.Items))
			return
		case <-tick.C:
		}
	}
	_ = h.c.DeleteAllOf(ctx, &awsv1.EC2NodeClass{})
	// The namespaces must be gone too: pods left Pending in a terminating namespace would be
	// planned by the next test's controller.
	for {
		var classes awsv1.EC2NodeClassList
		var left corev1.NamespaceList
		errClasses := h.c.List(ctx, &classes)
		errNS := h.c.List(ctx, &left, client.HasLabels{testNamespaceLabel})
		if errClasses == nil && errNS == nil && len(classes.Items) == 0 && len(left.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			h.t.Errorf("cleanup: %d EC2NodeClasses and %d test namespaces left", len(classes.Items), len(left.Items))
			return
		case <-tick.C:
		}
	}
}

const testNamespaceLabel = "karpool.dev/e2e"

// namespace creates a namespace for the test's workloads.
func (h *harness) namespace(name string) string {
	h.t.Helper()
	ns := &corev1.Namespace{}
	ns.Name = name
	ns.Labels = map[string]string{testNamespaceLabel: "true"}
	if err := h.c.Create(h.ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	// Pods need the default service account, which the controller-manager creates.
	h.eventually("default service account in "+name, time.Minute, func() error {
		return h.c.Get(h.ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return name
}

// logLines returns the controller's JSON log lines with this message.
func (h *harness) logLines(message string) []string {
	var out []string
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, fmt.Sprintf("%q", message)) {
			out = append(out, line)
		}
	}
	return out
}

func repoFile(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

// liveInstances counts the simulator's instances that are pending or running.
func (h *harness) liveInstances() int {
	n := 0
	for _, in := range h.sim.Instances() {
		if in.State == "pending" || in.State == "running" {
			n++
		}
	}
	return n
}

// workshopPools applies the workshop example's EC2NodeClass and NodePool.
func (h *harness) workshopPools() {
	h.t.Helper()
	h.apply("", repoFile("examples", "workshop", "ec2nodeclass.yaml"), repoFile("examples", "workshop", "nodepool.yaml"))
}

// inflate applies seed 003's inflate Deployment (1Gi pods, nodeSelector type=karpenter) in ns
// and scales it to n.
func (h *harness) inflate(ns string, n int32) {
	h.t.Helper()
	h.apply(ns, repoFile("examples", "seeds", "003-workshop", "inflate-deployment.yaml"))
	h.scale(ns, "inflate", n)
}

// workshopScaleOut is seed 003's scale-out: the workshop pools, inflate scaled to n in ns, and
// all its pods Running.
func (h *harness) workshopScaleOut(ns string, n int32) []corev1.Pod {
	h.t.Helper()
	h.workshopPools()
	h.inflate(ns, n)
	return h.runningPods(ns, "inflate", int(n), 3*time.Minute)
}
