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

// Handler serves every bare repository under root. http-backend refuses anonymous pushes
// unless the repository sets http.receivepack=true (EnablePush does); callers that need
// authentication wrap the handler.
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
	return backend, nil
}

// EnablePush lets anonymous clients push to the bare repository (http.receivepack=true): for
// servers that only listen on 127.0.0.1.
func EnablePush(bare string) error {
	out, err := exec.Command("git", "-C", bare, "config", "http.receivepack", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("enabling pushes to %s: %w\n%s", bare, err, out)
	}
	return nil
}
