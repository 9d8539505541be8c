// Package gittest gives tests real Git repositories and a real Git HTTP server: the git binary makes
// the commits, and `git http-backend` serves them through net/http/cgi on 127.0.0.1, optionally
// behind TLS and basic auth, and can be stopped and started again on the same port.
package gittest

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/karpool/karpool/testbed/gitserver"
)

// Repo is a bare repository and a working clone that pushes to it.
type Repo struct {
	t    testing.TB
	Bare string // path of the bare repository
	Work string // path of the working clone
	// Name is the bare repository's directory name, the path under a Server's root.
	Name string
}

// NewRepo creates an empty bare repository (with pushes over HTTP allowed) under dir and a
// working clone on branch main.
func NewRepo(t testing.TB, dir, name string) *Repo {
	t.Helper()
	r := &Repo{t: t, Bare: filepath.Join(dir, name), Work: filepath.Join(dir, name+"-work"), Name: name}
	r.git(dir, "init", "--quiet", "--bare", "--initial-branch=main", r.Bare)
	r.git(r.Bare, "config", "http.receivepack", "true")
	r.git(dir, "init", "--quiet", "--initial-branch=main", r.Work)
	r.git(r.Work, "remote", "add", "origin", r.Bare)
	return r
}

// FileURL is the file:// URL of the bare repository.
func (r *Repo) FileURL() string { return "file://" + r.Bare }

// Write creates or replaces a file of the working clone.
func (r *Repo) Write(path, content string) {
	r.t.Helper()
	full := filepath.Join(r.Work, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// CopyDir copies the regular files of a directory into the working clone under dst.
func (r *Repo) CopyDir(src, dst string) {
	r.t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			r.CopyDir(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			r.t.Fatal(err)
		}
		r.Write(filepath.Join(dst, e.Name()), string(data))
	}
}

// Remove deletes a file or directory of the working clone.
func (r *Repo) Remove(path string) {
	r.t.Helper()
	if err := os.RemoveAll(filepath.Join(r.Work, path)); err != nil {
		r.t.Fatal(err)
	}
}

// Commit commits everything in the working clone, pushes it to main and returns the commit's
// SHA-1.
func (r *Repo) Commit(msg string) string {
	r.t.Helper()
	sha := r.CommitLocal(msg)
	r.git(r.Work, "push", "--quiet", "origin", "HEAD:main")
	return sha
}

// CommitLocal commits everything in the working clone without pushing.
func (r *Repo) CommitLocal(msg string) string {
	r.t.Helper()
	r.git(r.Work, "add", "--all")
	r.git(r.Work, "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "--quiet", "--allow-empty", "-m", msg)
	return r.Head()
}

// Head is the working clone's current commit.
func (r *Repo) Head() string {
	r.t.Helper()
	return strings.TrimSpace(r.git(r.Work, "rev-parse", "HEAD"))
}

// ResetHard moves the working clone back to commit (dropping later commits) without pushing.
func (r *Repo) ResetHard(commit string) {
	r.t.Helper()
	r.git(r.Work, "reset", "--quiet", "--hard", commit)
}

// ForcePush pushes the working clone's HEAD to main, rewriting its history.
func (r *Repo) ForcePush() {
	r.t.Helper()
	r.git(r.Work, "push", "--quiet", "--force", "origin", "HEAD:main")
}

// Tag creates an annotated tag at HEAD and pushes it.
func (r *Repo) Tag(name string) {
	r.t.Helper()
	r.git(r.Work, "-c", "user.name=test", "-c", "user.email=test@example.com", "tag", "-a", "-m", name, name)
	r.git(r.Work, "push", "--quiet", "origin", name)
}

// Push pushes a branch of the working clone.
func (r *Repo) Push(branch string) {
	r.t.Helper()
	r.git(r.Work, "push", "--quiet", "origin", "HEAD:"+branch)
}

func (r *Repo) git(dir string, args ...string) string {
	r.t.Helper()
	return Git(r.t, dir, args...)
}

// Git runs git in dir, as a test author without the developer's configuration, and returns its
// output without the trailing newline; a failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// Server serves every bare repository under Root over HTTP(S) through `git http-backend`.
type Server struct {
	Root string
	// Username and Password, when set, are required as HTTP basic auth.
	Username, Password string
	// TLS serves https with a self-signed certificate (CA returns it).
	TLS bool

	mu      sync.Mutex
	addr    string
	srv     *httptest.Server
	handler http.Handler
	// Requests counts the requests served, including refused ones.
	requests int
}

// Start starts serving, on the same port as before if it was started earlier.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	cgiHandler, err := gitserver.Handler(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		if s.Username != "" || s.Password != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != s.Username || p != s.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			// http-backend refuses pushes from anonymous users.
			req.Header.Set("Remote-User", u)
		}
		cgiHandler.ServeHTTP(w, req)
	})
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler, ErrorLog: log.New(io.Discard, "", 0)}}
	if s.TLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	s.addr = l.Addr().String()
	s.srv = srv
}

// Stop stops serving: connections are refused until Start.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// URL is the address of the repository named name.
func (s *Server) URL(name string) string {
	scheme := "http"
	if s.TLS {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s/%s", scheme, s.addr, name)
}

// CA is the PEM certificate a client must trust to reach a TLS server.
func (s *Server) CA() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil || s.srv.TLS == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Requests is the number of requests served so far.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}
