package hostile

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	git "github.com/go-git/go-git/v5"
)

// Trap is everything the corpus reaches for, with a record of what reached it.
type Trap struct {
	// Addr is a 127.0.0.1 listener that accepts connections, counts them and never answers.
	Addr string
	// GitRepo is a local bare Git repository; Script a program that creates Marker when run,
	// which is what git does with --upload-pack for a local repository.
	GitRepo, Script, Marker string
	// Outside is a secret file outside every repository; Secret is its content.
	Outside, Secret string

	conns  atomic.Int32
	opens  func() int
	mu     sync.Mutex
	closed []net.Conn
}

// NewTrap sets a trap up for the length of the test.
func NewTrap(t testing.TB) *Trap {
	t.Helper()
	dir := t.TempDir()
	tr := &Trap{
		GitRepo: filepath.Join(dir, "remote.git"),
		Script:  filepath.Join(dir, "upload-pack.sh"),
		Marker:  filepath.Join(dir, "a-command-ran"),
		Secret:  "karpool-hostile-secret-7f3a",
	}
	if _, err := git.PlainInit(tr.GitRepo, true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tr.Script, []byte("#!/bin/sh\ntouch "+tr.Marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(dir, "secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	tr.Outside = filepath.Join(secrets, "credentials.yaml")
	content := "apiVersion: v1\nkind: Secret\nmetadata: {name: loot}\nstringData: {token: " + tr.Secret + "}\n"
	if err := os.WriteFile(tr.Outside, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tr.opens = watchOpens(t, tr.Outside)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr.Addr = l.Addr().String()
	go tr.accept(l)
	t.Cleanup(func() {
		l.Close()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, c := range tr.closed {
			c.Close()
		}
	})
	return tr
}

// accept counts each connection and holds it open without a word, as a server that hangs.
func (tr *Trap) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		tr.conns.Add(1)
		tr.mu.Lock()
		tr.closed = append(tr.closed, c)
		tr.mu.Unlock()
	}
}

func (tr *Trap) fill(s string) string {
	return strings.NewReplacer("{{ADDR}}", tr.Addr, "{{GITREPO}}", tr.GitRepo, "{{SCRIPT}}", tr.Script,
		"{{OUTSIDE}}", tr.Outside, "{{MARKER}}", tr.Marker).Replace(s)
}

// Check fails the test if anything reached the trap: a connection, a command run, the secret
// file opened, or the secret's content in out (what karpool printed, posted or stored).
func (tr *Trap) Check(t testing.TB, what string, out ...string) {
	t.Helper()
	if n := tr.conns.Load(); n > 0 {
		t.Errorf("%s: %d connections reached the trap's listener", what, n)
	}
	if _, err := os.Stat(tr.Marker); err == nil {
		t.Errorf("%s: a command ran (the marker exists)", what)
	}
	if n := tr.opens(); n > 0 {
		t.Errorf("%s: the file outside the repository was opened %d times", what, n)
	}
	for _, o := range out {
		if strings.Contains(o, tr.Secret) {
			t.Errorf("%s: the secret from outside the repository was printed", what)
		}
	}
}

// WriteTo writes the case's repository into dir (its files and links).
func (c Case) WriteTo(dir string) error {
	for p, data := range c.Files {
		rel, err := clean(p)
		if err != nil {
			return err
		}
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return err
		}
	}
	for p, target := range c.Symlinks {
		rel, err := clean(p)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
			return err
		}
	}
	return nil
}
