package up_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/internal/localenv"
	"github.com/karpool/karpool/internal/localenv/localenvtest"
)

// TestUp drives `karpool up` as a user would: wait for its summary, push a pool change to the
// printed git remote, scale inflate, then Ctrl-C — and checks nothing it started survives.
func TestUp(t *testing.T) {
	if _, err := localenv.CheckBinaries(""); err != nil {
		if os.Getenv("KARPOOL_E2E") == "require" {
			t.Fatalf("KARPOOL_E2E=require: %v", err)
		}
		t.Skipf("end-to-end test skipped: %v (run 'make tools', or 'make test' which does)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
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

	var kubeconfig, remote string
	for kubeconfig == "" || remote == "" {
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
	c, err := client.New(cfg, client.Options{Scheme: localenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "workshop pool applied", 2*time.Minute, func() error {
		return c.Get(ctx, client.ObjectKey{Name: "default"}, &karpv1.NodePool{})
	})

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

	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](5)
	if err := c.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "an m5.large node running the 5 inflate pods", 3*time.Minute, func() error {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes, client.HasLabels{karpv1.LabelNodePool}); err != nil {
			return err
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Labels[corev1.LabelInstanceTypeStable] != "m5.large" || nodes.Items[0].Labels["team"] != "platform" {
			return fmt.Errorf("%d nodes", len(nodes.Items))
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != 5 {
			return fmt.Errorf("%d of 5 pods running", running)
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
