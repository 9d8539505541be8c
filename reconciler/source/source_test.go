package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/karpool/karpool/testbed/gittest"
)

func fetch(t *testing.T, f *Fetcher, req Request) *Artifact {
	t.Helper()
	art, err := f.Fetch(context.Background(), req)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return art
}

func TestFetchFollowsBranchOverFileAndHTTP(t *testing.T) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "pools.git")
	repo.Write("pools/a.yaml", "a: 1\n")
	repo.Write("README.md", "hello\n")
	first := repo.Commit("first")

	srv := &gittest.Server{Root: dir}
	srv.Start(t)
	defer srv.Stop()

	for _, url := range []string{repo.FileURL(), srv.URL("pools.git")} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			f := NewFetcher()
			art := fetch(t, f, Request{URL: url})
			if art.Revision != "main@sha1:"+first {
				t.Fatalf("revision %q, want main@sha1:%s", art.Revision, first)
			}
			if string(art.Files["pools/a.yaml"]) != "a: 1\n" || len(art.Files) != 2 {
				t.Fatalf("files %v", art.Files)
			}
			// Unchanged remote: answered from the cache after ls-remote, no second clone.
			fetch(t, f, Request{URL: url})
			if f.Clones() != 1 {
				t.Fatalf("%d clones for an unchanged remote, want 1", f.Clones())
			}
		})
	}

	// A new commit is picked up; a rewritten history too.
	f := NewFetcher()
	fetch(t, f, Request{URL: srv.URL("pools.git")})
	repo.Write("pools/a.yaml", "a: 2\n")
	second := repo.Commit("second")
	if art := fetch(t, f, Request{URL: srv.URL("pools.git")}); art.Commit != second || string(art.Files["pools/a.yaml"]) != "a: 2\n" {
		t.Fatalf("after a push got %s %q", art.Commit, art.Files["pools/a.yaml"])
	}
	repo.ResetHard(first)
	repo.Write("pools/b.yaml", "b: 1\n")
	rewritten := repo.CommitLocal("rewritten")
	repo.ForcePush()
	art := fetch(t, f, Request{URL: srv.URL("pools.git")})
	if art.Commit != rewritten || art.Files["pools/b.yaml"] == nil || string(art.Files["pools/a.yaml"]) != "a: 1\n" {
		t.Fatalf("after a force push got %s with %v", art.Commit, art.Files)
	}
}

func TestFetchTagSemverCommitAndBranch(t *testing.T) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "r.git")
	repo.Write("f", "1.0.0")
	c100 := repo.Commit("1.0.0")
	repo.Tag("v1.0.0")
	repo.Write("f", "1.4.0")
	c140 := repo.Commit("1.4.0")
	repo.Tag("v1.4.0")
	repo.Write("f", "2.0.0")
	repo.Commit("2.0.0")
	repo.Tag("v2.0.0")
	repo.Write("f", "dev")
	dev := repo.Commit("dev")
	repo.Push("dev")
	// A pull request's head as forges keep it: reachable from no branch or tag.
	repo.Write("f", "pr")
	pr := repo.CommitLocal("pull request")
	repo.Push("refs/pull/7/head")

	f := NewFetcher()
	url := repo.FileURL()
	cases := []struct {
		ref       Ref
		revision  string
		wantFileF string
	}{
		{Ref{Tag: "v1.0.0"}, "v1.0.0@sha1:" + c100, "1.0.0"},
		{Ref{SemVer: ">=1.0.0 <2.0.0"}, "v1.4.0@sha1:" + c140, "1.4.0"},
		{Ref{SemVer: "^1.0"}, "v1.4.0@sha1:" + c140, "1.4.0"},
		{Ref{SemVer: "~1.0.0"}, "v1.0.0@sha1:" + c100, "1.0.0"},
		{Ref{Commit: c140}, "sha1:" + c140, "1.4.0"},
		{Ref{Branch: "dev"}, "dev@sha1:" + dev, "dev"},
		{Ref{Name: "refs/pull/7/head"}, "refs/pull/7/head@sha1:" + pr, "pr"},
		{Ref{Name: "refs/tags/v1.4.0"}, "refs/tags/v1.4.0@sha1:" + c140, "1.4.0"},
	}
	for _, c := range cases {
		art := fetch(t, f, Request{URL: url, Ref: c.ref})
		if art.Revision != c.revision || string(art.Files["f"]) != c.wantFileF {
			t.Errorf("%+v: got %s with f=%q, want %s with %q", c.ref, art.Revision, art.Files["f"], c.revision, c.wantFileF)
		}
	}

	for _, c := range []struct {
		ref  Ref
		kind Kind
		want string
	}{
		{Ref{Branch: "nope"}, RefNotFound, `branch "nope" does not exist; the repository has branches: dev, main`},
		{Ref{Tag: "v9"}, RefNotFound, `tag "v9" does not exist`},
		{Ref{SemVer: ">=3.0.0"}, RefNotFound, `no tag matches the semver range ">=3.0.0"`},
		{Ref{SemVer: "not a range"}, Invalid, `spec.ref.semver: range "not a range" cannot be parsed`},
		{Ref{SemVer: "^1.x.y"}, Invalid, `like "^1.2", "~1.2.3" or ">=1.0.0 <2.0.0"`},
		{Ref{Commit: "abc"}, Invalid, `not a full 40-character SHA-1`},
		{Ref{Name: "refs/pull/8/head"}, RefNotFound, `reference "refs/pull/8/head" does not exist`},
		{Ref{Name: "pull/7/head"}, Invalid, `not a full reference name like refs/pull/7/head`},
		{Ref{Name: "refs/pull/7/head:refs/heads/main"}, Invalid, `not a full reference name`},
	} {
		_, err := f.Fetch(context.Background(), Request{URL: url, Ref: c.ref})
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want a %s error containing %q", c.ref, err, c.kind, c.want)
		}
	}
}

func TestFetchAuthentication(t *testing.T) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "private.git")
	repo.Write("f", "x")
	repo.Commit("x")
	srv := &gittest.Server{Root: dir, Username: "alice", Password: "s3cret-token-value", TLS: true}
	srv.Start(t)
	defer srv.Stop()

	f := NewFetcher()
	good := &Credentials{Username: "alice", Password: "s3cret-token-value", CABundle: srv.CA()}
	fetch(t, f, Request{URL: srv.URL("private.git"), Credentials: good})

	wrong := &Credentials{Username: "alice", Password: "wrong-token-value", CABundle: srv.CA()}
	_, err := f.Fetch(context.Background(), Request{URL: srv.URL("private.git"), Credentials: wrong})
	var e *Error
	if !errors.As(err, &e) || e.Kind != Auth {
		t.Fatalf("wrong password: got %v, want an Auth error", err)
	}
	if strings.Contains(err.Error(), "wrong-token-value") || !strings.Contains(err.Error(), "authentication required") {
		t.Fatalf("message %q: must name the failure and not show the password", err)
	}

	// Credentials in the URL never appear in messages.
	withUser := strings.Replace(srv.URL("private.git"), "https://", "https://alice:url-password-123@", 1)
	_, err = f.Fetch(context.Background(), Request{URL: withUser})
	if err == nil || strings.Contains(err.Error(), "url-password-123") {
		t.Fatalf("URL credentials (no CA given, so this fails): %v", err)
	}

	srv.Stop()
	_, err = f.Fetch(context.Background(), Request{URL: srv.URL("private.git"), Credentials: good})
	if !errors.As(err, &e) || e.Kind != Unreachable || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("server down: got %v, want Unreachable with connection refused", err)
	}
}

func TestCredentialsString(t *testing.T) {
	c := CredentialsFromSecret(map[string][]byte{"username": []byte("u"), "password": []byte("hunter22")})
	if s := c.String(); strings.Contains(s, "hunter22") || s != "username, password" {
		t.Fatalf("String() = %q", s)
	}
}

func TestFetchOverSSHChecksTheHostKey(t *testing.T) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t, dir, "pools.git")
	repo.Write("f", "over ssh")
	commit := repo.Commit("x")
	srv := gittest.NewSSHServer(t, dir)

	f := NewFetcher()
	creds := &Credentials{Identity: srv.ClientKey, KnownHosts: srv.KnownHosts()}
	art := fetch(t, f, Request{URL: srv.URL("pools.git"), Credentials: creds})
	if art.Commit != commit || string(art.Files["f"]) != "over ssh" {
		t.Fatalf("got %s %q", art.Commit, art.Files["f"])
	}

	// A server whose key is not the known one is refused.
	var e *Error
	other := gittest.NewSSHServer(t, dir)
	_, err := f.Fetch(context.Background(), Request{URL: other.URL("pools.git"), Credentials: creds})
	if !errors.As(err, &e) || e.Kind != Auth || !strings.Contains(err.Error(), "knownhosts: key is unknown") {
		t.Fatalf("unknown host key: got %v", err)
	}
	// Without known_hosts the fetch is not attempted.
	_, err = f.Fetch(context.Background(), Request{URL: srv.URL("pools.git"), Credentials: &Credentials{Identity: srv.ClientKey}})
	if !errors.As(err, &e) || e.Kind != Auth || !strings.Contains(err.Error(), `no "known_hosts"`) {
		t.Fatalf("missing known_hosts: %v", err)
	}
	// A key the server does not accept is an authentication error.
	wrong := gittest.NewSSHServer(t, dir)
	_, err = f.Fetch(context.Background(), Request{URL: srv.URL("pools.git"), Credentials: &Credentials{Identity: wrong.ClientKey, KnownHosts: srv.KnownHosts()}})
	if !errors.As(err, &e) || e.Kind != Auth {
		t.Fatalf("refused key: %v", err)
	}
}

// TestErrorsDoNotShowURLCredentials fetches from and pushes to a port where nothing listens,
// with the token where forges take it: in the user name, the password or the query. net/http
// quotes the URL it tried, user name and query as given.
func TestErrorsDoNotShowURLCredentials(t *testing.T) {
	const secret = "SECRETTOKEN"
	for _, u := range []string{
		"https://" + secret + "@127.0.0.1:1/x.git",
		"https://x-access-token:" + secret + "@127.0.0.1:1/x.git",
		"https://127.0.0.1:1/x.git?access_token=" + secret,
		"https://" + secret + "@127.0.0.1:1/x.git?token=" + secret,
		"https://alice:" + secret + "/with-a-raw-slash@127.0.0.1:1/x.git",
		"ftp://" + secret + "@127.0.0.1:1/x.git",
	} {
		_, ferr := NewFetcher().Fetch(context.Background(), Request{URL: u, Ref: Ref{Name: "refs/pull/1/head"}})
		_, perr := Push(context.Background(), Commit{URL: u, Branch: "status", Files: map[string][]byte{"f": nil}})
		for _, err := range []error{ferr, perr} {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: %v is no *Error", u, err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(e.Err.Error(), secret) || strings.Contains(e.URL, secret) {
				t.Errorf("%s: the error shows the token: %v", u, err)
			}
			if !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Errorf("%s: the error does not say which server: %v", u, err)
			}
		}
	}
}

func TestGitErrorsDoNotShowSecretValues(t *testing.T) {
	creds := &Credentials{Password: "pa55word-from-the-secret"}
	g := &gitOp{url: "https://127.0.0.1:1/x.git", shown: "https://127.0.0.1:1/x.git", creds: creds}
	err := g.wrap("cloning", errors.New("server said: bad pa55word-from-the-secret\nfor https://127.0.0.1:1/x.git"))
	if strings.Contains(err.Error(), creds.Password) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// TestHighestMatchingReadsRangesAsFlux: the ranges Flux accepts (Masterminds semver constraints:
// caret, tilde, comparisons, hyphen ranges, wildcards) against tags read as Flux reads them
// (strict major.minor.patch, with or without "v"; prereleases only when the range names one).
func TestHighestMatchingReadsRangesAsFlux(t *testing.T) {
	refs := map[string]string{}
	for _, tag := range []string{"v1.0.0", "v1.2.3", "v1.2.9", "1.4.0", "v1.5", "v2.0.0", "v2.1.0-rc.1", "v2.1.0-rc.1^{}", "latest"} {
		refs["refs/tags/"+tag] = "x"
	}
	refs["refs/heads/v9.9.9"] = "x"
	for _, c := range []struct{ rng, want string }{
		{"^1.2", "1.4.0"},
		{"~1.2.3", "v1.2.9"},
		{">=1.0.0 <2.0.0", "1.4.0"},
		{"1.0.0 - 1.2.5", "v1.2.3"},
		{"1.2.x", "v1.2.9"},
		{"*", "v2.0.0"},
		{">=2.1.0-rc.0", "v2.1.0-rc.1"},
		{"^3", ""},
	} {
		rng, err := semver.NewConstraint(c.rng)
		if err != nil {
			t.Fatalf("%s: %v", c.rng, err)
		}
		got, err := highestMatching(c.rng, rng, refs)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), "no tag matches the semver range") {
				t.Errorf("%s: got %q, %v; want no match", c.rng, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %s", c.rng, got, err, c.want)
		}
	}
}
