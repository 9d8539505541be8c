package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAWSSimServesUntilCancelled(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(faults, []byte(`{"throttleRate":0.5,"launchLatency":"1s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	var out, errOut syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"awssim", "--addr", "127.0.0.1:0", "--cluster", "demo", "--faults", faults})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	endpoint := regexp.MustCompile(`endpoint (http://127\.0\.0\.1:\d+)`)
	var url string
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	// The exports follow the endpoint line; the last one ends the start-up output.
	for url == "" {
		if m := endpoint.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "export AWS_EC2_METADATA_DISABLED=") {
			url = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("awssim exited early: %v\n%s%s", err, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("no endpoint printed within 30s:\n%s", out.String())
		case <-tick.C:
		}
	}
	for _, want := range []string{"export AWS_ENDPOINT_URL=" + url, "export AWS_ACCESS_KEY_ID=", "export AWS_REGION=us-east-1"} {
		if !bytes.Contains([]byte(out.String()), []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	resp, err := http.Get(url + "/_awssim/state")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		ClusterName string `json:"clusterName"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.ClusterName != "demo" {
		t.Errorf("state: %v %+v", err, st)
	}
	resp, err = http.Get(url + "/_awssim/faults")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ThrottleRate  float64 `json:"throttleRate"`
		LaunchLatency string  `json:"launchLatency"`
	}
	err = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if err != nil || f.ThrottleRate != 0.5 || f.LaunchLatency != "1s" {
		t.Errorf("faults from --faults: %v %+v", err, f)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("awssim returned %v after cancellation", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("awssim did not stop")
	}
	if _, err := http.Get(url + "/_awssim/state"); err == nil {
		t.Error("still serving after stop")
	}
}

func TestAWSSimUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"awssim", "--addr", "0.0.0.0:4566"},
		{"awssim", "--addr", "127.0.0.1:0", "--faults", filepath.Join(t.TempDir(), "missing.json")},
		{"awssim", "extra-arg"},
	} {
		_, err := run(args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: error %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"throttleRat":1}`), 0o644)
	if _, err := run("awssim", "--addr", "127.0.0.1:0", "--faults", bad); err == nil || exitCode(err) != 1 {
		t.Errorf("bad faults file: %v", err)
	}
}
