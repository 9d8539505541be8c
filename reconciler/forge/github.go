package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v75/github"

	"github.com/karpool/karpool/internal/redact"
)

// GitHub is a repository on GitHub or GitHub Enterprise.
type GitHub struct {
	client      *github.Client
	owner, repo string
}

// NewGitHub returns the repository owner/repo on GitHub; apiURL is the REST base
// (https://api.github.com/ when empty; https://HOST/api/v3/ for GitHub Enterprise).
func NewGitHub(apiURL, token, owner, repo string, hc *http.Client) (*GitHub, error) {
	c := github.NewClient(hc).WithAuthToken(token)
	if apiURL != "" {
		u, err := url.Parse(strings.TrimSuffix(apiURL, "/") + "/")
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("GitHub API URL %q: want https://host/ or https://host/api/v3/", redact.URL(apiURL))
		}
		c.BaseURL = u
	}
	return &GitHub{client: c, owner: owner, repo: repo}, nil
}

// Me implements Forge.
func (g *GitHub) Me(ctx context.Context) (string, error) {
	u, _, err := g.client.Users.Get(ctx, "")
	if err != nil {
		return "", redact.Error(err)
	}
	return u.GetLogin(), nil
}

// Comments implements Forge; it reads every page.
func (g *GitHub) Comments(ctx context.Context, pr int) ([]Comment, error) {
	var out []Comment
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := g.client.Issues.ListComments(ctx, g.owner, g.repo, pr, opts)
		if err != nil {
			return nil, redact.Error(err)
		}
		for _, c := range page {
			out = append(out, githubComment(c))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// CreateComment implements Forge.
func (g *GitHub) CreateComment(ctx context.Context, pr int, body string) (Comment, error) {
	c, _, err := g.client.Issues.CreateComment(ctx, g.owner, g.repo, pr, &github.IssueComment{Body: &body})
	if err != nil {
		return Comment{}, redact.Error(err)
	}
	return githubComment(c), nil
}

// EditComment implements Forge.
func (g *GitHub) EditComment(ctx context.Context, id int64, body string) (Comment, error) {
	c, _, err := g.client.Issues.EditComment(ctx, g.owner, g.repo, id, &github.IssueComment{Body: &body})
	if err != nil {
		return Comment{}, redact.Error(err)
	}
	return githubComment(c), nil
}

// SetStatus implements Forge.
func (g *GitHub) SetStatus(ctx context.Context, sha string, s Status) error {
	st := &github.RepoStatus{State: &s.State, Context: &s.Context, Description: &s.Description}
	if s.TargetURL != "" {
		st.TargetURL = &s.TargetURL
	}
	_, _, err := g.client.Repositories.CreateStatus(ctx, g.owner, g.repo, sha, st)
	return redact.Error(err)
}

// PullRequests implements Forge; it reads every page.
func (g *GitHub) PullRequests(ctx context.Context) ([]PullRequest, error) {
	var out []PullRequest
	opts := &github.PullRequestListOptions{State: "open", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := g.client.PullRequests.List(ctx, g.owner, g.repo, opts)
		if err != nil {
			return nil, redact.Error(err)
		}
		for _, p := range page {
			head, base := p.GetHead().GetRepo().GetID(), p.GetBase().GetRepo().GetID()
			pr := PullRequest{Number: p.GetNumber(), BaseRef: p.GetBase().GetRef(), HeadRef: p.GetHead().GetRef(), HeadSHA: p.GetHead().GetSHA(),
				Fork: head == 0 || head != base}
			for _, l := range p.Labels {
				pr.Labels = append(pr.Labels, l.GetName())
			}
			out = append(out, pr)
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// ChangedFiles implements Forge; it reads every page.
func (g *GitHub) ChangedFiles(ctx context.Context, pr int) ([]string, error) {
	var out []string
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := g.client.PullRequests.ListFiles(ctx, g.owner, g.repo, pr, opts)
		if err != nil {
			return nil, redact.Error(err)
		}
		for _, f := range page {
			out = append(out, f.GetFilename())
			if prev := f.GetPreviousFilename(); prev != "" {
				out = append(out, prev)
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func githubComment(c *github.IssueComment) Comment {
	return Comment{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: c.GetBody(), URL: c.GetHTMLURL()}
}
