// Package giteatest runs a real Gitea (bin/gitea, built by `make tools`) for a test: on
// 127.0.0.1, with its own directory, SQLite database and admin user, and stopped by its PID.
// Without the binary the test is skipped, or fails when KARPOOL_E2E=require.
package giteatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/karpool/karpool/testbed/localenv"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

// Server is a running Gitea.
type Server struct {
	// URL is the server's address (http://127.0.0.1:PORT), User and Password its admin, Token an
	// API token of that user allowed to write repositories, issues and the user.
	URL, User, Password, Token string

	t   testing.TB
	dir string
	cmd *exec.Cmd
}

// Start starts Gitea and returns once its API answers; the test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := localenv.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	gitea := filepath.Join(bin, "gitea")
	if _, err := os.Stat(gitea); err != nil {
		if os.Getenv(localenvtest.RequireEnv) != "require" {
			t.Skipf("e2e test skipped: %s is missing; `make test` builds it and runs it", gitea)
		}
		t.Fatalf("e2e prerequisites: %s is missing (make tools builds it)", gitea)
	}
	s := &Server{t: t, dir: t.TempDir(), User: "karpool", Password: "karpool-Test-pw-1"}
	port := freePort(t)
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	ini := filepath.Join(s.dir, "app.ini")
	s.write(ini, s.config(port, gitea))
	s.run(gitea, "migrate", "-c", ini)
	s.run(gitea, "admin", "user", "create", "--admin", "--username", s.User, "--password", s.Password,
		"--email", "karpool@example.com", "--must-change-password=false", "-c", ini)
	log, err := os.Create(filepath.Join(s.dir, "web.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(gitea, "web", "-c", ini)
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = s.dir, log, log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	s.waitReady()
	var tok struct {
		Sha1 string `json:"sha1"`
	}
	s.do(http.MethodPost, "/users/"+s.User+"/tokens", map[string]any{"name": "karpool-test",
		"scopes": []string{"write:repository", "write:issue", "write:user"}}, &tok, s.User, s.Password)
	s.Token = tok.Sha1
	return s
}

// config is a test-only app.ini: loopback, no SSH, offline, SQLite, installed.
func (s *Server) config(port int, gitea string) string {
	secret := func(name string) string {
		out, err := exec.Command(gitea, "generate", "secret", name).Output()
		if err != nil {
			s.t.Fatalf("gitea generate secret %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	return fmt.Sprintf(`APP_NAME = karpool test
RUN_USER = %[1]s
RUN_MODE = prod
WORK_PATH = %[2]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]d
ROOT_URL = http://127.0.0.1:%[3]d/
APP_DATA_PATH = %[2]s/data
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true

[database]
DB_TYPE = sqlite3
PATH = %[2]s/gitea.db

[security]
INSTALL_LOCK = true
INTERNAL_TOKEN = %[4]s

[oauth2]
JWT_SECRET = %[5]s

[repository]
ROOT = %[2]s/repos

[log]
MODE = console
LEVEL = warn
`, user, s.dir, port, secret("INTERNAL_TOKEN"), secret("JWT_SECRET"))
}

// waitReady polls the API until it answers, the process dies, or a minute passes.
func (s *Server) waitReady() {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(s.URL + "/api/v1/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if s.cmd.ProcessState != nil || s.cmd.Process.Signal(syscall.Signal(0)) != nil {
			s.t.Fatalf("gitea exited before its API answered; log:\n%s", s.log())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("gitea's API did not answer within a minute; log:\n%s", s.log())
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded by the deadline above
	}
}

// stop ends the server by its PID and waits for it.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func (s *Server) log() string {
	data, _ := os.ReadFile(filepath.Join(s.dir, "web.log"))
	return string(data)
}

func (s *Server) write(name, content string) {
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *Server) run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// API calls Gitea's API v1 with the token and decodes the answer into out (may be nil).
func (s *Server) API(method, path string, body, out any) {
	s.t.Helper()
	s.do(method, path, body, out, "", "")
}

// do calls the API as user with password (basic authentication), or with the token when user
// is empty.
func (s *Server) do(method, path string, body, out any, user, password string) {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL+"/api/v1"+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.SetBasicAuth(user, password)
	} else {
		req.Header.Set("Authorization", "token "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

// CreateRepo makes an empty repository of the admin user and returns its clone URL.
func (s *Server) CreateRepo(name string) string {
	s.t.Helper()
	var repo struct {
		CloneURL string `json:"clone_url"`
	}
	s.API(http.MethodPost, "/user/repos", map[string]any{"name": name, "default_branch": "main"}, &repo)
	return repo.CloneURL
}

// PushURL is a clone URL with the admin's credentials, for `git push` from a test.
func (s *Server) PushURL(cloneURL string) string {
	u, err := url.Parse(cloneURL)
	if err != nil {
		s.t.Fatal(err)
	}
	u.User = url.UserPassword(s.User, s.Password)
	return u.String()
}

// Fork creates a user (not an admin) who forks the admin's repository, and returns the fork's
// clone URL with that user's credentials, for `git push` from a test.
func (s *Server) Fork(repo, user string) string {
	s.t.Helper()
	password := s.Password + "-" + user
	s.do(http.MethodPost, "/admin/users", map[string]any{"username": user, "email": user + "@example.com",
		"password": password, "must_change_password": false}, nil, s.User, s.Password)
	var fork struct {
		CloneURL string `json:"clone_url"`
	}
	s.do(http.MethodPost, "/repos/"+s.User+"/"+repo+"/forks", map[string]any{}, &fork, user, password)
	u, err := url.Parse(fork.CloneURL)
	if err != nil {
		s.t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// OpenPullRequest opens a pull request from head (a branch, or user:branch of a fork) to base
// and returns its number.
func (s *Server) OpenPullRequest(repo, head, base, title string) int {
	s.t.Helper()
	owner, branch, forked := strings.Cut(head, ":")
	if !forked {
		owner, branch = s.User, head
	}
	s.waitBranch(owner, repo, branch)
	var pr struct {
		Number int `json:"number"`
	}
	s.API(http.MethodPost, "/repos/"+s.User+"/"+repo+"/pulls", map[string]any{"head": head, "base": base, "title": title}, &pr)
	return pr.Number
}

// Label puts a label on a pull request, creating it in the repository first.
func (s *Server) Label(repo string, pr int, name string) {
	s.t.Helper()
	var label struct {
		ID int64 `json:"id"`
	}
	s.API(http.MethodPost, "/repos/"+s.User+"/"+repo+"/labels", map[string]any{"name": name, "color": "#e11d21"}, &label)
	s.API(http.MethodPost, fmt.Sprintf("/repos/%s/%s/issues/%d/labels", s.User, repo, pr), map[string]any{"labels": []int64{label.ID}}, nil)
}

// waitBranch waits until Gitea lists a branch just pushed: it records pushes asynchronously,
// and a pull request from a branch it has not recorded yet is refused with 404.
func (s *Server) waitBranch(owner, repo, branch string) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequest(http.MethodGet, s.URL+"/api/v1/repos/"+owner+"/"+repo+"/branches/"+url.PathEscape(branch), nil)
		if err != nil {
			s.t.Fatal(err)
		}
		req.Header.Set("Authorization", "token "+s.Token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("branch %s of %s/%s not listed by Gitea a minute after the push (last: %v)", branch, owner, repo, err)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Comment is a pull request comment as the API returns it.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// Comments lists a pull request's comments.
func (s *Server) Comments(repo string, pr int) []Comment {
	s.t.Helper()
	var cs []Comment
	s.API(http.MethodGet, fmt.Sprintf("/repos/%s/%s/issues/%d/comments", s.User, repo, pr), nil, &cs)
	return cs
}

// Status is a commit status as the API returns it.
type Status struct {
	State       string `json:"status"`
	Context     string `json:"context"`
	Description string `json:"description"`
}

// Statuses lists the statuses of a commit, newest first.
func (s *Server) Statuses(repo, sha string) []Status {
	s.t.Helper()
	var st []Status
	s.API(http.MethodGet, fmt.Sprintf("/repos/%s/%s/commits/%s/statuses", s.User, repo, sha), nil, &st)
	return st
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
