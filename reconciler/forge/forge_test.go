package forge

import (
	"context"
	"strings"
	"testing"
)

// TestURLCredentialsNeverInErrors: credentials in an API or repository URL stay out of errors,
// though the SDKs quote the URL of a failed request (nothing listens on port 1).
func TestURLCredentialsNeverInErrors(t *testing.T) {
	const secret = "SECRETTOKEN"
	ctx := context.Background()
	gh, err := NewGitHub("http://"+secret+"@127.0.0.1:1/api/v3/", token, "acme", "pools", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, postErr := Post(ctx, gh, 7, "m", "m", true, false)
	_, listErr := gh.PullRequests(ctx)
	_, badAPIErr := NewGitHub("http://x-access-token:"+secret+"@[::1/", token, "acme", "pools", nil)
	_, giteaErr := NewGitea(ctx, "http://"+secret+"@127.0.0.1:1", token, "acme", "pools", nil) // asks for the version
	_, openErr := Open(ctx, "gitea", "", token, "ssh://"+secret+"@host/acme/pools.git", "acme", "pools")
	_, _, slugErr := Slug("https://" + secret + "@host/pools")
	for _, err := range []error{postErr, gh.SetStatus(ctx, "abc", Status{State: "success"}), listErr, badAPIErr, giteaErr, openErr, slugErr} {
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("error %v", err)
		}
	}
}
