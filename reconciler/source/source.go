// Package source fetches the tree of one revision of a Git repository into memory.
//
// A Fetcher asks the server for its references first (ls-remote) and clones only when the
// selected reference points at a commit it has not fetched yet; the clone is shallow, of the one
// branch or tag, into memory, and only the commit's files are kept. Revisions are written the way
// Flux writes them: "main@sha1:<hex>" for a branch, "v1.2.0@sha1:<hex>" for a tag or semver
// range, "sha1:<hex>" for a pinned commit.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/karpool/karpool/internal/redact"
	"github.com/karpool/karpool/manifests/build/confined"
)

// DefaultBranch is followed when a Ref names nothing.
const DefaultBranch = "main"

// Ref selects what to check out. At most one field is set; none means DefaultBranch.
type Ref struct {
	Branch, Tag, SemVer, Commit string
	// Name is a full reference, such as refs/pull/7/head (Flux's ref.name): how a pull
	// request's head is fetched, from the same repository or a fork.
	Name string
}

// Request is one fetch.
type Request struct {
	URL         string
	Ref         Ref
	Credentials *Credentials
}

// Artifact is the tree of one commit.
type Artifact struct {
	// URL is the repository, without credentials.
	URL string
	// Revision is the Flux-style revision, e.g. main@sha1:<hex>.
	Revision string
	// Commit is the full SHA-1.
	Commit string
	// Files maps slash-separated paths relative to the repository root to their contents. Only
	// regular files are present: symbolic links and submodules are left out.
	Files map[string][]byte
}

// Fetcher fetches artifacts and remembers the last one per repository and reference, so that an
// unchanged remote costs one ls-remote. It is safe for concurrent use.
type Fetcher struct {
	mu    sync.Mutex
	cache map[string]*Artifact
	// clones counts clones, for tests that check the ls-remote short cut.
	clones int
}

// NewFetcher returns a Fetcher with an empty cache.
func NewFetcher() *Fetcher {
	return &Fetcher{cache: map[string]*Artifact{}}
}

// Clones is the number of clones made so far.
func (f *Fetcher) Clones() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clones
}

// errNotURL leaves out why url.Parse refused the URL: its reasons quote parts of the URL, such
// as a password read as a port.
var errNotURL = errors.New("not a URL: write https://host/path, ssh://git@host/path or file:///path")

// Fetch returns the artifact the request selects. Errors are *Error.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Artifact, error) {
	u, err := url.Parse(req.URL)
	if err != nil || u.Host == "" && u.Scheme != "file" {
		return nil, &Error{Kind: Invalid, URL: redact.URL(req.URL), Err: errNotURL}
	}
	switch u.Scheme {
	case "http", "https", "ssh", "file":
	default:
		return nil, &Error{Kind: Invalid, URL: redact.URL(req.URL), Err: fmt.Errorf("scheme %q is not supported: use https://, ssh:// or file://", u.Scheme)}
	}
	auth, err := req.Credentials.authMethod(u)
	if err != nil {
		return nil, &Error{Kind: Auth, URL: redact.URL(req.URL), Err: err}
	}
	g := &gitOp{url: req.URL, shown: redact.URL(req.URL), auth: auth, creds: req.Credentials}
	// The credentials are part of the key, those in the URL too: a pinned commit is served from
	// the cache without asking the server, which must not hand one user's private tree to
	// another.
	key := req.URL + "#" + refKey(req.Ref) + "#" + req.Credentials.fingerprint()

	var name, hash string
	if req.Ref.Name != "" && !validRefName(req.Ref.Name) {
		return nil, &Error{Kind: Invalid, URL: g.shown, Err: fmt.Errorf("reference %q is not a full reference name like refs/pull/7/head", req.Ref.Name)}
	}
	if req.Ref.Commit != "" {
		if !isSHA1(req.Ref.Commit) {
			return nil, &Error{Kind: Invalid, URL: g.shown, Err: fmt.Errorf("commit %q is not a full 40-character SHA-1", req.Ref.Commit)}
		}
		hash = req.Ref.Commit
	} else {
		name, hash, err = g.resolve(ctx, req.Ref)
		if err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	cached := f.cache[key]
	f.mu.Unlock()
	if cached != nil && cached.Commit == hash {
		return cached, nil
	}

	art, err := g.clone(ctx, req.Ref, name, hash)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.cache[key] = art
	f.clones++
	f.mu.Unlock()
	return art, nil
}

// gitOp is one fetch in progress.
type gitOp struct {
	url   string
	shown string // url without credentials
	auth  transport.AuthMethod
	creds *Credentials
}

// resolve lists the remote's references and returns the name and commit the ref selects.
func (g *gitOp) resolve(ctx context.Context, ref Ref) (name, hash string, err error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: g.auth, CABundle: g.caBundle(), PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", "", g.wrap("listing the references of", err)
	}
	byName := map[string]string{}
	for _, r := range refs {
		if r.Type() == plumbing.HashReference {
			byName[r.Name().String()] = r.Hash().String()
		}
	}
	lookupTag := func(tag string) (string, bool) {
		// An annotated tag's peeled entry names the commit; a lightweight tag has none.
		if h, ok := byName["refs/tags/"+tag+"^{}"]; ok {
			return h, true
		}
		h, ok := byName["refs/tags/"+tag]
		return h, ok
	}
	switch {
	case ref.Name != "":
		if h, ok := byName[ref.Name+"^{}"]; ok {
			return ref.Name, h, nil
		}
		if h, ok := byName[ref.Name]; ok {
			return ref.Name, h, nil
		}
		return "", "", &Error{Kind: RefNotFound, URL: g.shown, Err: fmt.Errorf("reference %q does not exist", ref.Name)}
	case ref.Tag != "":
		if h, ok := lookupTag(ref.Tag); ok {
			return ref.Tag, h, nil
		}
		return "", "", &Error{Kind: RefNotFound, URL: g.shown, Err: fmt.Errorf("tag %q does not exist%s", ref.Tag, listOf("tags", byName, "refs/tags/"))}
	case ref.SemVer != "":
		rng, err := semver.NewConstraint(ref.SemVer)
		if err != nil {
			return "", "", &Error{Kind: Invalid, URL: g.shown, Err: fmt.Errorf("spec.ref.semver: range %q cannot be parsed (%v): write it as Flux does, like \"^1.2\", \"~1.2.3\" or \">=1.0.0 <2.0.0\"", ref.SemVer, err)}
		}
		tag, err := highestMatching(ref.SemVer, rng, byName)
		if err != nil {
			return "", "", &Error{Kind: RefNotFound, URL: g.shown, Err: err}
		}
		h, _ := lookupTag(tag)
		return tag, h, nil
	default:
		branch := ref.Branch
		if branch == "" {
			branch = DefaultBranch
		}
		if h, ok := byName["refs/heads/"+branch]; ok {
			return branch, h, nil
		}
		if len(refs) == 0 {
			return "", "", &Error{Kind: RefNotFound, URL: g.shown, Err: fmt.Errorf("the repository is empty: push a commit to branch %q", branch)}
		}
		return "", "", &Error{Kind: RefNotFound, URL: g.shown, Err: fmt.Errorf("branch %q does not exist%s", branch, listOf("branches", byName, "refs/heads/"))}
	}
}

// clone fetches the commit and reads its tree. A branch, tag or named reference is fetched
// shallow and alone; a pinned commit needs the history, because servers do not hand out
// arbitrary commits.
func (g *gitOp) clone(ctx context.Context, ref Ref, name, hash string) (*Artifact, error) {
	var repo *git.Repository
	var err error
	if ref.Name != "" {
		repo, err = g.fetchRef(ctx, name)
	} else {
		repo, err = git.CloneContext(ctx, memory.NewStorage(), nil, g.cloneOptions(ref, name))
	}
	if err != nil {
		return nil, g.wrap("cloning", err)
	}
	commit, err := g.commit(repo, ref, name, hash)
	if err != nil {
		return nil, err
	}
	files, err := readTree(commit)
	if err != nil {
		return nil, &Error{Kind: Unreachable, URL: g.shown, Err: fmt.Errorf("reading commit %s: %w", commit.Hash, err)}
	}
	h := commit.Hash.String()
	rev := "sha1:" + h
	if ref.Commit == "" {
		rev = name + "@" + rev
	}
	return &Artifact{URL: g.shown, Revision: rev, Commit: h, Files: files}, nil
}

func (g *gitOp) cloneOptions(ref Ref, name string) *git.CloneOptions {
	opts := &git.CloneOptions{URL: g.url, Auth: g.auth, CABundle: g.caBundle(), Tags: git.NoTags, NoCheckout: true}
	switch {
	case ref.Commit != "":
	case ref.Tag != "" || ref.SemVer != "":
		opts.ReferenceName = plumbing.NewTagReferenceName(name)
		opts.SingleBranch, opts.Depth = true, 1
	default:
		opts.ReferenceName = plumbing.NewBranchReferenceName(name)
		opts.SingleBranch, opts.Depth = true, 1
	}
	return opts
}

// fetchRef fetches one reference that is neither a branch nor a tag (go-git's clone maps a
// single reference to refs/heads/), into a repository of its own.
func (g *gitOp) fetchRef(ctx context.Context, name string) (*git.Repository, error) {
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return nil, err
	}
	remote, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{g.url}})
	if err != nil {
		return nil, err
	}
	spec := config.RefSpec("+" + name + ":" + name)
	err = remote.FetchContext(ctx, &git.FetchOptions{RefSpecs: []config.RefSpec{spec}, Depth: 1, Auth: g.auth, CABundle: g.caBundle(), Tags: git.NoTags})
	return repo, err
}

// commit finds the cloned commit. For a branch or tag it is whatever the clone brought (a push
// between ls-remote and clone wins, which is the newer state anyway).
func (g *gitOp) commit(repo *git.Repository, ref Ref, name, hash string) (*object.Commit, error) {
	var h plumbing.Hash
	switch {
	case ref.Commit != "":
		h = plumbing.NewHash(hash)
	default:
		refName := plumbing.NewBranchReferenceName(name)
		switch {
		case ref.Name != "":
			refName = plumbing.ReferenceName(name)
		case ref.Tag != "" || ref.SemVer != "":
			refName = plumbing.NewTagReferenceName(name)
		}
		r, err := repo.Reference(refName, true)
		if err != nil {
			return nil, &Error{Kind: RefNotFound, URL: g.shown, Err: fmt.Errorf("%s disappeared during the clone: %v", refName, err)}
		}
		h = r.Hash()
		if t, err := repo.TagObject(h); err == nil {
			h = t.Target
		}
	}
	c, err := repo.CommitObject(h)
	if err != nil {
		return nil, &Error{Kind: RefNotFound, URL: g.shown, Err: fmt.Errorf("commit %s is not in the repository", h)}
	}
	return c, nil
}

func (g *gitOp) caBundle() []byte {
	if g.creds == nil {
		return nil
	}
	return g.creds.CABundle
}

// wrap classifies a go-git error and removes anything secret from its text.
func (g *gitOp) wrap(doing string, err error) error {
	kind := Unreachable
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed), errors.Is(err, transport.ErrInvalidAuthMethod),
		// ssh reports a refused key, and a server key that known_hosts does not vouch for, only
		// in text.
		strings.Contains(err.Error(), "unable to authenticate"), strings.Contains(err.Error(), "knownhosts:"):
		kind = Auth
	case errors.Is(err, transport.ErrRepositoryNotFound):
		kind = NotFound
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		kind = RefNotFound
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		kind = Timeout
	}
	// The URL as given is replaced whole first: Text ends a URL at white space, which a query
	// may hold.
	msg := redact.Secrets(strings.ReplaceAll(err.Error(), g.url, g.shown), g.creds.secrets()...)
	// Servers end their answers with newlines, which a one-line condition message cannot hold.
	msg = strings.Join(strings.Fields(redact.Text(msg)), " ")
	return &Error{Kind: kind, URL: g.shown, Err: fmt.Errorf("%s the repository: %s", doing, msg)}
}

// readTree reads the regular files of the commit within a build's bounds (confined.Defaults):
// a repository is untrusted input (a pull request can carry anything), and its files are held
// in memory. A manifest larger than a build reads from one file is kept cut just past that cap,
// so that the build refuses it at the file; other large files (binaries, archives) are left
// out; a tree larger than a build reads in all is refused.
func readTree(c *object.Commit) (map[string][]byte, error) {
	maxFile, maxTree := confined.Defaults.FileBytes, confined.Defaults.ReadBytes
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	total := int64(0)
	err = tree.Files().ForEach(func(f *object.File) error {
		if f.Mode != filemode.Regular && f.Mode != filemode.Executable {
			return nil
		}
		size := f.Size
		if size > maxFile {
			if !manifest(f.Name) {
				return nil
			}
			size = maxFile + 1
		}
		if total += size; total > maxTree {
			return fmt.Errorf("the files of the commit exceed %d MiB, the most a build reads", maxTree>>20)
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		data, err := io.ReadAll(io.LimitReader(r, maxFile+1))
		if err != nil {
			return err
		}
		files[f.Name] = data
		return nil
	})
	return files, err
}

// manifest says whether a file may be read by a build: YAML, JSON or a kustomization.
func manifest(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return path.Base(name) == "Kustomization"
}

// ReadLocal reads one revision of a repository on disk (dir or any directory below its work
// tree): rev is anything git rev-parse takes (main, v1.2.0, HEAD~1, a commit id). The
// revision is named Flux style: rev@sha1:<hex>, or sha1:<hex> when rev is the commit id.
func ReadLocal(dir, rev string) (*Artifact, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, &Error{Kind: Invalid, URL: dir, Err: fmt.Errorf("opening the repository: %w", err)}
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, &Error{Kind: RefNotFound, URL: dir, Err: fmt.Errorf("revision %q: %w", rev, err)}
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, &Error{Kind: RefNotFound, URL: dir, Err: fmt.Errorf("revision %q is not a commit: %w", rev, err)}
	}
	files, err := readTree(c)
	if err != nil {
		return nil, &Error{Kind: Invalid, URL: dir, Err: fmt.Errorf("reading %s: %w", rev, err)}
	}
	name := "sha1:" + c.Hash.String()
	if !strings.HasPrefix(c.Hash.String(), strings.ToLower(rev)) {
		name = rev + "@" + name
	}
	return &Artifact{URL: dir, Revision: name, Commit: c.Hash.String(), Files: files}, nil
}

// highestMatching picks the highest tag inside the range, reading tags as Flux does: strict
// semantic versions (major.minor.patch), with or without a leading "v". Tags of equal precedence
// (they differ in build metadata only) are ordered by name.
func highestMatching(rangeExpr string, rng *semver.Constraints, refs map[string]string) (string, error) {
	var best *semver.Version
	bestTag := ""
	for name := range refs {
		tag, ok := strings.CutPrefix(name, "refs/tags/")
		if !ok || strings.HasSuffix(tag, "^{}") {
			continue
		}
		v, err := semver.StrictNewVersion(strings.TrimPrefix(tag, "v"))
		if err != nil || !rng.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || v.Equal(best) && tag < bestTag {
			best, bestTag = v, tag
		}
	}
	if bestTag == "" {
		return "", fmt.Errorf("no tag matches the semver range %q%s", rangeExpr, listOf("tags", refs, "refs/tags/"))
	}
	return bestTag, nil
}

// listOf renders ", the repository has: a, b, c" for the references under prefix.
func listOf(what string, refs map[string]string, prefix string) string {
	var names []string
	for n := range refs {
		if s, ok := strings.CutPrefix(n, prefix); ok && !strings.HasSuffix(s, "^{}") {
			names = append(names, s)
		}
	}
	if len(names) == 0 {
		return "; the repository has no " + what
	}
	sort.Strings(names)
	if len(names) > 10 {
		names = append(names[:10], "…")
	}
	return "; the repository has " + what + ": " + strings.Join(names, ", ")
}

func refKey(r Ref) string {
	return "branch=" + r.Branch + ",tag=" + r.Tag + ",semver=" + r.SemVer + ",commit=" + r.Commit + ",name=" + r.Name
}

// validRefName accepts full reference names without the characters Git forbids in them.
func validRefName(s string) bool {
	forbidden := func(r rune) bool { return r < ' ' || r == 0x7f || strings.ContainsRune(` ~^:?*[\`, r) }
	return strings.HasPrefix(s, "refs/") && !strings.HasSuffix(s, "/") && !strings.Contains(s, "..") &&
		!strings.Contains(s, "//") && !strings.ContainsFunc(s, forbidden)
}

func isSHA1(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
