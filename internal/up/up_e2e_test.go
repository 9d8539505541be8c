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
	"github.com/karpool/karpool/internal/localenv"
	"github.com/karpool/karpool/internal/localenv/localenvtest"
)

// TestUp drives `karpool up` as a user would: wait for its summary, push a pool change to the
// printed git remote, `kubectl scale` inflate to 5 and watch the scale hold for two minutes while
// PoolSync keeps reconciling, then Ctrl-C — and checks nothing it started survives. It takes
// about five minutes, two of them the hold.
func TestUp(t *testing.T) {
	if _, err := localenv.CheckBinaries(""); err != nil {
		if os.Getenv("KARPOOL_E2E") == "require" {
			t.Fatalf("KARPOOL_E2E=require: %v", err)
		}
		t.Skipf("end-to-end test skipped: %v (run 'make tools', or 'make test' which does)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "karpool")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/karpool/karpool/cmd/karpool").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "up", "--dir", dir, "--interval", "5s")
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	var transcript strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			for range lines {
			}
			<-exited
		}
	})

	var kubeconfig, remote, simAdmin string
	for kubeconfig == "" || remote == "" || simAdmin == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("karpool up exited before it was ready:\n%s", transcript.String())
			}
			transcript.WriteString(line + "\n")
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
		case <-ctx.Done():
			t.Fatalf("karpool up not ready in time:\n%s", transcript.String())
		}
	}
	go func() { // keep draining the output
		for line := range lines {
			_ = line
		}
	}()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: localenv.Scheme})
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
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stopped = true
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("karpool up after SIGINT: %v", err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("karpool up did not stop within a minute of SIGINT")
	}
	if s := localenvtest.Survivors([]int{cmd.Process.Pid}, dir); len(s) > 0 {
		t.Errorf("processes left behind: %v", s)
	}
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
