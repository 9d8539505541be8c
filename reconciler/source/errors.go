package source

import (
	"fmt"

	"github.com/karpool/karpool/internal/redact"
)

// Kind classifies a fetch failure, so that the caller can pick a condition reason and decide
// whether retrying can help.
type Kind string

const (
	// Invalid: the request itself is wrong (URL, commit, semver range); retrying cannot help.
	Invalid Kind = "Invalid"
	// Auth: the server refused the credentials, or the credentials cannot be used.
	Auth Kind = "Auth"
	// NotFound: the server has no such repository.
	NotFound Kind = "NotFound"
	// RefNotFound: the repository has no such branch, tag, matching tag or commit.
	RefNotFound Kind = "RefNotFound"
	// Unreachable: the server could not be reached or broke off; retrying may help.
	Unreachable Kind = "Unreachable"
	// Timeout: the operation ran out of time.
	Timeout Kind = "Timeout"
)

// Error is a failed fetch. Its text never contains a password, token or key.
type Error struct {
	Kind Kind
	// URL is the repository without credentials.
	URL string
	Err error
}

// Error redacts the whole message: URL is redacted when the Error is made, but Err can quote
// the URL again as go-git or net/http printed it, credentials and all.
func (e *Error) Error() string {
	return redact.Text(e.message())
}

func (e *Error) message() string {
	switch e.Kind {
	case Auth:
		return fmt.Sprintf("authentication to %s failed: %v; check the credentials in the Secret named by spec.secretRef", e.URL, e.Err)
	case NotFound:
		return fmt.Sprintf("repository %s not found: %v; check spec.url (and that the credentials may read it)", e.URL, e.Err)
	case Unreachable:
		return fmt.Sprintf("cannot fetch from %s: %v", e.URL, e.Err)
	case Timeout:
		return fmt.Sprintf("fetching from %s timed out: %v; raise spec.timeout if the repository is large", e.URL, e.Err)
	default:
		return fmt.Sprintf("%s: %v", e.URL, e.Err)
	}
}

func (e *Error) Unwrap() error { return e.Err }
