package forge

import (
	"context"
	"net/http"

	"code.gitea.io/sdk/gitea"

	"github.com/karpool/karpool/internal/redact"
)

// Gitea is a repository on a Gitea server.
type Gitea struct {
	client      *gitea.Client
	owner, repo string
}

// NewGitea returns the repository owner/repo on the Gitea server at baseURL
// (https://gitea.example.com, without /api/v1).
func NewGitea(ctx context.Context, baseURL, token, owner, repo string, hc *http.Client) (*Gitea, error) {
	opts := []gitea.ClientOption{gitea.SetToken(token), gitea.SetContext(ctx)}
	if hc != nil {
		opts = append(opts, gitea.SetHTTPClient(hc))
	}
	c, err := gitea.NewClient(baseURL, opts...)
	if err != nil {
		return nil, redact.Error(err)
	}
	return &Gitea{client: c, owner: owner, repo: repo}, nil
}

// with sets the context of the next calls (the SDK keeps one per client).
func (g *Gitea) with(ctx context.Context) *gitea.Client {
	g.client.SetContext(ctx)
	return g.client
}

// Me implements Forge.
func (g *Gitea) Me(ctx context.Context) (string, error) {
	u, _, err := g.with(ctx).GetMyUserInfo()
	if err != nil {
		return "", redact.Error(err)
	}
	return u.UserName, nil
}

// Comments implements Forge; it reads every page.
func (g *Gitea) Comments(ctx context.Context, pr int) ([]Comment, error) {
	var out []Comment
	for page := 1; ; page++ {
		cs, _, err := g.with(ctx).ListIssueComments(g.owner, g.repo, int64(pr), gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			return nil, redact.Error(err)
		}
		for _, c := range cs {
			out = append(out, giteaComment(c))
		}
		if len(cs) < 50 {
			return out, nil
		}
	}
}

// CreateComment implements Forge.
func (g *Gitea) CreateComment(ctx context.Context, pr int, body string) (Comment, error) {
	c, _, err := g.with(ctx).CreateIssueComment(g.owner, g.repo, int64(pr), gitea.CreateIssueCommentOption{Body: body})
	if err != nil {
		return Comment{}, redact.Error(err)
	}
	return giteaComment(c), nil
}

// EditComment implements Forge.
func (g *Gitea) EditComment(ctx context.Context, id int64, body string) (Comment, error) {
	c, _, err := g.with(ctx).EditIssueComment(g.owner, g.repo, id, gitea.EditIssueCommentOption{Body: body})
	if err != nil {
		return Comment{}, redact.Error(err)
	}
	return giteaComment(c), nil
}

// SetStatus implements Forge.
func (g *Gitea) SetStatus(ctx context.Context, sha string, s Status) error {
	_, _, err := g.with(ctx).CreateStatus(g.owner, g.repo, sha, gitea.CreateStatusOption{
		State: gitea.StatusState(s.State), Context: s.Context, Description: s.Description, TargetURL: s.TargetURL})
	return redact.Error(err)
}

// PullRequests implements Forge; it reads every page.
func (g *Gitea) PullRequests(ctx context.Context) ([]PullRequest, error) {
	var out []PullRequest
	for page := 1; ; page++ {
		prs, _, err := g.with(ctx).ListRepoPullRequests(g.owner, g.repo, gitea.ListPullRequestsOptions{State: gitea.StateOpen, ListOptions: gitea.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			return nil, redact.Error(err)
		}
		for _, p := range prs {
			pr := PullRequest{Number: int(p.Index), Fork: true}
			for _, l := range p.Labels {
				pr.Labels = append(pr.Labels, l.Name)
			}
			if p.Base != nil {
				pr.BaseRef = p.Base.Ref
			}
			if p.Head != nil {
				pr.HeadRef, pr.HeadSHA = p.Head.Ref, p.Head.Sha
				pr.Fork = p.Base == nil || p.Head.RepoID == 0 || p.Head.RepoID != p.Base.RepoID
			}
			out = append(out, pr)
		}
		if len(prs) < 50 {
			return out, nil
		}
	}
}

// ChangedFiles implements Forge; it reads every page.
func (g *Gitea) ChangedFiles(ctx context.Context, pr int) ([]string, error) {
	var out []string
	for page := 1; ; page++ {
		fs, _, err := g.with(ctx).ListPullRequestFiles(g.owner, g.repo, int64(pr), gitea.ListPullRequestFilesOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			return nil, redact.Error(err)
		}
		for _, f := range fs {
			out = append(out, f.Filename)
			if f.PreviousFilename != "" {
				out = append(out, f.PreviousFilename)
			}
		}
		if len(fs) < 50 {
			return out, nil
		}
	}
}

func giteaComment(c *gitea.Comment) Comment {
	out := Comment{ID: c.ID, Body: c.Body, URL: c.HTMLURL}
	if c.Poster != nil {
		out.Author = c.Poster.UserName
	}
	return out
}
