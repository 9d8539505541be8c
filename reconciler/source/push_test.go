package source

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/karpool/karpool/testbed/gittest"
)

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPushStatusBranch: the first push creates the branch as an orphan commit, files already
// there make no commit, another writer's files on the branch are kept, and a push that lost a
// race with another writer is retried on the new tip.
func TestPushStatusBranch(t *testing.T) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "pools.git")
	repo.Write("pools/nodepool.yaml", "kind: NodePool\n")
	repo.Commit("pools")
	srv := &gittest.Server{Root: dir}
	srv.Start(t)
	defer srv.Stop()
	ctx := context.Background()
	author := object.Signature{Name: "karpool", Email: "karpool@localhost", When: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	c := Commit{URL: srv.URL("pools.git"), Branch: "karpool-status", Author: author, Message: "status 1",
		Files: map[string][]byte{"ns/a/status.json": []byte(`{"nodes": 1}` + "\n")}}

	pushed, err := Push(ctx, c)
	if err != nil || !pushed {
		t.Fatalf("first push: %v %v", pushed, err)
	}
	if got := gitOut(t, repo.Bare, "log", "--format=%s|%an|%P", "karpool-status"); got != "status 1|karpool|" {
		t.Errorf("status branch log %q, want one orphan commit by karpool", got)
	}
	if got := gitOut(t, repo.Bare, "log", "--format=%s", "main"); got != "pools" {
		t.Errorf("main moved: %q", got)
	}

	if pushed, err := Push(ctx, c); err != nil || pushed {
		t.Fatalf("unchanged files: pushed %v, %v", pushed, err)
	}

	// Another PoolSync writes its own directory; ours is kept and vice versa.
	other := c
	other.Message, other.Files = "status b", map[string][]byte{"ns/b/status.json": []byte("{}\n")}
	if pushed, err := Push(ctx, other); err != nil || !pushed {
		t.Fatalf("other writer: %v %v", pushed, err)
	}
	c.Message, c.Files = "status 2", map[string][]byte{"ns/a/status.json": []byte(`{"nodes": 2}` + "\n")}
	if pushed, err := Push(ctx, c); err != nil || !pushed {
		t.Fatalf("second push: %v %v", pushed, err)
	}
	if got := gitOut(t, repo.Bare, "show", "karpool-status:ns/b/status.json"); got != "{}" {
		t.Errorf("the other writer's file is %q", got)
	}
	if got := gitOut(t, repo.Bare, "show", "karpool-status:ns/a/status.json"); got != `{"nodes": 2}` {
		t.Errorf("our file is %q", got)
	}
	if got := gitOut(t, repo.Bare, "rev-list", "--count", "karpool-status"); got != "3" {
		t.Errorf("%s commits on the status branch, want 3", got)
	}

	// Someone else pushes to the branch after our clone: our push is refused as not a fast
	// forward, and the retry lands on top of theirs.
	raced := false
	beforePush = func() {
		if raced {
			return
		}
		raced = true
		gitOut(t, repo.Work, "fetch", "-q", "origin", "karpool-status")
		gitOut(t, repo.Work, "checkout", "-q", "-B", "status", "FETCH_HEAD")
		repo.Write("ns/c/status.json", "{}\n")
		repo.CommitLocal("status c")
		gitOut(t, repo.Work, "push", "-q", "origin", "status:karpool-status")
	}
	defer func() { beforePush = nil }()
	c.Message, c.Files = "status 3", map[string][]byte{"ns/a/status.json": []byte(`{"nodes": 3}` + "\n")}
	if pushed, err := Push(ctx, c); err != nil || !pushed || !raced {
		t.Fatalf("push after a race: pushed %v, raced %v, %v", pushed, raced, err)
	}
	if got := gitOut(t, repo.Bare, "log", "--format=%s", "-2", "karpool-status"); got != "status 3\nstatus c" {
		t.Errorf("status branch ends %q, want ours on top of the other writer's", got)
	}
}
