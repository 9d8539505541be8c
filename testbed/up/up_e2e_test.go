package up_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/testbed/localenv"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

// TestUp drives `karpool up` as a user would: wait for its summary, push a pool change to the
// printed git remote, `kubectl scale` inflate to 5 and watch the scale hold for two minutes while
// PoolSync keeps reconciling, then Ctrl-C — and checks nothing it started survives. It takes
// about five minutes, two of them the hold.
func TestUp(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	dir := t.TempDir()
	up := startUp(t, ctx, dir, "--interval", "5s")
	kubeconfig, remote, simAdmin := up.summary(t, ctx)
	go up.drain()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "workshop pool applied", 2*time.Minute, func() error {
		return c.Get(ctx, client.ObjectKey{Name: "default"}, &karpv1.NodePool{})
	})
	// The repository holds pools only: inflate is applied outside Git, so PoolSync does not own it.
	// The inventory is written to the status after the apply the NodePool came from.
	ps := &v1alpha1.PoolSync{}
	eventually(t, ctx, "PoolSync inventory recorded", time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: "pools"}, ps); err != nil {
			return err
		}
		if ps.Status.Inventory == nil || len(ps.Status.Inventory.Entries) == 0 {
			return fmt.Errorf("no inventory yet")
		}
		return nil
	})
	// The AWS prerequisites went to the simulator through the PoolSync, before the pools.
	if c := meta.FindStatusCondition(ps.Status.Conditions, v1alpha1.AWSReadyCondition); c == nil || c.Status != metav1.ConditionTrue || ps.Status.AWS == nil || ps.Status.AWS.Mode != v1alpha1.AWSModeApply {
		t.Fatalf("PoolSync AWSReady %+v, status.aws %+v: want the prerequisites applied", c, ps.Status.AWS)
	}
	if n := len(ps.Status.Inventory.Entries); n != 2 {
		t.Fatalf("PoolSync inventory %+v, want the EC2NodeClass and the NodePool", ps.Status.Inventory)
	}
	for _, e := range ps.Status.Inventory.Entries {
		if !strings.Contains(e.ID, "_karpenter.") {
			t.Errorf("PoolSync applied %s, which is not a pool", e.ID)
		}
	}

	// Push a change to the pool through the printed remote.
	work := filepath.Join(t.TempDir(), "pools")
	git(t, "", "clone", "--quiet", remote, work)
	pool := filepath.Join(work, "nodepool.yaml")
	data, err := os.ReadFile(pool)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "        type: karpenter\n", "        type: karpenter\n        team: platform\n", 1)
	if changed == string(data) {
		t.Fatalf("nodepool.yaml has no 'type: karpenter' label line to extend:\n%s", data)
	}
	if err := os.WriteFile(pool, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "-c", "user.name=test", "-c", "user.email=test@karpool.invalid", "commit", "--quiet", "-am", "label the pool's nodes with their team")
	git(t, work, "push", "--quiet", "origin", "main")
	eventually(t, ctx, "pushed pool change applied", 2*time.Minute, func() error {
		np := &karpv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
			return err
		}
		if np.Spec.Template.Labels["team"] != "platform" {
			return fmt.Errorf("template labels %v", np.Spec.Template.Labels)
		}
		return nil
	})

	// kubectl scale deployment/inflate --replicas 5: a merge patch of the scale subresource.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments("default").Patch(ctx, "inflate", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
	var node string
	eventually(t, ctx, "an m5.large node running the 5 inflate pods", 3*time.Minute, func() (err error) {
		node, err = inflateOnOneNode(ctx, c)
		if err != nil {
			return err
		}
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if n.Labels["team"] != "platform" {
			return fmt.Errorf("node %s lacks the pushed label team=platform: %v", node, n.Labels)
		}
		return nil
	})
	holdScale(t, ctx, c, node, 2*time.Minute)

	// AWS schedules the node's instance for retirement: the rule PoolSync created sends the event
	// to the queue PoolSync created, which the controller consumes, and the node is disrupted.
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	instance := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
	body := fmt.Sprintf(`{"instanceId":%q,"eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}`, instance)
	resp, err := http.Post(simAdmin+"scheduled-change", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %sscheduled-change: %s", simAdmin, resp.Status)
	}
	eventually(t, ctx, "the retiring node's NodeClaim deleted", time.Minute, func() error {
		var claims karpv1.NodeClaimList
		if err := c.List(ctx, &claims); err != nil {
			return err
		}
		for _, nc := range claims.Items {
			if nc.Status.NodeName == node && nc.DeletionTimestamp == nil {
				return fmt.Errorf("NodeClaim %s of node %s is not being deleted", nc.Name, node)
			}
		}
		return nil
	})

	// Ctrl-C: everything stops and nothing started under dir survives.
	if err := up.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := up.wait(time.Minute); err != nil {
		t.Errorf("karpool up after SIGINT: %v", err)
	}
	if s := localenvtest.Survivors([]int{up.cmd.Process.Pid}, dir); len(s) > 0 {
		t.Errorf("processes left behind: %v", s)
	}
}

// TestUpDemo runs `karpool up --demo` as a new user would: it must pass every step of the seed-003
// walkthrough and exit 0, `karpool nodes --once` run beside it while the inflate pods run must
// show their m5.large at its list price with the fleet's totals, and nothing it started may
// survive it.
func TestUpDemo(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	dir := t.TempDir()
	up := startUp(t, ctx, dir, "--demo", "--interval", "5s")
	kubeconfig, _, _ := up.summary(t, ctx)
	up.until(t, ctx, "[2/4]") // step 1 passed: the inflate pods run on their node
	out, err := exec.Command(up.bin, "nodes", "--once", "--kubeconfig", kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("karpool nodes --once: %v\n%s", err, out)
	}
	for _, want := range []string{"m5.large", "on-demand", "$0.0960", "5/", "1 node  $"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("karpool nodes --once lacks %q:\n%s", want, out)
		}
	}
	go up.drain()
	if err := up.wait(6 * time.Minute); err != nil {
		t.Fatalf("karpool up --demo: %v\n%s", err, up.transcript.String())
	}
	for _, want := range []string{"✓ 5 inflate pods Running on", "m5.large", "✓ PoolSync pools applied",
		"consolidated away", "karpool status for main@", "demo passed: 4 steps"} {
		if !strings.Contains(up.transcript.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, up.transcript.String())
		}
	}
	if s := localenvtest.Survivors([]int{up.cmd.Process.Pid}, dir); len(s) > 0 {
		t.Errorf("processes left behind: %v", s)
	}
}

func requireTools(t *testing.T) {
	t.Helper()
	if _, err := localenv.CheckBinaries(""); err != nil {
		if os.Getenv("KARPOOL_E2E") == "require" {
			t.Fatalf("KARPOOL_E2E=require: %v", err)
		}
		t.Skipf("end-to-end test skipped: %v (run 'make tools', or 'make test' which does)", err)
	}
}

// upProcess is a `karpool up` process and its output, line by line.
type upProcess struct {
	bin   string
	cmd   *exec.Cmd
	lines chan string
	// exited is closed once the process has exited, with exitErr its exit error.
	exited     chan struct{}
	exitErr    error
	transcript *syncBuilder
}

// startUp builds karpool and starts `karpool up` in the repository's root with args; the test's
// end kills it if it still runs.
func startUp(t *testing.T, ctx context.Context, dir string, args ...string) *upProcess {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	up := &upProcess{bin: filepath.Join(t.TempDir(), "karpool"), lines: make(chan string, 100), exited: make(chan struct{}), transcript: &syncBuilder{}}
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", up.bin, "github.com/karpool/karpool/cmd/karpool").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	up.cmd = exec.Command(up.bin, append([]string{"up", "--dir", dir}, args...)...)
	up.cmd.Dir = root
	stdout, err := up.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up.cmd.Stderr = up.cmd.Stdout
	if err := up.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			up.transcript.WriteLine(sc.Text())
			up.lines <- sc.Text()
		}
		close(up.lines)
		up.exitErr = up.cmd.Wait()
		close(up.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-up.exited:
		default:
			_ = up.cmd.Process.Kill()
			up.drain()
			<-up.exited
		}
	})
	return up
}

// summary reads the output until the summary printed once everything is up, and returns the
// kubeconfig, the git remote and the simulator's admin URL from it.
func (up *upProcess) summary(t *testing.T, ctx context.Context) (kubeconfig, remote, simAdmin string) {
	t.Helper()
	for kubeconfig == "" || remote == "" || simAdmin == "" {
		line := up.next(t, ctx, "the summary")
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "kubeconfig:"); ok {
			kubeconfig = strings.TrimPrefix(strings.TrimSpace(v), "export KUBECONFIG=")
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "git remote:"); ok {
			remote = strings.TrimPrefix(strings.TrimSpace(v), "git clone ")
		}
		if _, v, ok := strings.Cut(line, "AWS simulator: "); ok {
			_, state, _ := strings.Cut(v, "(state: ")
			simAdmin = strings.TrimSuffix(state, "state)")
		}
	}
	return kubeconfig, remote, simAdmin
}

// until reads the output until a line contains text.
func (up *upProcess) until(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	for !strings.Contains(up.next(t, ctx, text), text) {
	}
}

func (up *upProcess) next(t *testing.T, ctx context.Context, waitingFor string) string {
	t.Helper()
	select {
	case line, ok := <-up.lines:
		if !ok {
			t.Fatalf("karpool up exited while the test waited for %s:\n%s", waitingFor, up.transcript.String())
		}
		return line
	case <-ctx.Done():
		t.Fatalf("karpool up: no %s in time:\n%s", waitingFor, up.transcript.String())
	}
	return ""
}

// drain reads the rest of the output (the transcript keeps it).
func (up *upProcess) drain() {
	for range up.lines {
	}
}

// wait waits until the process exits (output drained by the caller) and returns its exit error.
func (up *upProcess) wait(timeout time.Duration) error {
	select {
	case <-up.exited:
		return up.exitErr
	case <-time.After(timeout):
		_ = up.cmd.Process.Kill()
		return fmt.Errorf("did not exit within %s", timeout)
	}
}

// syncBuilder is a transcript written by the output reader and read by the test.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) WriteLine(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(line + "\n")
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// inflateOnOneNode checks the state seed 003 promises after the scale: the Deployment wants 5
// replicas, and 5 inflate pods are Running, none terminating, all on one m5.large node, whose
// name it returns.
func inflateOnOneNode(ctx context.Context, c client.Client) (string, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, d); err != nil {
		return "", err
	}
	if r := d.Spec.Replicas; r == nil || *r != 5 {
		return "", fmt.Errorf("deployment/inflate has spec.replicas %v, want 5", ptr.Deref(r, -1))
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
		return "", err
	}
	var states []string
	ok := len(pods.Items) == 5
	for _, p := range pods.Items {
		states = append(states, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
		ok = ok && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName == pods.Items[0].Spec.NodeName
	}
	if !ok {
		return "", fmt.Errorf("want 5 Running inflate pods on one node, have %d: %s", len(pods.Items), strings.Join(states, ", "))
	}
	name := pods.Items[0].Spec.NodeName
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return "", err
	}
	if it := n.Labels[corev1.LabelInstanceTypeStable]; it != "m5.large" {
		return "", fmt.Errorf("the inflate pods run on %s, a %s; want an m5.large", name, it)
	}
	return name, nil
}

// holdScale checks, for the whole window, that the scale holds: inflateOnOneNode on the same
// node at every tick. Meanwhile it watches the PoolSync and requires at least two reconciliations
// to start within the window, so that drift correction had its chance to undo the scale.
func holdScale(t *testing.T, ctx context.Context, c client.WithWatch, node string, window time.Duration) {
	t.Helper()
	wctx, stop := context.WithTimeout(ctx, window)
	defer stop()
	w, err := c.Watch(wctx, &v1alpha1.PoolSyncList{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	events := w.ResultChan()
	reconciles, reconciling := 0, true // the first event reports the state the window starts in
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil // closed early: the count so far decides
				continue
			}
			ps, isPoolSync := ev.Object.(*v1alpha1.PoolSync)
			if !isPoolSync {
				t.Fatalf("PoolSync watch: %v", ev.Object)
			}
			now := meta.FindStatusCondition(ps.Status.Conditions, fluxmeta.ReconcilingCondition) != nil
			if now && !reconciling {
				reconciles++
			}
			reconciling = now
		case <-tick.C:
			got, err := inflateOnOneNode(ctx, c)
			if err == nil && got != node {
				err = fmt.Errorf("the inflate pods moved from %s to %s", node, got)
			}
			if err != nil {
				t.Fatalf("kubectl scale did not hold (%d PoolSync reconciliations since): %v", reconciles, err)
			}
		case <-wctx.Done():
			if ctx.Err() != nil {
				t.Fatalf("holding the scale: %v", ctx.Err())
			}
			if reconciles < 2 {
				t.Fatalf("%d PoolSync reconciliations started in %s (watch closed early: %v); want at least 2", reconciles, window, events == nil)
			}
			t.Logf("the scale held for %s across %d PoolSync reconciliations", window, reconciles)
			return
		}
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func eventually(t *testing.T, ctx context.Context, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
