package source

import (
	"context"
	"errors"
	"net/url"
	"path"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/karpool/karpool/internal/redact"
)

// Commit is files to write to a branch as one commit.
type Commit struct {
	URL         string
	Credentials *Credentials
	Branch      string
	// Files are written by slash-separated path; the branch's other files stay.
	Files   map[string][]byte
	Author  object.Signature
	Message string
}

// pushAttempts bounds the retries of a push that lost a race with another writer.
const pushAttempts = 3

// Push commits c.Files on c.Branch and pushes it, unless the branch already holds exactly
// these files (then it returns false). A branch that does not exist yet starts as an orphan
// commit. A push rejected because the branch moved meanwhile is retried on the new tip.
// Errors are *Error.
func Push(ctx context.Context, c Commit) (pushed bool, err error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return false, &Error{Kind: Invalid, URL: redact.URL(c.URL), Err: errNotURL}
	}
	auth, err := c.Credentials.authMethod(u)
	if err != nil {
		return false, &Error{Kind: Auth, URL: redact.URL(c.URL), Err: err}
	}
	g := &gitOp{url: c.URL, shown: redact.URL(c.URL), auth: auth, creds: c.Credentials}
	for attempt := 1; ; attempt++ {
		pushed, err = g.commitAndPush(ctx, c)
		if !errors.Is(err, git.ErrNonFastForwardUpdate) || attempt == pushAttempts {
			break
		}
	}
	if err != nil && !errors.As(err, new(*Error)) {
		err = g.wrap("pushing to", err)
	}
	return pushed, err
}

// commitAndPush is one attempt: fetch the branch's tip, write, commit, push.
func (g *gitOp) commitAndPush(ctx context.Context, c Commit) (bool, error) {
	ref := plumbing.NewBranchReferenceName(c.Branch)
	repo, err := git.CloneContext(ctx, memory.NewStorage(), memfs.New(), &git.CloneOptions{
		URL: g.url, Auth: g.auth, CABundle: g.caBundle(), ReferenceName: ref, SingleBranch: true, Depth: 1, Tags: git.NoTags,
	})
	fresh := false
	switch {
	case errors.Is(err, transport.ErrEmptyRemoteRepository), isMissingRef(err):
		if repo, err = orphan(g.url); err != nil {
			return false, err
		}
		fresh = true
	case err != nil:
		return false, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return false, err
	}
	if fresh {
		if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ref)); err != nil {
			return false, err
		}
	}
	for name, data := range c.Files {
		if err := wt.Filesystem.MkdirAll(path.Dir(name), 0o755); err != nil {
			return false, err
		}
		f, err := wt.Filesystem.Create(name)
		if err != nil {
			return false, err
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return false, werr
		}
		if _, err := wt.Add(name); err != nil {
			return false, err
		}
	}
	st, err := wt.Status()
	if err != nil {
		return false, err
	}
	if st.IsClean() {
		return false, nil
	}
	author := c.Author
	if author.When.IsZero() {
		author.When = time.Now()
	}
	if _, err := wt.Commit(c.Message, &git.CommitOptions{Author: &author, AllowEmptyCommits: false}); err != nil {
		return false, err
	}
	if beforePush != nil {
		beforePush()
	}
	err = repo.PushContext(ctx, &git.PushOptions{
		RemoteName: git.DefaultRemoteName, Auth: g.auth, CABundle: g.caBundle(),
		RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec(ref + ":" + ref)},
	})
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// The branch's tip on the server is a commit this shallow clone has never seen:
		// someone pushed since the clone.
		err = git.ErrNonFastForwardUpdate
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// beforePush lets a test move the branch between the clone and the push.
var beforePush func()

// orphan is an empty repository whose origin is url: the first commit of a new branch.
func orphan(url string) (*git.Repository, error) {
	repo, err := git.Init(memory.NewStorage(), memfs.New())
	if err != nil {
		return nil, err
	}
	_, err = repo.CreateRemote(&gitconfig.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}})
	return repo, err
}

// isMissingRef says whether a clone failed because the branch does not exist.
func isMissingRef(err error) bool {
	var nf git.NoMatchingRefSpecError
	return errors.As(err, &nf) || errors.Is(err, plumbing.ErrReferenceNotFound)
}
