package redact_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/karpool/karpool/internal/redact"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"GitHub app token", "https://x-access-token:ghs_16C7e42F292c6912E7710c838347Ae178B4a@github.com/acme/pools.git", "https://xxxxx@github.com/acme/pools.git"},
		{"GitHub token as user", "https://ghp_R2d2C3poR2d2C3poR2d2C3poR2d2C3po1234@github.com/acme/pools", "https://xxxxx@github.com/acme/pools"},
		{"GitHub fine-grained token", "https://github_pat_11ABC_xyz@github.com/acme/pools.git", "https://xxxxx@github.com/acme/pools.git"},
		{"GitLab oauth2", "https://oauth2:glpat-abcdefghij0123456789@gitlab.com/group/sub/pools.git", "https://xxxxx@gitlab.com/group/sub/pools.git"},
		{"GitLab CI job token", "https://gitlab-ci-token:64_abcdef@gitlab.example.com/g/p.git", "https://xxxxx@gitlab.example.com/g/p.git"},
		{"GitLab private_token query", "https://gitlab.com/api/v4/projects/1?private_token=glpat-abc", "https://gitlab.com/api/v4/projects/1?private_token=xxxxx"},
		{"Bitbucket access token", "https://x-token-auth:ATCTT3xFfGN0@bitbucket.org/team/repo.git", "https://xxxxx@bitbucket.org/team/repo.git"},
		{"Bitbucket app password", "https://alice:ATBBsecretsecret@bitbucket.org/team/repo.git", "https://xxxxx@bitbucket.org/team/repo.git"},
		{"Gitea with port", "https://alice:0123456789abcdef0123@gitea.example.com:3000/alice/pools.git", "https://xxxxx@gitea.example.com:3000/alice/pools.git"},
		{"Gitea token query", "http://gitea:3000/api/v1/user?token=0123abcd&access_token=4567", "http://gitea:3000/api/v1/user?token=xxxxx&access_token=xxxxx"},
		{"user alone", "https://alice@example.com/r.git", "https://xxxxx@example.com/r.git"},
		{"ssh git user kept", "ssh://git@github.com/acme/pools.git", "ssh://git@github.com/acme/pools.git"},
		{"ssh other user", "ssh://deploy:pw@git.example.com:2222/r.git", "ssh://xxxxx@git.example.com:2222/r.git"},
		{"git user with password", "https://git:tok3n@host/r.git", "https://xxxxx@host/r.git"},
		{"scp git user kept", "git@github.com:acme/pools.git", "git@github.com:acme/pools.git"},
		{"scp other user", "ghp_abcdef@github.com:acme/pools.git", "xxxxx@github.com:acme/pools.git"},
		{"IPv6", "https://tok@[::1]:8443/r.git", "https://xxxxx@[::1]:8443/r.git"},
		{"IPv6 zone and query", "http://[fe80::1%25eth0]:3000/r?token=a", "http://[fe80::1%25eth0]:3000/r?token=xxxxx"},
		{"percent-encoded user info", "https://user%40corp:p%2Fss%3Aw@host/r", "https://xxxxx@host/r"},
		{"percent-encoded query", "https://host/r?token=a%26b%3Dc&x=1", "https://host/r?token=xxxxx&x=xxxxx"},
		{"bare query token", "https://host/r?ghp_abc", "https://host/r?xxxxx"},
		{"empty value kept", "https://host/r?a=&b=1", "https://host/r?a=&b=xxxxx"},
		{"fragment kept", "https://host/r?a=1#L10", "https://host/r?a=xxxxx#L10"},
		{"raw slash in password", "https://alice:abc/def+ghi@host/r.git", "https://xxxxx@host/r.git"},
		{"raw hash in password", "https://alice:abc#def@host/r.git", "https://xxxxx@host/r.git"},
		{"raw @ in password", "https://alice:p@ss@host/r.git", "https://xxxxx@host/r.git"},
		{"does not parse", "https://a:s3cret@exa mple.com/%zz", "https://xxxxx@exa mple.com/%zz"},
		{"URL inside a URL", "https://host/p/https://tok@other/x", "https://host/p/https://xxxxx@other/x"},
		{"no secret", "https://github.com/acme/pools", "https://github.com/acme/pools"},
		{"path with @", "https://proxy.golang.org/k8s.io/api/@v/list", "https://proxy.golang.org/k8s.io/api/@v/list"},
		{"file", "file:///tmp/r.git", "file:///tmp/r.git"},
		{"directory", "/tmp/work", "/tmp/work"},
		{"empty", "", ""},
	} {
		if got := redact.URL(c.in); got != c.want {
			t.Errorf("%s: URL(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"net/http",
			`Get "https://ghp_abc@127.0.0.1:1/x.git/info/refs?service=git-upload-pack": dial tcp 127.0.0.1:1: connect: connection refused`,
			`Get "https://xxxxx@127.0.0.1:1/x.git/info/refs?service=xxxxx": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"unquoted, then a colon", "repository https://tok@host/r.git: not found", "repository https://xxxxx@host/r.git: not found"},
		{"several",
			"cloning https://a:b@h1/r and https://h2/r?token=t, then git@h3.io:r and deploy@h4.io:r",
			"cloning https://xxxxx@h1/r and https://h2/r?token=xxxxx then git@h3.io:r and xxxxx@h4.io:r"},
		{"kustomize quotes",
			"accumulating resources from 'https://ghp_x@github.com/o/r//base?ref=v1': evalsymlink failure",
			"accumulating resources from 'https://xxxxx@github.com/o/r//base?ref=xxxxx': evalsymlink failure"},
		{"angle brackets and lines", "see <https://u:p@h/r>\nand `https://h/r?k=v`", "see <https://xxxxx@h/r>\nand `https://h/r?k=xxxxx`"},
		{"adjacent URLs", "https://u2@https://u:p@h/x", "https://xxxxx@https://xxxxx@h/x"},
		{"Go %q quoting", `url "https://tok@h/r?a=\"b\"" bad`, `url "https://xxxxx@h/r?a=xxxxx" bad`},
		{"hint kept", "not a URL: write https://host/path, ssh://git@host/path or file:///path", "not a URL: write https://host/path, ssh://git@host/path or file:///path"},
		{"email and digest kept", "mail alice@example.com about nginx@sha256:0123abcd", "mail alice@example.com about nginx@sha256:0123abcd"},
		{"plain", "branch \"main\" does not exist", "branch \"main\" does not exist"},
	} {
		if got := redact.Text(c.in); got != c.want {
			t.Errorf("%s: Text(%q)\n = %q\nwant %q", c.name, c.in, got, c.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	got := redact.Secrets("key abcd-secret and abc rejected, abcd-secret again", "abcd-secret", "abc", "")
	if want := "key xxxxx and abc rejected, xxxxx again"; got != want {
		t.Fatalf("Secrets = %q, want %q", got, want)
	}
}

func TestErrorRedactsAndStillWraps(t *testing.T) {
	if redact.Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
	inner := fmt.Errorf("fetching https://tok3n@host/r: %w", context.DeadlineExceeded)
	err := redact.Error(redact.Error(inner))
	if got, want := err.Error(), "fetching https://xxxxx@host/r: context deadline exceeded"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Unwrap(err) != inner {
		t.Fatalf("%v does not wrap %v once", err, inner)
	}
	if wrapped := fmt.Errorf("outer: %w", err); strings.Contains(wrapped.Error(), "tok3n") {
		t.Fatalf("wrapping again shows the token: %v", wrapped)
	}
}

// FuzzText puts a URL with user info and a query value into a message and checks that Text's
// output does not depend on them: it is the same when every letter and digit of the user, the
// password and the value is replaced, so it holds none of them, whatever the surroundings,
// separators, host and path. Redacting the output again changes nothing.
func FuzzText(f *testing.F) {
	f.Add("Get ", "x-access-token", "ghs_abc123", "github.com", "/acme/pools.git", "token", "s3cret", ": dial tcp", uint8(0))
	f.Add("cloning", "ghp_abc123", "", "gitlab.com", "", "private_token", "glpat-x", "", uint8(3))
	f.Add("'", "oauth2", "p@ss/w:rd", "h", "/a b", "k", "v&w=x#y", "'", uint8(0x5a))
	f.Add("https://u2@", "u", "p", "h.io", "/x", "a", "b", "@more", uint8(0x81))
	f.Add("x", "git", "", "[::1]:22", "//r", "ref", "v1", "https://h/?a=b", uint8(0xff))
	f.Fuzz(func(t *testing.T, prefix, user, password, host, path, key, value, suffix string, form uint8) {
		if form&1 == 1 {
			user, password, value = tokenChars(user), tokenChars(password), tokenChars(value)
		}
		if user == "git" && password == "" {
			t.Skip("the conventional ssh user is kept, so it cannot be neutralized")
		}
		in := message(prefix, user, password, host, path, key, value, suffix, form)
		got := redact.Text(in)
		neutral := redact.Text(message(prefix, neutralize(user), neutralize(password), host, path, key, neutralize(value), suffix, form))
		if got != neutral {
			t.Fatalf("the output depends on the secrets:\nin:   %q\nout:  %q\nwith neutral secrets: %q", in, got, neutral)
		}
		for _, secret := range []string{userInfo(user, password, form), url.QueryEscape(value)} {
			if len(secret) >= 4 && strings.Count(in, secret) == 1 && !strings.Contains(neutral, secret) && strings.Contains(got, secret) {
				t.Fatalf("%q shows %q: %q", in, secret, got)
			}
		}
		if again := redact.Text(got); again != got {
			t.Fatalf("redacting twice changes %q into %q", got, again)
		}
	})
}

// message is prefix, the URL and suffix, separated as form says: bit 0 writes the URL raw
// instead of escaped, bits 1-3 and 4-6 pick the separators, bit 7 an IPv6 host.
func message(prefix, user, password, host, path, key, value, suffix string, form uint8) string {
	seps := []string{"", " ", `"`, "'", "<", "\n", "`", "("}
	h := hostChars(host)
	if form&0x80 != 0 {
		h = "[fd00::1]:3000"
	}
	var u string
	if form&1 == 1 {
		u = "https://" + userInfo(user, password, form) + h + "/" + tokenChars(path) + "?" + tokenChars(key) + "=" + value
	} else {
		u = (&url.URL{Scheme: "https", Host: h, Path: path, RawQuery: url.QueryEscape(key) + "=" + url.QueryEscape(value)}).String()
		u = strings.Replace(u, "://", "://"+userInfo(user, password, form), 1)
	}
	return prefix + seps[form>>1&7] + u + seps[form>>4&7] + suffix
}

// userInfo is the user info as message writes it, "@" included; empty when there is none.
func userInfo(user, password string, form uint8) string {
	switch {
	case user == "" && password == "":
		return ""
	case form&1 == 1 && password == "":
		return user + "@"
	case form&1 == 1:
		return user + ":" + password + "@"
	case password == "":
		return url.User(user).String() + "@"
	}
	return url.UserPassword(user, password).String() + "@"
}

// neutralize replaces letters and digits, keeping the characters a URL is parsed by.
func neutralize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return 'a'
		case '0' <= r && r <= '9':
			return '0'
		}
		return r
	}, s)
}

// tokenChars keeps the characters of forge tokens and base64url, which need no escaping.
func tokenChars(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~+", r) {
			return r
		}
		return -1
	}, s)
}

// hostChars keeps the characters of a host name; the URL needs a host to have an authority.
func hostChars(s string) string {
	s = strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return -1
	}, strings.ToLower(s))
	if s == "" {
		return "example.com"
	}
	return s
}
