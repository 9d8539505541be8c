package source

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/karpool/karpool/internal/redact"
)

// Keys of a credentials Secret. They are the ones Flux's GitRepository reads, so a Secret written
// for Flux works here unchanged.
const (
	KeyUsername    = "username"
	KeyPassword    = "password"
	KeyBearerToken = "bearerToken"
	KeyCA          = "ca.crt"
	KeyIdentity    = "identity"
	KeyKnownHosts  = "known_hosts"
)

// Credentials authenticate to a Git server. Their String method never shows a secret, so they are
// safe to log by accident.
type Credentials struct {
	// Username and Password are HTTP basic auth; a personal access token goes in Password.
	Username, Password string
	// BearerToken is sent as "Authorization: Bearer"; it excludes Username and Password.
	BearerToken string
	// CABundle is added to the system roots for https.
	CABundle []byte
	// Identity is a PEM private key for ssh; Password decrypts it when it is encrypted.
	Identity []byte
	// KnownHosts holds the ssh server's host keys, in known_hosts format. It is required for ssh.
	KnownHosts []byte
}

// CredentialsFromSecret reads the keys above from a Secret's data.
func CredentialsFromSecret(data map[string][]byte) *Credentials {
	return &Credentials{
		Username:    string(data[KeyUsername]),
		Password:    string(data[KeyPassword]),
		BearerToken: string(data[KeyBearerToken]),
		CABundle:    data[KeyCA],
		Identity:    data[KeyIdentity],
		KnownHosts:  data[KeyKnownHosts],
	}
}

// String names which kinds of credential are present, without their values.
func (c *Credentials) String() string {
	if c == nil {
		return "no credentials"
	}
	var kinds []string
	if c.Username != "" {
		kinds = append(kinds, "username")
	}
	if c.Password != "" {
		kinds = append(kinds, "password")
	}
	if c.BearerToken != "" {
		kinds = append(kinds, "bearer token")
	}
	if len(c.Identity) > 0 {
		kinds = append(kinds, "ssh identity")
	}
	if len(c.KnownHosts) > 0 {
		kinds = append(kinds, "known_hosts")
	}
	if len(c.CABundle) > 0 {
		kinds = append(kinds, "CA bundle")
	}
	if len(kinds) == 0 {
		return "no credentials"
	}
	return strings.Join(kinds, ", ")
}

// fingerprint identifies the credentials without revealing them.
func (c *Credentials) fingerprint() string {
	if c == nil {
		return ""
	}
	h := sha256.New()
	for _, v := range [][]byte{[]byte(c.Username), []byte(c.Password), []byte(c.BearerToken), c.CABundle, c.Identity, c.KnownHosts} {
		fmt.Fprintf(h, "%d:", len(v))
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// secrets returns the secret values, for scrubbing error messages.
func (c *Credentials) secrets() []string {
	if c == nil {
		return nil
	}
	return []string{c.Password, c.BearerToken, string(c.Identity)}
}

// authMethod turns credentials into go-git's form for the URL's scheme.
func (c *Credentials) authMethod(u *url.URL) (transport.AuthMethod, error) {
	switch u.Scheme {
	case "http", "https":
		if c == nil {
			return nil, nil
		}
		if c.BearerToken != "" {
			if c.Username != "" || c.Password != "" {
				return nil, fmt.Errorf("the Secret has both %q and %q/%q: keep only one way to authenticate", KeyBearerToken, KeyUsername, KeyPassword)
			}
			return &githttp.TokenAuth{Token: c.BearerToken}, nil
		}
		if c.Username == "" && c.Password == "" {
			return nil, nil
		}
		user := c.Username
		if user == "" {
			// Forges accept any user name with a token; "git" is the customary one.
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: c.Password}, nil
	case "ssh":
		if c == nil || len(c.Identity) == 0 {
			return nil, fmt.Errorf("an ssh URL needs a Secret with %q (a private key) and %q", KeyIdentity, KeyKnownHosts)
		}
		if len(c.KnownHosts) == 0 {
			return nil, fmt.Errorf("the Secret has no %q: add the server's host key (ssh-keyscan -p PORT HOST) so that the server can be verified", KeyKnownHosts)
		}
		user := u.User.Username()
		if user == "" {
			user = "git"
		}
		keys, err := gitssh.NewPublicKeys(user, c.Identity, c.Password)
		if err != nil {
			return nil, fmt.Errorf("the %q in the Secret is not a usable private key: %s", KeyIdentity, redact.Secrets(err.Error(), c.secrets()...))
		}
		port := u.Port()
		if port == "" {
			port = "22"
		}
		keys.HostKeyCallback, keys.HostKeyAlgorithms, err = knownHosts(c.KnownHosts, net.JoinHostPort(u.Hostname(), port))
		if err != nil {
			return nil, fmt.Errorf("the %q in the Secret cannot be read: %v", KeyKnownHosts, err)
		}
		return keys, nil
	default:
		return nil, nil
	}
}

// knownHosts parses known_hosts data into a host key check and the key algorithms to offer for
// hostPort (so that the server presents a key that can be checked). The parser only reads files,
// so the data goes through a private temporary file that is removed before returning.
func knownHosts(data []byte, hostPort string) (ssh.HostKeyCallback, []string, error) {
	f, err := os.CreateTemp("", "karpool-known-hosts-*")
	if err != nil {
		return nil, nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := f.Close(); err != nil {
		return nil, nil, err
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return nil, nil, err
	}
	return db.HostKeyCallback(), db.HostKeyAlgorithms(hostPort), nil
}
