// Package up runs karpool's whole loop on one machine: a local Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok), the AWS simulator with node
// bootstrap, a git server whose repository is seeded with an example's pools, a PoolSync pointing
// at it (which also applies the pools' AWS prerequisites to the simulator), the example's
// workload applied outside Git, and the karpool controller consuming the interruption queue, all
// stopped again (by PID) when the context ends.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/examples"
	"github.com/karpool/karpool/internal/operator"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/reconciler"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/gitserver"
	"github.com/karpool/karpool/testbed/loadsim"
	"github.com/karpool/karpool/testbed/localenv"
)

// ClusterName is the simulated cluster; the examples' discovery tags name it.
const ClusterName = "karpool-local"

// Options configure Run.
type Options struct {
	// Example names the directory of examples/ to run: "workshop" (default), "hpa" or a seed,
	// e.g. "seeds/004-weasel" (legacy manifests are migrated first; a seed with a local rendering
	// runs that instead, see localRenderings). Its pools seed the git repository; its other
	// objects (the workload) are applied to the cluster directly.
	Example string
	// Dir is where the environment's directory is created (default the system temp dir).
	Dir string
	// BinDir holds the control-plane binaries (default as localenv: $KARPOOL_BIN_DIR or bin/).
	BinDir string
	// Interval is the PoolSync interval (default 15 s: a push shows up quickly).
	Interval time.Duration
	// Out receives progress and the summary; the controller's JSON log goes to a file in the
	// environment's directory.
	Out io.Writer
	// Demo walks through the example's seed once everything is up (the examples of demos) and
	// then stops everything: Run returns nil when every step passed, else an error naming the step.
	Demo bool
}

// localRenderings map a seed directory to the example that renders it for the local
// environment: the seed directories keep the documents as their authors wrote them (seed 002's
// Terraform placeholders, seed 003 without pools), the renderings run here.
var localRenderings = map[string]string{"seeds/002-hpa-terraform": "hpa", "seeds/003-workshop": "workshop"}

// Examples lists the names Example accepts: the workshop, hpa and the seeds that hold pools or
// have a rendering.
func Examples() []string {
	names := []string{"workshop", "hpa"}
	entries, _ := fs.ReadDir(examples.FS, "seeds")
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := "seeds/" + e.Name()
		if _, err := readExample(examples.FS, name); err == nil || localRenderings[name] != "" {
			names = append(names, name)
		}
	}
	return names
}

// Run starts everything, prints how to use it, and blocks until ctx ends (with --demo: until
// the demo is done); then it stops everything it started.
func Run(ctx context.Context, opts Options) (err error) {
	ex, err := opts.complete()
	if err != nil {
		return err
	}
	if err := ensureTools(ctx, opts.BinDir, opts.Out); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(opts.Dir, "karpool-up-")
	if err != nil {
		return err
	}
	started := time.Now()
	step := progress(opts.Out)
	done := step("starting the local control plane in " + dir)
	env, err := localenv.Start(ctx, localenv.Options{BinDir: opts.BinDir, Dir: dir,
		Logf: func(f string, a ...any) { fmt.Fprintf(opts.Out, "    "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	done()
	defer func() {
		fmt.Fprintln(opts.Out, "stopping the control plane ...")
		err = errors.Join(err, env.Stop())
	}()
	done = step("starting the AWS simulator (nodes register as kwok nodes)")
	sim, err := awssim.Start(awssim.Options{ClusterName: ClusterName, Kube: env.Config})
	if err != nil {
		return err
	}
	defer sim.Close()
	done()
	done = step("serving the pools repository, seeded from examples/" + opts.Example)
	bare := filepath.Join(dir, "git", "pools.git")
	remote, stopGit, err := serveRepository(ctx, filepath.Dir(bare), opts.Example, ex.pools)
	if err != nil {
		return err
	}
	defer stopGit()
	done()
	c, err := env.Client()
	if err != nil {
		return err
	}
	done = step("applying the example's workload outside Git")
	workload, err := applyWorkload(ctx, c, ex.workload)
	if err != nil {
		return err
	}
	done()
	// The simulated load of Deployments annotated karpool.dev/cpu-load, until Run returns.
	loadCtx, stopLoad := context.WithCancel(log.IntoContext(ctx, funcr.New(func(_, args string) {
		fmt.Fprintln(opts.Out, "  load simulator:", args)
	}, funcr.Options{})))
	defer stopLoad()
	go func() { _ = loadsim.Run(loadCtx, c, 2*time.Second) }()
	done = step("creating PoolSync pools (pools from Git, AWS prerequisites into the simulator, status commits to branch " + reconciler.DefaultStatusBranch + ")")
	ps, err := createPoolSync(ctx, c, remote, sim.Region(), opts.Interval)
	if err != nil {
		return err
	}
	done()
	cfg, closeLog, err := controllerConfig(env, sim, filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	defer closeLog()
	// The demo stops everything when it is done; its verdict is Run's.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var d *demo
	if opts.Demo {
		d = &demo{example: opts.Example, c: c, region: sim.Region(), remote: remote, bare: bare, poolSync: ps.Name, out: opts.Out}
	}
	demoErr, isUp := make(chan error, 1), make(chan struct{})
	done = step("starting the karpool controller (log: " + filepath.Join(dir, "controller.log") + ")")
	err = operator.Run(ctx, cfg, func(r operator.Ready) {
		done()
		summary{env: env, sim: sim, remote: remote, metrics: r.MetricsURL, log: filepath.Join(dir, "controller.log"),
			workload: workload, example: opts.Example, took: time.Since(started), demo: d != nil}.print(opts.Out)
		close(isUp)
		if d != nil {
			go func() {
				demoErr <- d.run(ctx)
				stop()
			}()
		}
	})
	if d == nil {
		return err
	}
	select {
	case <-isUp:
		return errors.Join(err, <-demoErr)
	default:
		if err == nil && ctx.Err() != nil {
			err = errors.New("stopped before the demo began")
		}
		return err
	}
}

// complete fills in the defaults and reads the example.
func (opts *Options) complete() (*example, error) {
	if opts.Example == "" {
		opts.Example = "workshop"
	}
	if opts.Interval <= 0 {
		opts.Interval = 15 * time.Second
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if r, ok := localRenderings[opts.Example]; ok {
		fmt.Fprintf(opts.Out, "examples/%s keeps the seed as written; running its local rendering, examples/%s\n", opts.Example, r)
		opts.Example = r
	}
	if _, ok := demos[opts.Example]; opts.Demo && !ok {
		return nil, fmt.Errorf("--demo walks through the %s examples, not %s", strings.Join(slices.Sorted(maps.Keys(demos)), " and "), opts.Example)
	}
	if _, err := fs.Stat(examples.FS, opts.Example); err != nil {
		return nil, fmt.Errorf("unknown example %q; choose one of: %s", opts.Example, strings.Join(Examples(), ", "))
	}
	ex, err := readExample(examples.FS, opts.Example)
	if err != nil {
		return nil, fmt.Errorf("example %s: %w; choose one of: %s", opts.Example, err, strings.Join(Examples(), ", "))
	}
	return ex, nil
}

// createPoolSync creates the PoolSync "pools" for the repository at remote.
func createPoolSync(ctx context.Context, c client.Client, remote, region string, interval time.Duration) (*v1alpha1.PoolSync, error) {
	ps := &v1alpha1.PoolSync{
		ObjectMeta: metav1.ObjectMeta{Name: "pools"},
		Spec: v1alpha1.PoolSyncSpec{
			URL: remote, Interval: metav1.Duration{Duration: interval}, Prune: true,
			Ref: &v1alpha1.GitRef{Branch: "main"},
			// The AWS prerequisites (node role, instance profiles, controller role and policy,
			// interruption queue and rules) are made in the simulator as in an account.
			AWS:    &v1alpha1.AWSSpec{Region: region, ClusterName: ClusterName, Mode: v1alpha1.AWSModeApply},
			Report: &v1alpha1.ReportSpec{StatusCommits: &v1alpha1.StatusCommitSpec{Branch: reconciler.DefaultStatusBranch}},
		},
	}
	if err := c.Create(ctx, ps); err != nil {
		return nil, fmt.Errorf("creating the PoolSync: %w", err)
	}
	return ps, nil
}

// controllerConfig is the controller's configuration on the environment, logging to logPath;
// the function it returns closes the log.
func controllerConfig(env *localenv.Env, sim *awssim.Server, logPath string) (operator.Config, func(), error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return operator.Config{}, nil, err
	}
	probeAddr, err := freeAddr()
	if err != nil {
		return operator.Config{}, nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return operator.Config{}, nil, err
	}
	return operator.Config{
		Kube: env.Config, AWS: sim.AWSConfig(), ClusterName: ClusterName,
		// The queue PoolSync creates: the rules it creates send the instances' events there.
		InterruptionQueue: ClusterName,
		MetricsAddr:       metricsAddr, ProbeAddr: probeAddr,
		Log: operator.NewJSONLogger(logFile, slog.LevelInfo),
	}, func() { _ = logFile.Close() }, nil
}

// summary is what `karpool up` prints once everything is up: where things are and what to try.
type summary struct {
	env             *localenv.Env
	sim             *awssim.Server
	remote, metrics string
	log, example    string
	workload        []*build.Object
	took            time.Duration
	demo            bool
}

func (s summary) print(out io.Writer) {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("")
	say("karpool is up (%s, example %s) in %s", ClusterName, s.example, s.took.Round(100*time.Millisecond))
	say("  kubeconfig:    export KUBECONFIG=%s", s.env.Kubeconfig)
	say("  git remote:    git clone %s", s.remote)
	say("  metrics:       %s", s.metrics)
	say("  AWS simulator: %s (state: %sstate)", s.sim.URL(), s.sim.AdminURL())
	say("  controller log: %s", s.log)
	for _, o := range s.workload {
		say("  workload:      %s (applied outside Git, field manager %s)", o.ID(), WorkloadFieldManager)
	}
	if s.demo {
		return
	}
	say("")
	say("try:")
	say("  kubectl get poolsync,nodepools,ec2nodeclasses")
	for _, o := range s.workload {
		switch {
		case o.Object.GetKind() != "Deployment":
		case o.Object.GetAnnotations()[loadsim.LoadAnnotation] != "":
			say("  kubectl annotate%s deployment/%s %s=20 --overwrite   # the load its HPA scales on", namespaceFlag(o.Object.GetNamespace()),
				o.Object.GetName(), loadsim.LoadAnnotation)
			say("  kubectl get hpa -w")
		default:
			say("  kubectl scale%s deployment/%s --replicas 5", namespaceFlag(o.Object.GetNamespace()), o.Object.GetName())
		}
	}
	say("  kubectl get nodeclaims,nodes -w")
	say("  git clone %s pools && cd pools   # edit a pool, commit, git push", s.remote)
	say("stop with Ctrl-C")
}

// progress returns a function that prints a start-up step as it begins and, through the
// function it returns, how long it took.
func progress(out io.Writer) func(what string) func() {
	return func(what string) func() {
		fmt.Fprintf(out, "▸ %s ...\n", what)
		began := time.Now()
		return func() { fmt.Fprintf(out, "  ✓ %s\n", since(began)) }
	}
}

// namespaceFlag is kubectl's -n flag for ns, empty for the default namespace.
func namespaceFlag(ns string) string {
	if ns == metav1.NamespaceDefault {
		return ""
	}
	return " -n " + ns
}

// ensureTools builds missing control-plane binaries with hack/tools.sh when running inside
// the repository (its output shows the progress), and otherwise says how to get them.
func ensureTools(ctx context.Context, binDir string, out io.Writer) error {
	_, err := localenv.CheckBinaries(binDir)
	var missing *localenv.MissingBinariesError
	if err == nil || !errors.As(err, &missing) {
		return err
	}
	if _, statErr := os.Stat(filepath.Join("hack", "tools.sh")); statErr != nil {
		return fmt.Errorf("%w; run 'make tools' in the karpool repository (or set KARPOOL_BIN_DIR)", err)
	}
	fmt.Fprintln(out, "building the missing tools with hack/tools.sh (cached for the next run) ...")
	cmd := exec.CommandContext(ctx, "bash", "hack/tools.sh")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/tools.sh: %w", err)
	}
	_, err = localenv.CheckBinaries(binDir)
	return err
}

// serveRepository creates root/pools.git with one commit holding files (the example's pools),
// serves root over HTTP on 127.0.0.1 and returns the clone URL.
func serveRepository(ctx context.Context, root, example string, files map[string][]byte) (string, func(), error) {
	work := filepath.Join(root, "seed")
	bare := filepath.Join(root, "pools.git")
	if err := writeFiles(work, files); err != nil {
		return "", nil, err
	}
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", bare},
		{"-C", work, "init", "--quiet", "--initial-branch=main"},
		{"-C", work, "add", "--all"},
		{"-C", work, "-c", "user.name=karpool up", "-c", "user.email=up@karpool.invalid", "commit", "--quiet", "-m", "Seed from examples/" + example},
		{"-C", work, "push", "--quiet", bare, "main"},
	} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := gitserver.EnablePush(bare); err != nil {
		return "", nil, err
	}
	h, err := gitserver.Handler(root)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return fmt.Sprintf("http://%s/pools.git", ln.Addr()), func() { _ = srv.Close() }, nil
}

// writeFiles writes files (by slash-separated path) under dir.
func writeFiles(dir string, files map[string][]byte) error {
	for rel, data := range files {
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
