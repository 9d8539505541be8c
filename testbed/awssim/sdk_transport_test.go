package awssim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/karpool/karpool/internal/awstransport"
	"github.com/karpool/karpool/testbed/awssim"
)

// The "use of closed network connection" failures seen against the simulator (a 200 response
// whose body cannot be read) come from the SDK client, not from the simulator:
//
//  1. smithy-go wraps the request body in a safeReadCloser, which net/http does not know as an
//     in-memory reader, so the transport's write goroutine flushes the headers first and then
//     writes the body straight to the socket. The request is complete on the wire while that
//     goroutine still has to read the body once more (checking for bytes beyond Content-Length)
//     and close it.
//  2. A local server answers within microseconds; the transport hands the response over and
//     smithy-go's ClientHandler closes the request body as soon as http.Client.Do returns.
//  3. If the write goroutine has not finished step 1 by then, its extra read hits the closed
//     safeReadCloser, whose WriteTo returns io.EOF. net/http takes that as a failed request
//     write and closes the connection under the response body the SDK is about to read.
//
// Against AWS the response arrives at least a network round trip later, so step 1 is long
// finished; against a local endpoint it is a scheduling race (6 of 60 runs of
// TestErrorAndLatencyFaults without retries on 2 cores, about 100 calls each). With retries the
// SDK logs "failed to discard remaining HTTP response body ... use of closed network connection"
// while closing the broken response and sends the call again, although the server has executed
// it. Upstream: aws/aws-sdk-go-v2#1825 and #2737, closed by making the standard retryer retry
// "use of closed network connection" (aws/aws-sdk-go-v2#2949).
//
// TestSDKRequestBodyCloseRace forces the interleaving of step 3 deterministically and checks
// both the failure with the SDK's own HTTP client and that a client handing net/http an in-memory
// copy of the body (awstransport.BufferedBodies) is immune. When the first subtest starts failing, the
// SDK no longer closes the body under the transport and awstransport can go.
func TestSDKRequestBodyCloseRace(t *testing.T) {
	t.Run("sdk client", func(t *testing.T) {
		r := forceBodyCloseRace(t, func(c aws.HTTPClient) aws.HTTPClient { return c })
		if !errors.Is(r.writeErr, io.EOF) {
			t.Errorf("request write: got %v, want io.EOF from the body the SDK closed", r.writeErr)
		}
		if !errors.Is(r.callErr, net.ErrClosed) {
			t.Errorf("call: got %v, want the response body read to fail with %v", r.callErr, net.ErrClosed)
		}
		// The warning of the controller's log: closing the broken response after the failed decode.
		if !slices.ContainsFunc(r.warnings, func(w string) bool {
			return strings.Contains(w, "failed to discard remaining HTTP response body") && strings.Contains(w, "use of closed network connection")
		}) {
			t.Errorf("SDK warnings %q, want the failed discard on the closed connection", r.warnings)
		}
	})
	t.Run("in-memory request body", func(t *testing.T) {
		r := forceBodyCloseRace(t, func(c aws.HTTPClient) aws.HTTPClient { return awstransport.New(c) })
		if r.writeErr != nil || r.callErr != nil || len(r.warnings) > 0 {
			t.Errorf("request write error %v, call error %v, SDK warnings %q; want none", r.writeErr, r.callErr, r.warnings)
		}
	})
}

type raceResult struct {
	writeErr error    // what the transport reported for writing the request
	callErr  error    // the call's error
	warnings []string // what the SDK logged
}

// forceBodyCloseRace makes one DescribeInstanceTypes call (a response larger than the
// transport's 4 KiB read buffer, so the SDK reads part of it from the connection) without
// retries, holding the transport's write goroutine right after the request's last byte went
// out until the SDK's HTTP handler has returned.
func forceBodyCloseRace(t *testing.T, wrap func(aws.HTTPClient) aws.HTTPClient) raceResult {
	var r raceResult
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	g := &writeGate{release: make(chan struct{}), closed: make(chan struct{})}
	t.Cleanup(g.open) // never leave the transport's writer blocked
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	var logMu sync.Mutex
	cfg.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if c == logging.Warn {
			r.warnings = append(r.warnings, fmt.Sprintf(format, v...))
		}
	})
	cfg.HTTPClient = wrap(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &gatedConn{Conn: c, g: g}, nil
		}
	}))
	c := ec2.NewFromConfig(cfg)
	// A first call opens the connection the raced call reuses.
	try(c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})).OK(t)

	wrote := make(chan error, 1)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) { wrote <- i.Err }})
	// Innermost in the deserialize step: runs after the SDK's HTTP handler returned (and closed
	// the request body), before the operation's deserializer reads the response body.
	afterSend := middleware.DeserializeMiddlewareFunc("forceBodyCloseRace", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		g.open()
		select {
		case r.writeErr = <-wrote:
		case <-ctx.Done():
			t.Fatal("the transport never finished writing the request")
		}
		if r.writeErr != nil {
			// A failed write closes the connection; wait for it so the outcome does not depend on
			// scheduling.
			select {
			case <-g.closed:
			case <-ctx.Done():
				t.Fatalf("request write failed (%v) but the connection stayed open", r.writeErr)
			}
		}
		return out, md, err
	})
	g.arm()
	_, r.callErr = c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{}, func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error { return s.Deserialize.Add(afterSend, middleware.After) })
	})
	if !g.wasHeld() {
		t.Fatal("no write completed the request: the interleaving was not forced")
	}
	logMu.Lock()
	defer logMu.Unlock()
	return r
}

// writeGate holds the write that completes the next request once armed.
type writeGate struct {
	mu      sync.Mutex
	armed   bool
	held    bool   // a write was held
	sent    []byte // what was written of the request so far
	release chan struct{}
	opened  sync.Once
	closed  chan struct{} // closed when the connection is
	once    sync.Once
}

func (g *writeGate) wasHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// open lets the held write return.
func (g *writeGate) open() { g.opened.Do(func() { close(g.release) }) }

func (g *writeGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.sent = true, nil
}

var contentLength = regexp.MustCompile(`(?i)\r\ncontent-length: *(\d+)\r\n`)

// completes records b and reports whether it was the last piece of the armed request.
func (g *writeGate) completes(b []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		return false
	}
	g.sent = append(g.sent, b...)
	head, _, ok := bytes.Cut(g.sent, []byte("\r\n\r\n"))
	if !ok {
		return false
	}
	n := 0
	if m := contentLength.FindSubmatch(append(head, "\r\n"...)); m != nil {
		n, _ = strconv.Atoi(string(m[1]))
	}
	if len(g.sent) < len(head)+4+n {
		return false
	}
	g.armed, g.held = false, true
	return true
}

type gatedConn struct {
	net.Conn
	g *writeGate
}

// Write holds the write that completes the armed request until the gate opens, after its bytes
// went out. It is recognised before writing so that the server cannot answer first.
func (c *gatedConn) Write(b []byte) (int, error) {
	last := c.g.completes(b)
	n, err := c.Conn.Write(b)
	if last {
		<-c.g.release
	}
	return n, err
}

func (c *gatedConn) Close() error {
	c.g.once.Do(func() { close(c.g.closed) })
	return c.Conn.Close()
}
