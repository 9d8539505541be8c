package awssim

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/aws/smithy-go/logging"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// sigV4 is a parsed Authorization header:
// AWS4-HMAC-SHA256 Credential=AKID/20261105/us-east-1/ec2/aws4_request, SignedHeaders=..., Signature=...
type sigV4 struct {
	accessKey     string
	date          string
	region        string
	service       string
	signedHeaders []string
	signature     string
}

type authProblem struct{ kind string }

func (a *authProblem) Error() string { return a.kind }

func parseAuthorization(r *http.Request) (*sigV4, *authProblem) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, &authProblem{"missing"}
	}
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return nil, &authProblem{"malformed"}
	}
	a := &sigV4{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, &authProblem{"malformed"}
		}
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" || f[0] == "" {
				return nil, &authProblem{"malformed"}
			}
			a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.accessKey == "" || a.signature == "" || len(a.signedHeaders) == 0 || r.Header.Get("X-Amz-Date") == "" {
		return nil, &authProblem{"malformed"}
	}
	return a, nil
}

// authError is the rejection AWS sends for an unauthenticated request, in the protocol's shape.
func authError(p protocol, kind, msg string) *apiError {
	switch kind {
	case "missing", "malformed":
		switch p {
		case protoEC2Query:
			return apiErr(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
		case protoQuery:
			return apiErr(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
		default:
			return apiErr(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
		}
	case "unknown-key":
		switch p {
		case protoEC2Query:
			return apiErr(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
		case protoQuery:
			return apiErr(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
		default:
			return apiErr(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
		}
	default: // signature, scope
		if msg == "" {
			msg = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
		}
		switch p {
		case protoEC2Query:
			return apiErr(401, "AuthFailure", "%s", msg)
		case protoQuery:
			return apiErr(403, "SignatureDoesNotMatch", "%s", msg)
		default:
			return apiErr(403, "InvalidSignatureException", "%s", msg)
		}
	}
}

// checkSignature enforces the credential scope's region and, when Options.Credentials is set,
// the access key and the signature itself (recomputed with the SDK's own SigV4 signer).
func (s *Server) checkSignature(r *http.Request, body []byte, a *sigV4, sv *service) *apiError {
	if sv.regional && a.region != s.opts.Region {
		return authError(sv.proto, "scope", "Credential should be scoped to a valid region, not '"+a.region+"'.")
	}
	if len(s.opts.Credentials) == 0 {
		return nil
	}
	var secret string
	found := false
	for _, c := range s.opts.Credentials {
		if c.AccessKeyID == a.accessKey {
			secret, found = c.SecretAccessKey, true
		}
	}
	if !found {
		return authError(sv.proto, "unknown-key", "")
	}
	signingTime, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return authError(sv.proto, "signature", "")
	}
	u := *r.URL
	u.Scheme = "http"
	u.Host = r.Host
	clone, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return authError(sv.proto, "signature", "")
	}
	clone.URL.RawPath = r.URL.RawPath
	clone.URL.Path = r.URL.Path
	clone.Host = r.Host
	if contains(a.signedHeaders, "content-length") {
		clone.ContentLength = int64(len(body))
	}
	for _, h := range a.signedHeaders {
		if h == "host" {
			continue
		}
		for _, v := range r.Header.Values(h) {
			clone.Header.Add(h, v)
		}
	}
	clone.Header.Del("Authorization")
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		sum := sha256.Sum256(body)
		payloadHash = hex.EncodeToString(sum[:])
	}
	creds := aws.Credentials{AccessKeyID: a.accessKey, SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	signer := v4.NewSigner(func(o *v4.SignerOptions) {
		if os.Getenv("AWSSIM_DEBUG_SIGV4") != "" {
			o.LogSigning = true
			o.Logger = debugLogger{s}
		}
	})
	if err := signer.SignHTTP(r.Context(), creds, clone, payloadHash, a.service, a.region, signingTime); err != nil {
		return authError(sv.proto, "signature", "")
	}
	got, perr := parseAuthorization(clone)
	if os.Getenv("AWSSIM_DEBUG_SIGV4") != "" && got != nil {
		s.logf("sigv4: client signed %v %s, recomputed %v %s", a.signedHeaders, a.signature, got.signedHeaders, got.signature)
	}
	if perr != nil || got.signature != a.signature {
		return authError(sv.proto, "signature", "")
	}
	return nil
}

type debugLogger struct{ s *Server }

func (d debugLogger) Logf(_ logging.Classification, format string, v ...interface{}) {
	d.s.logf(format, v...)
}
