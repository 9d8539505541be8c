// Package redact hides the secrets that URLs carry, in a URL and in any message quoting URLs,
// so that errors, log lines, events, status conditions and comments can name a repository
// without handing out its credentials.
//
// A URL carries secrets in two places. One is its user info: forges take a token in the user
// name (https://ghp_…@github.com/…) as readily as in the password
// (https://x-access-token:…@github.com/…, https://oauth2:glpat-…@gitlab.com/…), and
// url.URL.Redacted hides only the password, so the user info goes whole. The other is its
// query (?access_token=, ?private_token=, signatures): every value goes, the keys stay so that
// the reader sees what was passed. Scheme, host, port, path and fragment stay: they tell which
// repository is meant.
//
// The work is lexical, not url.Parse and String: messages quote URLs that do not parse (a
// token with a raw "/" in it), exactly as their writer printed them; parsing would miss the
// first and printing again would alter the second.
package redact

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// placeholder stands for whatever was hidden, as in url.URL.Redacted.
const placeholder = "xxxxx"

// conventionalUser is the ssh user of GitHub, GitLab, Bitbucket and Gitea alike. Alone (no
// password) it is kept: it is never a secret, and hints such as "ssh://git@host/path" and the
// addresses forges show for cloning stay as written.
const conventionalUser = "git"

// URL returns raw with its user info and query values hidden. raw need not parse: every "://"
// in it starts a URL (so a URL quoted inside another one is redacted too), and without one, an
// scp-style address user@host:path loses its user unless that is "git".
func URL(raw string) string {
	return hide(raw, secrets(raw))
}

// Text returns msg with every URL in it redacted as URL does. A URL ends at white space, a
// quote or an angle bracket, which is how net/http, go-git and kustomize set them off; one
// escaped with a backslash (a quote in Go's %q) is part of the URL.
func Text(msg string) string {
	if !strings.Contains(msg, "://") && !strings.Contains(msg, "@") {
		return msg
	}
	var b strings.Builder
	b.Grow(len(msg))
	start := 0
	for i, r := range msg {
		if delimiter(r) && (i == 0 || msg[i-1] != '\\') {
			// A delimiter is a valid rune (U+FFFD, which stands for invalid bytes, is none),
			// so its length in msg is its encoded length.
			b.WriteString(URL(msg[start:i]))
			b.WriteRune(r)
			start = i + utf8.RuneLen(r)
		}
	}
	b.WriteString(URL(msg[start:]))
	return b.String()
}

func delimiter(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune("\"'`<>", r)
}

// Secrets replaces each of the secret values (passwords, tokens, keys read from a Secret) in
// msg, wherever they stand, URL or not. Values shorter than four bytes are left: replacing
// them would mangle ordinary words, and they are no secrets worth the name.
func Secrets(msg string, values ...string) string {
	for _, v := range values {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, placeholder)
		}
	}
	return msg
}

// Error returns err with Text applied to its message. errors.Is and errors.As still see err,
// whose own message is not redacted: print the returned error, not what it wraps.
func Error(err error) error {
	if err == nil {
		return nil
	}
	if _, done := err.(*redacted); done {
		return err
	}
	return &redacted{err: err}
}

type redacted struct{ err error }

func (e *redacted) Error() string { return Text(e.err.Error()) }
func (e *redacted) Unwrap() error { return e.err }

// span is s[from:to], to be hidden.
type span struct{ from, to int }

// secrets finds what to hide in s: for every "://", the user info and query values of the URL
// it starts; without any, the user of an scp-style address.
func secrets(s string) []span {
	if !strings.Contains(s, "://") {
		return scpUser(s)
	}
	var out []span
	for from := 0; ; {
		i := strings.Index(s[from:], "://")
		if i < 0 {
			return out
		}
		from += i + len("://")
		if sp, ok := userInfo(s, from); ok {
			out = append(out, sp)
		}
		out = append(out, queryValues(s, from)...)
	}
}

// userInfo finds the user info of the URL whose authority starts at s[from]: what precedes the
// last "@" before the path. An authority without "@" that is no host[:port] has a user info
// holding a raw "/", "?" or "#" (a base64 token written unescaped, which no parser reads as
// the writer meant): then everything up to the last "@" goes, host and path with it.
func userInfo(s string, from int) (span, bool) {
	rest := s[from:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 && !hostPort(rest[:end]) {
		at = strings.LastIndexByte(rest, '@')
	}
	if at <= 0 || rest[:at] == conventionalUser {
		return span{}, false
	}
	return span{from, from + at}, true
}

// hostPort says whether s reads as host, host:port or [IPv6]:port, the port being digits.
func hostPort(s string) bool {
	if i := strings.LastIndexByte(s, ']'); i >= 0 {
		s = s[i+1:]
	}
	_, port, _ := strings.Cut(s, ":")
	return strings.Trim(port, "0123456789") == ""
}

// queryValues finds the values of the query of the URL whose authority starts at s[from]. A
// part without "=" goes whole: it can be a bare token. The query ends at the fragment.
func queryValues(s string, from int) []span {
	q := strings.IndexAny(s[from:], "?#")
	if q < 0 || s[from+q] == '#' {
		return nil
	}
	start := from + q + 1
	query := s[start:]
	if f := strings.IndexByte(query, '#'); f >= 0 {
		query = query[:f]
	}
	var out []span
	for part := range strings.SplitSeq(query, "&") {
		value := 0
		if eq := strings.IndexByte(part, '='); eq >= 0 {
			value = eq + 1
		}
		if value < len(part) {
			out = append(out, span{start + value, start + len(part)})
		}
		start += len(part) + 1
	}
	return out
}

// scpUser finds the user of an scp-style address, user@host:path, unless it is "git". The host
// must have a dot, which tells such an address from an image digest (nginx@sha256:…).
func scpUser(s string) []span {
	colon := strings.IndexByte(s, ':')
	if colon < 0 || colon == len(s)-1 || strings.Contains(s[:colon], "/") {
		return nil
	}
	at := strings.LastIndexByte(s[:colon], '@')
	if at <= 0 || s[:at] == conventionalUser || !strings.Contains(s[at+1:colon], ".") {
		return nil
	}
	return []span{{0, at}}
}

// hide replaces the spans of s with the placeholder; overlapping or touching spans share one.
func hide(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var b strings.Builder
	b.Grow(len(s))
	written := 0
	for i := 0; i < len(spans); {
		sp := spans[i]
		for i++; i < len(spans) && spans[i].from <= sp.to; i++ {
			sp.to = max(sp.to, spans[i].to)
		}
		b.WriteString(s[written:sp.from])
		b.WriteString(placeholder)
		written = sp.to
	}
	b.WriteString(s[written:])
	return b.String()
}
