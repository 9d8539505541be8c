// Package awstransport holds the HTTP client karpool gives the AWS SDK.
//
// The SDK (smithy-go) closes a request's body as soon as the response headers arrive, while
// net/http's writer may still be reading that body to check its end. When the server answers
// faster than that check (a local endpoint, the simulator), net/http sees io.EOF from the closed
// body, treats the request write as failed and closes the connection under the response body
// being read: "use of closed network connection". The retryer then sends again a call the
// server already carried out, and not every AWS call is idempotent (IAM creates are not).
// Upstream: aws/aws-sdk-go-v2 #1825 and #2737 (retried, not fixed). testbed/awssim's
// TestSDKRequestBodyCloseRace reproduces it deterministically and checks this client.
package awstransport

import (
	"bytes"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// BufferedBodies hands net/http its own in-memory copy of every request body, which the SDK
// cannot close under it. AWS request bodies are small (query strings, JSON documents).
type BufferedBodies struct{ next aws.HTTPClient }

// New wraps next; nil means the SDK's default client.
func New(next aws.HTTPClient) BufferedBodies {
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	return BufferedBodies{next: next}
}

// Do implements aws.HTTPClient.
func (c BufferedBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close() // the SDK's own body; the copy replaces it
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return c.next.Do(r)
}
