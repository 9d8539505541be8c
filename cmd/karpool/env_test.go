package main

import (
	"strings"
	"testing"
)

// TestControllerReadsKarpentersEnvironment: a Karpenter Deployment's env settings become the
// controller's flag defaults, and the help names each variable.
func TestControllerReadsKarpentersEnvironment(t *testing.T) {
	env := map[string]struct{ flag, value, want string }{
		"CLUSTER_NAME":               {"cluster-name", "prod", "prod"},
		"CLUSTER_ENDPOINT":           {"cluster-endpoint", "https://api.example", "https://api.example"},
		"CLUSTER_CA_BUNDLE":          {"cluster-ca", "Q0E=", "Q0E="},
		"BATCH_MAX_DURATION":         {"batch-max-duration", "20s", "20s"},
		"BATCH_IDLE_DURATION":        {"batch-idle-duration", "2s", "2s"},
		"INTERRUPTION_QUEUE":         {"interruption-queue", "prod", "prod"},
		"LOG_LEVEL":                  {"log-level", "debug", "debug"},
		"FEATURE_GATES":              {"feature-gates", "SpotToSpotConsolidation=true", "SpotToSpotConsolidation=true"},
		"KUBE_CLIENT_QPS":            {"kube-client-qps", "50", "50"},
		"KUBE_CLIENT_BURST":          {"kube-client-burst", "70", "70"},
		"VM_MEMORY_OVERHEAD_PERCENT": {"vm-memory-overhead-percent", "0.05", "0.05"},
		"RESERVED_ENIS":              {"reserved-enis", "1", "1"},
		"SYSTEM_NAMESPACE":           {"namespace", "karpenter", "karpenter"},
		"METRICS_PORT":               {"metrics-bind-address", "9090", "127.0.0.1:9090"},
		"HEALTH_PROBE_PORT":          {"health-probe-bind-address", "9091", "127.0.0.1:9091"},
		"DISABLE_LEADER_ELECTION":    {"leader-elect", "true", "false"},
		"PREFERENCE_POLICY":          {"preference-policy", "Ignore", "Ignore"},
		"MIN_VALUES_POLICY":          {"min-values-policy", "BestEffort", "BestEffort"},
		"IGNORE_DRA_REQUESTS":        {"ignore-dra-requests", "false", "false"},
		"ENABLE_PROFILING":           {"enable-profiling", "true", "true"},
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for key, e := range env {
		t.Setenv(key, e.value)
	}
	flags := newControllerCommand().Flags()
	for key, e := range env {
		f := flags.Lookup(e.flag)
		if f == nil {
			t.Errorf("%s: no flag --%s", key, e.flag)
			continue
		}
		if f.DefValue != e.want {
			t.Errorf("%s=%s: --%s defaults to %q, want %q", key, e.value, e.flag, f.DefValue, e.want)
		}
		if !strings.Contains(f.Usage, key) {
			t.Errorf("--%s help %q does not name %s", e.flag, f.Usage, key)
		}
	}
}

// TestControllerListensEverywhereOnlyInAPod: the kubelet's probes and Prometheus reach a pod
// from outside; a laptop's controller stays on loopback.
func TestControllerListensEverywhereOnlyInAPod(t *testing.T) {
	for _, c := range []struct {
		host           string
		metrics, probe string
	}{
		{"", "127.0.0.1:8080", "127.0.0.1:8081"},
		{"10.100.0.1", ":8080", ":8081"},
	} {
		t.Setenv("KUBERNETES_SERVICE_HOST", c.host)
		flags := newControllerCommand().Flags()
		if got := flags.Lookup("metrics-bind-address").DefValue; got != c.metrics {
			t.Errorf("KUBERNETES_SERVICE_HOST=%q: metrics on %q, want %q", c.host, got, c.metrics)
		}
		if got := flags.Lookup("health-probe-bind-address").DefValue; got != c.probe {
			t.Errorf("KUBERNETES_SERVICE_HOST=%q: probes on %q, want %q", c.host, got, c.probe)
		}
	}
}

// TestBadEnvironmentIsAUsageError: a value that does not parse stops the controller with the
// variable's name, before anything connects anywhere.
func TestBadEnvironmentIsAUsageError(t *testing.T) {
	for key, value := range map[string]string{
		"BATCH_MAX_DURATION":         "ten",
		"KUBE_CLIENT_QPS":            "fast",
		"METRICS_PORT":               "http",
		"VM_MEMORY_OVERHEAD_PERCENT": "7.5%",
		"DISABLE_LEADER_ELECTION":    "yes please",
		"IGNORE_DRA_REQUESTS":        "false",
		"PREFERENCE_POLICY":          "Sometimes",
		"MIN_VALUES_POLICY":          "Loose",
	} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, value)
			_, err := run("controller", "--cluster-name", "x")
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Fatalf("%s=%q: error %v, want one naming %s", key, value, err, key)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 for a usage error", code)
			}
		})
	}
	t.Run("log level", func(t *testing.T) {
		t.Setenv("LOG_LEVEL", "verbose")
		_, err := run("controller", "--cluster-name", "x")
		if err == nil || !strings.Contains(err.Error(), "verbose") || exitCode(err) != 2 {
			t.Fatalf("LOG_LEVEL=verbose: error %v, want a usage error naming the value", err)
		}
	})
}
