package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const token = "ghp_test-token-value"

// fakeGitHub answers the calls of GitHub's REST API that karpool makes, as GitHub documents
// them (docs.github.com/rest: users, issue comments, commit statuses), and checks each request's
// method, path, headers and JSON body; it fails the test on anything else.
type fakeGitHub struct {
	t        *testing.T
	mu       sync.Mutex
	comments []map[string]any
	statuses []map[string]any
	calls    []string
	nextID   int64
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	if got := r.Header.Get("Authorization"); got != "Bearer "+token {
		f.t.Errorf("%s %s: Authorization %q", r.Method, r.URL.Path, got)
	}
	if got := r.Header.Get("Accept"); !strings.Contains(got, "application/vnd.github") {
		f.t.Errorf("%s %s: Accept %q, want GitHub's media type", r.Method, r.URL.Path, got)
	}
	var body map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			f.t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			f.t.Errorf("%s %s: body %q is not JSON", r.Method, r.URL.Path, data)
		}
	}
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/user":
		reply(200, map[string]any{"login": "karpool-bot", "id": 1})
	case r.Method == http.MethodGet && r.URL.Path == "/repos/acme/pools/issues/7/comments":
		if r.URL.Query().Get("per_page") != "100" {
			f.t.Errorf("comments listed %q, want per_page=100", r.URL.RawQuery)
		}
		reply(200, f.comments)
	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/pools/issues/7/comments":
		f.expectKeys(body, "body")
		f.nextID++
		c := map[string]any{"id": f.nextID, "body": body["body"], "user": map[string]any{"login": "karpool-bot"}, "html_url": fmt.Sprintf("https://github.example/acme/pools/pull/7#issuecomment-%d", f.nextID)}
		f.comments = append(f.comments, c)
		reply(201, c)
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/repos/acme/pools/issues/comments/"):
		f.expectKeys(body, "body")
		for _, c := range f.comments {
			if fmt.Sprint(c["id"]) == strings.TrimPrefix(r.URL.Path, "/repos/acme/pools/issues/comments/") {
				c["body"] = body["body"]
				reply(200, c)
				return
			}
		}
		reply(404, map[string]any{"message": "Not Found"})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/repos/acme/pools/statuses/"):
		f.expectKeys(body, "state", "context", "description")
		if s := body["state"]; s != "success" && s != "failure" && s != "error" && s != "pending" {
			f.t.Errorf("status state %v", s)
		}
		f.statuses = append(f.statuses, body)
		reply(201, body)
	default:
		f.t.Errorf("unexpected call %s %s", r.Method, r.URL)
		reply(404, map[string]any{"message": "Not Found"})
	}
}

// expectKeys checks that a body has the keys and no others beyond those GitHub documents.
func (f *fakeGitHub) expectKeys(body map[string]any, keys ...string) {
	allowed := map[string]bool{"body": true, "state": true, "context": true, "description": true, "target_url": true}
	for _, k := range keys {
		if _, ok := body[k]; !ok {
			f.t.Errorf("body %v lacks %q", body, k)
		}
	}
	for k := range body {
		if !allowed[k] {
			f.t.Errorf("body has undocumented key %q", k)
		}
	}
}

// TestGitHubStickyComment: the first plan creates the comment; a second one edits it in place
// (still one comment by karpool); a comment of someone else quoting the marker is left alone;
// the same body twice is no call at all; the commit status carries state, context and a short
// description.
func TestGitHubStickyComment(t *testing.T) {
	fake := &fakeGitHub{t: t, nextID: 100, comments: []map[string]any{
		{"id": 5, "body": "quoting <!-- karpool-plan path=\"pools/\" --> here", "user": map[string]any{"login": "alice"}},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	gh, err := NewGitHub(srv.URL, token, "acme", "pools", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	marker := `<!-- karpool-plan path="pools/" -->`

	out, c, err := Post(ctx, gh, 7, marker, marker+"\nfirst", true, false)
	if err != nil || out != Created || c.ID != 101 {
		t.Fatalf("first post: %v %+v %v", out, c, err)
	}
	out, c, err = Post(ctx, gh, 7, marker, marker+"\nsecond", true, false)
	if err != nil || out != Updated || c.ID != 101 {
		t.Fatalf("second post: %v %+v %v", out, c, err)
	}
	if out, _, err = Post(ctx, gh, 7, marker, marker+"\nsecond", true, false); err != nil || out != Unchanged {
		t.Fatalf("same body: %v %v", out, err)
	}
	if len(fake.comments) != 2 || fake.comments[0]["body"] != "quoting <!-- karpool-plan path=\"pools/\" --> here" || fake.comments[1]["body"] != marker+"\nsecond" {
		t.Errorf("comments %v", fake.comments)
	}

	long := strings.Repeat("cost up ", 40)
	if err := gh.SetStatus(ctx, "0123456789abcdef0123456789abcdef01234567", Status{State: "success", Context: "karpool/plan", Description: Description("**" + long + "**")}); err != nil {
		t.Fatal(err)
	}
	if len(fake.statuses) != 1 || len([]rune(fake.statuses[0]["description"].(string))) > 140 || fake.statuses[0]["context"] != "karpool/plan" {
		t.Errorf("statuses %v", fake.statuses)
	}
	want := []string{"GET /user", "GET /repos/acme/pools/issues/7/comments", "POST /repos/acme/pools/issues/7/comments",
		"GET /user", "GET /repos/acme/pools/issues/7/comments", "PATCH /repos/acme/pools/issues/comments/101",
		"GET /user", "GET /repos/acme/pools/issues/7/comments",
		"POST /repos/acme/pools/statuses/0123456789abcdef0123456789abcdef01234567"}
	if strings.Join(fake.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(fake.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoChangeNoComment: a plan that changes nothing makes no comment unless asked, but brings
// an earlier one up to date.
func TestNoChangeNoComment(t *testing.T) {
	fake := &fakeGitHub{t: t, nextID: 1}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	gh, _ := NewGitHub(srv.URL, token, "acme", "pools", srv.Client())
	ctx := context.Background()
	if out, _, err := Post(ctx, gh, 7, "<!-- m -->", "<!-- m --> nothing", false, false); err != nil || out != Skipped || len(fake.comments) != 0 {
		t.Fatalf("no change: %v %v, %d comments", out, err, len(fake.comments))
	}
	if out, _, err := Post(ctx, gh, 7, "<!-- m -->", "<!-- m --> nothing", false, true); err != nil || out != Created {
		t.Fatalf("--always: %v %v", out, err)
	}
	if out, _, err := Post(ctx, gh, 7, "<!-- m -->", "<!-- m --> nothing now", false, false); err != nil || out != Updated {
		t.Fatalf("no change with an earlier comment: %v %v", out, err)
	}
}

// TestTokenNeverInErrors: a refusal names the call, not the token.
func TestTokenNeverInErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		_, _ = io.WriteString(w, `{"message": "Bad credentials"}`)
	}))
	defer srv.Close()
	gh, _ := NewGitHub(srv.URL, token, "acme", "pools", srv.Client())
	_, _, err := Post(context.Background(), gh, 7, "m", "m", true, false)
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "Bad credentials") {
		t.Errorf("error %v", err)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/pools.git":     "acme/pools",
		"https://gitea.local:3000/acme/pools":   "acme/pools",
		"ssh://git@github.com/acme/pools.git":   "acme/pools",
		"git@github.com:acme/pools.git":         "acme/pools",
		"http://127.0.0.1:8080/org/team/pools/": "team/pools",
		"file:///srv/git/acme/pools.git":        "acme/pools",
	} {
		o, n, err := Slug(in)
		if err != nil || o+"/"+n != want {
			t.Errorf("Slug(%q) = %s/%s, %v; want %s", in, o, n, err, want)
		}
	}
	if _, _, err := Slug("pools"); err == nil {
		t.Error("a bare name gave a slug")
	}
}
