package confined

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: y\n"

func build(t *testing.T, req Request) (*Result, *Error) {
	t.Helper()
	res, err := Build(context.Background(), req)
	if err == nil {
		return res, nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("not a build error: %v", err)
	}
	return nil, e
}

func TestBuildsInAChild(t *testing.T) {
	files := map[string][]byte{
		"k/kustomization.yaml": []byte("resources:\n- cm.yaml\nnamePrefix: p-\nbuildMetadata: [originAnnotations]\n"),
		"k/cm.yaml":            []byte(configMap),
		"other.yaml":           []byte("not: read\n"),
	}
	res, err := build(t, Request{Files: files, Dir: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || !strings.Contains(string(res.Objects[0].JSON), `"name":"p-a"`) || res.Objects[0].OriginPath != "cm.yaml" {
		t.Fatalf("objects %+v", res.Objects)
	}
	if got := strings.Join(res.Reads, " "); got != "k/cm.yaml k/kustomization.yaml" {
		t.Fatalf("reads %s", got)
	}
}

// listener counts the connections made to a 127.0.0.1 port.
func listener(t *testing.T) (addr string, conns *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	conns = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), conns
}

func TestRemoteFilesAreNotFetched(t *testing.T) {
	addr, conns := listener(t)
	for _, k := range []string{
		"resources:\n- http://%s/cm.yaml\n",
		"configMapGenerator:\n- name: x\n  files:\n  - http://%s/secret\n",
		"patches:\n- path: https://%s/p.yaml\n",
	} {
		files := map[string][]byte{"kustomization.yaml": []byte(fmt.Sprintf(k, addr)), "cm.yaml": []byte(configMap)}
		_, err := build(t, Request{Files: files})
		if err == nil || err.Kind != Remote || !strings.Contains(err.Ref, addr) {
			t.Errorf("%q: got %+v, want a Remote error naming %s", k, err, addr)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}
}

func TestRemoteBasesRunNothing(t *testing.T) {
	// git runs the --upload-pack program for a local repository: a script that leaves a marker.
	dir := t.TempDir()
	marker, script := filepath.Join(dir, "ran"), filepath.Join(dir, "pack.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{
		"resources:\n- file://%[1]s/r.git//base?ref=--upload-pack=%[2]s\n",
		"components:\n- file://%[1]s/r.git//c?ref=--upload-pack=%[2]s\n",
		"generators:\n- file://%[1]s/r.git//g?ref=--upload-pack=%[2]s\n",
	} {
		files := map[string][]byte{"kustomization.yaml": []byte(fmt.Sprintf(k, dir, script))}
		if _, err := build(t, Request{Files: files}); err == nil || err.Kind != Remote {
			t.Errorf("%q: got %+v, want a Remote error", k, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a remote base ran a command")
	}
}

func TestOnDiskReadsStayInTheRoot(t *testing.T) {
	top := t.TempDir()
	secret := filepath.Join(top, "secret.yaml")
	if err := os.WriteFile(secret, []byte(configMap), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(top, "repo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"resources:\n- link.yaml\n", "resources:\n- ../secret.yaml\n", "resources:\n- " + secret + "\n"} {
		if err := os.WriteFile(filepath.Join(root, "kustomization.yaml"), []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := build(t, Request{Root: root})
		if err == nil || err.Kind != Outside {
			t.Errorf("%q: got %+v, want an Outside error", k, err)
		}
		for _, r := range err.Reads {
			if !strings.HasPrefix(filepath.Join(root, r), root+"/") {
				t.Errorf("%q: read %s", k, r)
			}
		}
	}
}

func TestCapsHold(t *testing.T) {
	bomb := "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	big := strings.Repeat("# filler\n", 200_000)
	for name, c := range map[string]struct {
		files  map[string][]byte
		limits Limits
		file   string
	}{
		"alias bomb": {map[string][]byte{"kustomization.yaml": []byte("resources:\n- bomb.yaml\n"), "bomb.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n" + bomb)}, Limits{}, "bomb.yaml"},
		"file size":  {map[string][]byte{"kustomization.yaml": []byte("resources:\n- cm.yaml\n"), "cm.yaml": []byte(big + configMap)}, Limits{FileBytes: 1 << 20}, "cm.yaml"},
		"objects":    {map[string][]byte{"kustomization.yaml": []byte("resources:\n- cm.yaml\n"), "cm.yaml": []byte(configMap + "---\n" + strings.Replace(configMap, "name: a", "name: b", 1))}, Limits{Objects: 1}, ""},
	} {
		_, err := build(t, Request{Files: c.files, Limits: c.limits})
		if err == nil || err.Kind != Limit || err.File != c.file {
			t.Errorf("%s: got %+v, want a Limit error on %q", name, err, c.file)
		}
	}
}

func TestMemoryLimitEndsTheChildOnly(t *testing.T) {
	// 40 copies of a 4 MiB value: more than a 64 MiB child holds once kustomize has parsed,
	// copied and encoded them.
	value := strings.Repeat("x", 4<<20)
	files := map[string][]byte{"kustomization.yaml": []byte("resources:\n- cm.yaml\n")}
	var cms []string
	for i := range 40 {
		cms = append(cms, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n  v: %s\n", i, value))
	}
	files["cm.yaml"] = []byte(strings.Join(cms, "---\n"))
	_, err := build(t, Request{Files: files, Limits: Limits{Memory: 64 << 20, FileBytes: 512 << 20}})
	if err == nil || err.Kind != Limit || !strings.Contains(err.Message, "memory") {
		t.Fatalf("got %+v, want the memory limit", err)
	}
}

func TestDeadlineKillsTheChild(t *testing.T) {
	// Thousands of objects patched by a label selector: seconds of kustomize work, far past a
	// 200 ms deadline.
	var b strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  labels: {a: b}\n", i)
	}
	files := map[string][]byte{
		"kustomization.yaml": []byte("resources:\n- cms.yaml\npatches:\n- target: {labelSelector: a=b}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {\"k\": \"v\"}}]'\n"),
		"cms.yaml":           []byte(b.String()),
	}
	start := time.Now()
	_, err := build(t, Request{Files: files, Limits: Limits{Timeout: 200 * time.Millisecond}})
	if err == nil || err.Kind != Timeout {
		t.Fatalf("got %+v after %v, want the deadline", err, time.Since(start))
	}
}
