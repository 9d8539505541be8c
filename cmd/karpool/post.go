package main

import (
	"fmt"
	"os"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"github.com/karpool/karpool/reconciler/forge"
	"github.com/karpool/karpool/reconciler/review"
)

// postPlan puts the plan on the pull request: the sticky comment, and a commit status on the
// head commit (failure when the head does not validate or a guardrail blocks it).
func postPlan(cmd *cobra.Command, o planOptions, plan *review.Plan, headSHA string) error {
	f, err := openForge(cmd, o)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	out, c, err := forge.Post(ctx, f, o.pr, review.Marker(o.path), plan.Markdown(resolvedVersion()), plan.Worth(), o.always)
	if err != nil {
		return fmt.Errorf("--post %s: %w", o.post, err)
	}
	state, why := plan.CommitStatus()
	st := forge.Status{State: state, Context: "karpool/plan", Description: forge.Description(why), TargetURL: c.URL}
	if err := f.SetStatus(ctx, headSHA, st); err != nil {
		return fmt.Errorf("--post %s: setting the commit status of %s: %w", o.post, headSHA, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "karpool plan: comment %s on pull request %d %s; status %s on %s\n", out, o.pr, c.URL, st.State, headSHA[:min(12, len(headSHA))])
	return nil
}

// openForge connects to the forge with the token from the environment.
func openForge(cmd *cobra.Command, o planOptions) (forge.Forge, error) {
	env := map[string]string{"github": "GITHUB_TOKEN", "gitea": "GITEA_TOKEN"}[o.post]
	token := os.Getenv(env)
	if token == "" {
		return nil, fmt.Errorf("--post %s needs a token in $%s", o.post, env)
	}
	remote := o.repo
	if !strings.Contains(remote, "://") {
		remote = originURL(o.repo)
	}
	owner, name, err := repositoryOf(o.repository, remote)
	if err != nil {
		return nil, err
	}
	f, err := forge.Open(cmd.Context(), o.post, o.apiURL, token, remote, owner, name)
	if err != nil {
		return nil, fmt.Errorf("--post %s: %w (give --api-url)", o.post, err)
	}
	return f, nil
}

func repositoryOf(flag, remote string) (owner, name string, err error) {
	if flag != "" {
		owner, name, ok := strings.Cut(flag, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return "", "", fmt.Errorf("--repository %q: want OWNER/NAME", flag)
		}
		return owner, name, nil
	}
	return forge.Slug(remote)
}

// originURL is the URL of a work tree's origin remote, or "" when it has none.
func originURL(dir string) string {
	repo, err := gogit.PlainOpenWithOptions(dir, &gogit.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return ""
	}
	r, err := repo.Remote("origin")
	if err != nil || len(r.Config().URLs) == 0 {
		return ""
	}
	return r.Config().URLs[0]
}
