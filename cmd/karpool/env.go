package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// envFlags defines flags whose defaults come from Karpenter's environment variables, so the
// settings of a Karpenter Deployment (its chart sets them as env) carry over unchanged. Each
// flag's help names its variable. A value that does not parse is reported by err, naming the
// variable, instead of being ignored.
type envFlags struct {
	fs  *pflag.FlagSet
	bad []error
}

func (e *envFlags) fail(key, value, want string) {
	e.bad = append(e.bad, fmt.Errorf("environment variable %s=%q is not %s: fix or unset it", key, value, want))
}

func withEnv(usage, key string) string { return fmt.Sprintf("%s (env %s)", usage, key) }

func (e *envFlags) StringVar(p *string, name, key, def, usage string) {
	if v := os.Getenv(key); v != "" {
		def = v
	}
	e.fs.StringVar(p, name, def, withEnv(usage, key))
}

func (e *envFlags) DurationVar(p *time.Duration, name, key string, def time.Duration, usage string) {
	if v := os.Getenv(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		} else {
			e.fail(key, v, `a duration such as "10s"`)
		}
	}
	e.fs.DurationVar(p, name, def, withEnv(usage, key))
}

func (e *envFlags) IntVar(p *int, name, key string, def int, usage string) {
	e.fs.IntVar(p, name, e.envInt(key, def), withEnv(usage, key))
}

// envInt reads an integer variable, def when it is unset or does not parse.
func (e *envFlags) envInt(key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.fail(key, v, "an integer")
		return def
	}
	return n
}

func (e *envFlags) Float64Var(p *float64, name, key string, def float64, usage string) {
	if v := os.Getenv(key); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			def = f
		} else {
			e.fail(key, v, "a number")
		}
	}
	e.fs.Float64Var(p, name, def, withEnv(usage, key))
}

// envBool reads a boolean variable; ok is false when it is unset or does not parse.
func (e *envFlags) envBool(key string) (value, ok bool) {
	v := os.Getenv(key)
	if v == "" {
		return false, false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(key, v, "true or false")
		return false, false
	}
	return b, true
}

// err reports every environment variable that did not parse.
func (e *envFlags) err() error { return errors.Join(e.bad...) }

// listenAddr is where a server listens by default: on every interface in a pod (the kubelet's
// probes and Prometheus come from outside it), on loopback elsewhere (a controller on a laptop
// should not be reachable from the network). client-go's in-cluster configuration keys on the
// same variable.
func listenAddr(port int) string {
	host := "127.0.0.1"
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		host = ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}
