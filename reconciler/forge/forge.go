// Package forge puts plans where reviewers read them: one sticky comment per pull request,
// found again by its hidden marker and its author and updated in place, and a commit status on
// the head commit. GitHub speaks REST through go-github, Gitea its API v1 through its SDK.
// Tokens stay inside the clients: they are never part of an error or a log line, and errors
// have the URLs they quote redacted, since an API or repository URL can carry credentials too.
package forge

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/karpool/karpool/internal/redact"
)

// Forge is a repository on a forge, with the calls karpool makes.
type Forge interface {
	// Me is the login the token acts as.
	Me(ctx context.Context) (string, error)
	Comments(ctx context.Context, pr int) ([]Comment, error)
	CreateComment(ctx context.Context, pr int, body string) (Comment, error)
	EditComment(ctx context.Context, id int64, body string) (Comment, error)
	SetStatus(ctx context.Context, sha string, s Status) error
	// PullRequests are the open pull requests.
	PullRequests(ctx context.Context) ([]PullRequest, error)
	// ChangedFiles are the paths a pull request changes.
	ChangedFiles(ctx context.Context, pr int) ([]string, error)
}

// Comment is a pull-request comment.
type Comment struct {
	ID                int64
	Author, Body, URL string
}

// Status is a commit status.
type Status struct {
	// State is pending, success, failure or error.
	State, Context, Description, TargetURL string
}

// PullRequest is an open pull request.
type PullRequest struct {
	Number           int
	BaseRef, HeadRef string
	HeadSHA          string
	// Fork: the head is in another repository than the base (or the forge no longer says
	// which), so anyone may have written it.
	Fork bool
	// Labels are the pull request's labels (set by people with triage rights).
	Labels []string
}

// Outcome says what Post did.
type Outcome string

// What Post can do.
const (
	Created   Outcome = "created"
	Updated   Outcome = "updated"
	Unchanged Outcome = "unchanged"
	Skipped   Outcome = "skipped" // nothing to say and no earlier comment
)

// Post writes body as the pull request's one comment carrying marker: the earlier comment with
// the marker by the same user is edited (when its body differs), otherwise a new one is made.
// When the change changes nothing (changed false) and always is false, no new comment is made;
// an earlier one is still brought up to date, so that it never shows stale numbers.
func Post(ctx context.Context, f Forge, pr int, marker, body string, changed, always bool) (Outcome, Comment, error) {
	me, err := f.Me(ctx)
	if err != nil {
		return "", Comment{}, fmt.Errorf("finding the token's user: %w", err)
	}
	comments, err := f.Comments(ctx, pr)
	if err != nil {
		return "", Comment{}, fmt.Errorf("listing the comments of pull request %d: %w", pr, err)
	}
	for _, c := range comments {
		if c.Author != me || !strings.Contains(c.Body, marker) {
			continue
		}
		if c.Body == body {
			return Unchanged, c, nil
		}
		edited, err := f.EditComment(ctx, c.ID, body)
		if err != nil {
			return "", Comment{}, fmt.Errorf("updating comment %d: %w", c.ID, err)
		}
		return Updated, edited, nil
	}
	if !changed && !always {
		return Skipped, Comment{}, nil
	}
	c, err := f.CreateComment(ctx, pr, body)
	if err != nil {
		return "", Comment{}, fmt.Errorf("commenting on pull request %d: %w", pr, err)
	}
	return Created, c, nil
}

// Open connects to repository owner/name on the forge provider ("github" or "gitea") with
// token. apiURL is the forge's address; empty means api.github.com for GitHub, and for Gitea
// the scheme and host of repoURL (the repository's clone URL).
func Open(ctx context.Context, provider, apiURL, token, repoURL, owner, name string) (Forge, error) {
	switch provider {
	case "github":
		return NewGitHub(apiURL, token, owner, name, nil)
	case "gitea":
		if apiURL == "" {
			u, err := url.Parse(repoURL)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, fmt.Errorf("the Gitea server's address is needed: the repository URL %q does not name it", redact.URL(repoURL))
			}
			apiURL = u.Scheme + "://" + u.Host
		}
		return NewGitea(ctx, apiURL, token, owner, name, nil)
	}
	return nil, fmt.Errorf("forge %q: want github or gitea", provider)
}

// Slug reads owner/name from a repository URL: https://host/owner/name(.git),
// ssh://git@host/owner/name.git, or git@host:owner/name.git.
func Slug(repoURL string) (owner, name string, err error) {
	p := repoURL
	if u, perr := url.Parse(repoURL); perr == nil && u.Host != "" {
		p = u.Path
	} else if _, after, ok := strings.Cut(repoURL, ":"); ok && strings.Contains(repoURL, "@") {
		p = after
	}
	parts := strings.Split(strings.Trim(strings.TrimSuffix(strings.TrimSpace(p), ".git"), "/"), "/")
	if len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", "", fmt.Errorf("cannot read owner/name from %q: give it with --repository OWNER/NAME", redact.URL(repoURL))
	}
	return parts[len(parts)-2], parts[len(parts)-1], nil
}

// Description fits a commit status description (GitHub keeps 140 characters).
func Description(s string) string {
	s = strings.Join(strings.Fields(strings.NewReplacer("*", "", "`", "").Replace(s)), " ")
	if r := []rune(s); len(r) > 140 {
		return string(r[:139]) + "…"
	}
	return s
}
