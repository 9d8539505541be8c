package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/config/crd"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/localenv"
)

// system is one autoscaler under test, started on a fresh control plane.
type system interface {
	name() string
	// start installs what the system needs in the cluster for the scenario and starts its
	// process, logging into logDir.
	start(ctx context.Context, env *localenv.Env, c client.Client, sc scenario, logDir string) (*process, error)
	// stop releases what start set up besides the process.
	stop()
}

// process is an autoscaler's OS process: stopped by its PID, measured through /proc.
type process struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

func startProcess(logPath string, env []string, bin string, args ...string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &process{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status of a process we stop says nothing
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// usage reads the process's peak resident memory (MiB) and CPU seconds so far.
func (p *process) usage() (peakMiB, cpuSeconds float64, err error) {
	pid := strconv.Itoa(p.cmd.Process.Pid)
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			peakMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces) start at the state, field 3;
	// utime and stime are fields 14 and 15, in clock ticks of 1/100 s (USER_HZ on Linux).
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return peakMiB, (utime + stime) / 100, nil
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the PID, then SIGKILL after 10 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// applyFile server-side applies every object of a YAML file.
func applyFile(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := build.Build(ctx, map[string][]byte{filepath.Base(path): data}, "")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.Object), client.FieldOwner("benchvs"), client.ForceOwnership); err != nil {
			return fmt.Errorf("%s: applying %s: %w", path, o.ID(), err)
		}
	}
	return nil
}

// karpool runs `karpool controller` against the AWS simulator, which registers a kwok Node
// for every instance it runs.
type karpool struct {
	bin, dir string
	metrics  string // the controller's metrics address, which also serves pprof
	sim      *awssim.Server
	simLog   *os.File
}

func (k *karpool) name() string { return "karpool" }

func (k *karpool) start(ctx context.Context, env *localenv.Env, c client.Client, sc scenario, logDir string) (*process, error) {
	// The simulator's own log (launches, Node registrations) lines up with karpool's.
	simLog, err := os.Create(filepath.Join(logDir, "awssim.log"))
	if err != nil {
		return nil, err
	}
	k.simLog = simLog
	logf := func(format string, args ...any) {
		fmt.Fprintf(simLog, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
	}
	sim, err := awssim.Start(awssim.Options{ClusterName: clusterName, Kube: env.Config, Logf: logf})
	if err != nil {
		return nil, err
	}
	k.sim = sim
	sim.SetFaults(awssim.Faults{RegistrationLatency: awssim.Duration{Duration: sc.registration}})
	if _, err := iam.NewFromConfig(sim.AWSConfig()).CreateRole(ctx, &iam.CreateRoleInput{
		RoleName:                 aws.String("KarpenterNodeRole-" + clusterName),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`),
	}); err != nil {
		return nil, fmt.Errorf("creating the node role in the simulator: %w", err)
	}
	if err := applyFile(ctx, c, filepath.Join(k.dir, "pools", "pools.yaml")); err != nil {
		return nil, err
	}
	metrics, probes := freeAddr(), freeAddr()
	if metrics == "" || probes == "" {
		return nil, fmt.Errorf("no free port on 127.0.0.1")
	}
	k.metrics = metrics
	return startProcess(filepath.Join(logDir, "karpool.log"), sim.Env(), k.bin, "controller",
		"--cluster-name", clusterName, "--kubeconfig", env.Kubeconfig, "--enable-profiling",
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probes, "--leader-elect=false")
}

// heapProfile saves the controller's heap profile (`go tool pprof` reads it).
func (k *karpool) heapProfile(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+k.metrics+"/debug/pprof/heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s", resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (k *karpool) stop() {
	if k.sim != nil {
		k.sim.Close()
		k.sim = nil
	}
	if k.simLog != nil {
		k.simLog.Close()
		k.simLog = nil
	}
}

// karpenter runs Karpenter's kwok provider, which creates the kwok Nodes itself.
type karpenter struct {
	bin, crds, dir string
}

func (k *karpenter) name() string { return "karpenter" }

func (k *karpenter) start(ctx context.Context, env *localenv.Env, c client.Client, sc scenario, logDir string) (*process, error) {
	crds, err := crd.Load(os.DirFS(k.crds), "*.yaml")
	if err != nil || len(crds) == 0 {
		return nil, fmt.Errorf("reading Karpenter's CRDs in %s (hack/tools.sh karpenter builds them): %v", k.crds, err)
	}
	if err := localenv.ApplyCRDs(ctx, c, crds); err != nil {
		return nil, err
	}
	pools := filepath.Join(logDir, "karpenter-pools.yaml")
	if err := os.WriteFile(pools, []byte(karpenterPools(sc.registration)), 0o644); err != nil {
		return nil, err
	}
	if err := applyFile(ctx, c, pools); err != nil {
		return nil, err
	}
	// Karpenter binds its metrics and probe servers to every interface; free ports keep it from
	// colliding with anything else on this machine for the few minutes it runs.
	metrics, probes := freePort(), freePort()
	return startProcess(filepath.Join(logDir, "karpenter.log"), []string{
		"KUBECONFIG=" + env.Kubeconfig, "DISABLE_LEADER_ELECTION=true",
		"INSTANCE_TYPES_FILE_PATH=" + filepath.Join(k.dir, "instance-types.json"),
		"METRICS_PORT=" + metrics, "HEALTH_PROBE_PORT=" + probes, "LOG_LEVEL=info",
	}, k.bin)
}

func (k *karpenter) stop() {}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer ln.Close()
	return ln.Addr().String()
}

func freePort() string {
	a := freeAddr()
	return a[strings.LastIndexByte(a, ':')+1:]
}

// poll calls check every 500 ms until it is done, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s", timeout)
		case <-t.C:
		}
	}
}
