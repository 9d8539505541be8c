package up

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/internal/nodeview"
	"github.com/karpool/karpool/reconciler"
	"github.com/karpool/karpool/reconciler/status"
)

// demos are the examples `karpool up --demo` walks through, with what each shows.
var demos = map[string]struct {
	title string
	steps func(d *demo) []demoStep
}{
	"workshop": {"seed 003, the workshop", (*demo).workshopSteps},
	"hpa":      {"seed 002, an HPA scaling pods and karpool scaling nodes", (*demo).hpaSteps},
}

// demo is a seed's walkthrough on the running environment, as its reader does it. Each step
// acts, waits (with a deadline) until the cluster or the repository shows the result, and
// prints it.
type demo struct {
	example  string
	c        client.Client
	region   string
	remote   string // the pools repository as users clone it
	bare     string // and on disk, where the status branch is read
	poolSync string
	out      io.Writer
	// revision is the commit step 2 pushed; node the node step 1 got.
	revision, node string
}

// demoStep is one step: its title, what it does, and how long it may take.
type demoStep struct {
	title   string
	timeout time.Duration
	run     func(ctx context.Context) (string, error)
}

// workshopSteps are seed 003's: scale inflate up, look at the node and its cost, push a pool
// change, scale down and watch the node go, read the status karpool committed to Git.
func (d *demo) workshopSteps() []demoStep {
	return []demoStep{
		{"kubectl scale deployment/inflate --replicas 5", 3 * time.Minute, func(ctx context.Context) (string, error) { return d.scaleOut(ctx, 5) }},
		{"git push: NodePool default consolidates after 10s instead of 1m", 2 * time.Minute, d.pushPoolChange},
		{"kubectl scale deployment/inflate --replicas 0", 3 * time.Minute, d.scaleIn},
		{"read the status karpool committed to branch " + reconciler.DefaultStatusBranch, 2 * time.Minute, d.statusCommit},
	}
}

// run walks through the example's steps, stopping at the first that fails; the error names it.
func (d *demo) run(ctx context.Context) error {
	steps := demos[d.example].steps(d)
	start := time.Now()
	fmt.Fprintf(d.out, "\ndemo: %s, in %d steps\n", demos[d.example].title, len(steps))
	for i, s := range steps {
		fmt.Fprintf(d.out, "\n[%d/%d] %s\n", i+1, len(steps), s.title)
		began := time.Now()
		sctx, cancel := context.WithTimeout(ctx, s.timeout)
		shown, err := s.run(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("demo step %d/%d (%s) failed after %s: %w", i+1, len(steps), s.title, since(began), err)
		}
		fmt.Fprintf(d.out, "  ✓ %s (%s)\n", shown, since(began))
	}
	fmt.Fprintf(d.out, "\ndemo passed: %d steps in %s\n", len(steps), since(start))
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// scaleOut scales inflate as `kubectl scale` does, waits until its pods run on one node, and
// shows the node with its labels and cost.
func (d *demo) scaleOut(ctx context.Context, replicas int32) (string, error) {
	if err := d.scale(ctx, replicas); err != nil {
		return "", err
	}
	var node string
	err := poll(ctx, func() (err error) {
		node, err = d.inflateNode(ctx, int(replicas))
		return err
	})
	if err != nil {
		return "", err
	}
	d.node = node
	n := &corev1.Node{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return "", err
	}
	var labels []string
	for _, k := range []string{karpv1.LabelNodePool, corev1.LabelInstanceTypeStable, karpv1.LabelCapacityType, corev1.LabelTopologyZone, "type"} {
		labels = append(labels, k+"="+n.Labels[k])
	}
	fmt.Fprintf(d.out, "  node %s: %s\n", node, strings.Join(labels, " "))
	if err := d.showNodes(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d inflate pods Running on %s (%s)", replicas, node, n.Labels[corev1.LabelInstanceTypeStable]), nil
}

// pushPoolChange commits a shorter consolidateAfter to the pool in the repository, pushes it,
// and waits until PoolSync has applied that commit.
func (d *demo) pushPoolChange(ctx context.Context) (string, error) {
	work, err := os.MkdirTemp("", "karpool-demo-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if _, err := gitRun(ctx, "", "clone", "--quiet", d.remote, work); err != nil {
		return "", err
	}
	file := filepath.Join(work, "nodepool.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	changed := bytes.Replace(data, []byte("consolidateAfter: 1m"), []byte("consolidateAfter: 10s"), 1)
	if bytes.Equal(changed, data) {
		return "", fmt.Errorf("%s has no 'consolidateAfter: 1m' to change", file)
	}
	if err := os.WriteFile(file, changed, 0o644); err != nil {
		return "", err
	}
	if _, err := gitRun(ctx, work, "-c", "user.name=karpool demo", "-c", "user.email=demo@karpool.invalid",
		"commit", "--quiet", "-am", "Consolidate the default pool's empty nodes after 10s"); err != nil {
		return "", err
	}
	sha, err := gitRun(ctx, work, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if _, err := gitRun(ctx, work, "push", "--quiet", "origin", "main"); err != nil {
		return "", err
	}
	d.revision = strings.TrimSpace(sha)
	fmt.Fprintf(d.out, "  pushed %s to main\n", d.revision[:7])
	err = poll(ctx, func() error {
		ps := &v1alpha1.PoolSync{}
		if err := d.c.Get(ctx, client.ObjectKey{Name: d.poolSync}, ps); err != nil {
			return err
		}
		if !strings.HasSuffix(ps.Status.LastAppliedRevision, d.revision) {
			return fmt.Errorf("PoolSync %s applied %q, not %s yet", d.poolSync, ps.Status.LastAppliedRevision, d.revision[:7])
		}
		np := &karpv1.NodePool{}
		if err := d.c.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
			return err
		}
		if got := np.Spec.Disruption.ConsolidateAfter.Duration; got == nil || *got != 10*time.Second {
			return fmt.Errorf("NodePool default does not consolidate after 10s yet")
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("PoolSync %s applied %s: NodePool default consolidates after 10s", d.poolSync, d.revision[:7]), nil
}

// scaleIn scales inflate to zero and waits until the emptied node and its NodeClaim are gone.
func (d *demo) scaleIn(ctx context.Context) (string, error) {
	if err := d.scale(ctx, 0); err != nil {
		return "", err
	}
	err := poll(ctx, func() error {
		var claims karpv1.NodeClaimList
		if err := d.c.List(ctx, &claims); err != nil {
			return err
		}
		if len(claims.Items) > 0 {
			return fmt.Errorf("%d NodeClaims left", len(claims.Items))
		}
		var nodes corev1.NodeList
		if err := d.c.List(ctx, &nodes, client.HasLabels{karpv1.LabelNodePool}); err != nil {
			return err
		}
		if len(nodes.Items) > 0 {
			return fmt.Errorf("node %s still there", nodes.Items[0].Name)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if err := d.showNodes(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("node %s consolidated away (empty for the 10s the pushed pool allows, then checked again and drained)", d.node), nil
}

// statusCommit waits for the status commit that reports the pushed revision with no node left,
// and shows it.
func (d *demo) statusCommit(ctx context.Context) (string, error) {
	branch := reconciler.DefaultStatusBranch
	file := status.Dir(&v1alpha1.PoolSync{ObjectMeta: metav1.ObjectMeta{Name: d.poolSync}}) + "/" + status.ReportFile
	var rep status.Report
	err := poll(ctx, func() error {
		out, err := gitRun(ctx, "", "--git-dir", d.bare, "show", branch+":"+file)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return fmt.Errorf("%s on %s: %w", file, branch, err)
		}
		if !strings.HasSuffix(rep.AppliedRevision, d.revision) || rep.Nodes != 0 {
			return fmt.Errorf("the last status reports revision %s with %d nodes", rep.AppliedRevision, rep.Nodes)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	commit, err := gitRun(ctx, "", "--git-dir", d.bare, "log", "-1", "--format=%h %an: %s", branch)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(d.out, "  %s\n  %s: revision %s, %d nodes, $%.4f/h, %d pending pods\n", strings.TrimSpace(commit), file,
		rep.AppliedRevision, rep.Nodes, rep.PerHour, rep.PendingPods)
	return "the status commit reports the pushed revision and the empty pool", nil
}

// scale sets inflate's replicas, as `kubectl scale` does.
func (d *demo) scale(ctx context.Context, replicas int32) error {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "inflate"}}
	return d.c.Patch(ctx, dep, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))
}

// inflateNode returns the node all n inflate pods run on, or why not yet.
func (d *demo) inflateNode(ctx context.Context, n int) (string, error) {
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
		return "", err
	}
	var nodes []string
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	if nodes = slices.Compact(nodes); running != n || len(pods.Items) != n || len(nodes) != 1 {
		return "", fmt.Errorf("%d of %d inflate pods Running, on %d nodes", running, len(pods.Items), len(nodes))
	}
	return nodes[0], nil
}

// showNodes prints `karpool nodes --once`.
func (d *demo) showNodes(ctx context.Context) error {
	v, err := nodeview.Load(ctx, d.c, d.region, time.Now())
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := nodeview.Render(&b, v); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "  karpool nodes --once:")
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintln(d.out, strings.TrimRight("    "+line, " "))
	}
	return nil
}

// poll calls check every half second until it returns nil; when ctx ends first, it returns the
// last reason.
func poll(ctx context.Context, check func() error) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// gitRun runs git in dir (none: the current directory) without the user's configuration and
// returns its output.
func gitRun(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
