package operator_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// karpoolBinary builds the karpool command once per test binary for the tests that run the
// controller as a separate process.
var karpoolBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "karpool-operator-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "karpool")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/karpool/karpool/cmd/karpool").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// controllerProcess is a `karpool controller` process against the harness's cluster and
// simulator.
type controllerProcess struct {
	t               testing.TB
	cmd             *exec.Cmd
	metrics, probes string // listen addresses
	logPath         string
	exited          chan struct{}
}

// startProcess starts `karpool controller` with these extra flags. It is stopped (by PID) when
// the test ends, after the harness's cleanup, which needs a running controller to remove the
// nodes' finalizers.
func (h *harness) startProcess(extra ...string) *controllerProcess {
	h.t.Helper()
	bin, err := karpoolBinary()
	if err != nil {
		h.t.Fatal(err)
	}
	p := &controllerProcess{t: h.t, metrics: freeAddr(h.t), probes: freeAddr(h.t), exited: make(chan struct{})}
	p.logPath = filepath.Join(h.t.TempDir(), fmt.Sprintf("controller-%s.log", p.probes[strings.LastIndex(p.probes, ":")+1:]))
	logf, err := os.Create(p.logPath)
	if err != nil {
		h.t.Fatal(err)
	}
	args := append([]string{"controller", "--cluster-name", clusterName, "--kubeconfig", h.env.Kubeconfig,
		"--metrics-bind-address", p.metrics, "--health-probe-bind-address", p.probes, "--gc-interval", "5s"}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), h.sim.Env()...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait() // a signalled exit status says nothing the test does not know
		_ = logf.Close()
		close(p.exited)
	}()
	h.t.Cleanup(func() {
		h.cleanup()
		p.signal(syscall.SIGKILL)
		if h.t.Failed() {
			data, _ := os.ReadFile(p.logPath)
			h.t.Logf("log of controller %d:\n%s", p.cmd.Process.Pid, tail(string(data), 40))
		}
	})
	return p
}

// signal sends sig to the process (by PID) and waits until it exited.
func (p *controllerProcess) signal(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.exited
}

// log returns the process's log so far.
func (p *controllerProcess) log() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	return string(data)
}

// logs reports whether the log has a line with this message.
func (p *controllerProcess) logs(message string) bool {
	return strings.Contains(p.log(), fmt.Sprintf("%q", message))
}

// peakRSS is the process's peak resident set size in bytes (VmHWM, kept by the kernel, so
// no sampling can miss the peak). It must be read before the process exits.
func (p *controllerProcess) peakRSS() (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
}

// probe GETs a probe path and returns an error unless it answers 200.
func (p *controllerProcess) probe(path string) error {
	resp, err := http.Get("http://" + p.probes + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", path, resp.Status, body)
	}
	return nil
}

// scrape reads the metrics endpoint.
func (p *controllerProcess) scrape() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// metricValue sums the samples of a family whose labels include these: counters and gauges
// by value, histograms and summaries by observation count. found is false when no sample matches.
func metricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) (sum float64, found bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			match := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					match = true
				}
			}
			if !match {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.GetSummary().GetSampleCount())
		}
	}
	return sum, found
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
