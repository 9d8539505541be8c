// Package gitserver serves bare git repositories over smart HTTP through `git http-backend`,
// with pushes enabled: the local git server of `karpool up` and of the end-to-end tests.
package gitserver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
)

// Handler serves every bare repository under root. Pushes are accepted from any client that
// reached the handler (http-backend refuses anonymous pushes, so a fixed remote user is set);
// callers that need authentication wrap the handler.
func Handler(root string) (http.Handler, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w (is git installed?)", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		Stderr: io.Discard,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Remote-User") == "" {
			req.Header.Set("Remote-User", "karpool")
		}
		backend.ServeHTTP(w, req)
	}), nil
}
