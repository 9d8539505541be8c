package confined

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
)

// The parent starts the child with these variables and nothing else in its environment.
const (
	childEnv  = "KARPOOL_CONFINED_BUILD"
	memoryEnv = "KARPOOL_CONFINED_MEMORY"
)

// A binary that links this package serves one build and exits when started as a child, before
// its main (or a test binary's TestMain) runs.
func init() {
	if os.Getenv(childEnv) == "1" {
		os.Exit(serve(os.Stdin, os.Stdout))
	}
}

// answer is the child's reply on its standard output.
type answer struct {
	Result *Result
	Err    *Error
}

// serve confines this process, then reads one request, builds it and writes the answer.
func serve(in io.Reader, out io.Writer) int {
	reply := func(a answer) int {
		if err := gob.NewEncoder(out).Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "writing the answer:", err)
			return 1
		}
		return 0
	}
	if err := confineProcess(); err != nil {
		return reply(answer{Err: &Error{Kind: Crashed, Message: "could not confine the build process: " + err.Error()}})
	}
	var req Request
	if err := gob.NewDecoder(in).Decode(&req); err != nil {
		return reply(answer{Err: &Error{Kind: Crashed, Message: "reading the build request: " + err.Error()}})
	}
	g := newMemFS(req.Files, req.Override, req.Limits)
	if req.Root != "" {
		g = newDiskFS(req.Root, req.Override, req.Limits)
	}
	res, berr := run(req, g, remote)
	return reply(answer{Result: res, Err: berr})
}

// confineProcess takes away everything a build must not use, before any input is read.
func confineProcess() error {
	if mem, err := strconv.ParseInt(os.Getenv(memoryEnv), 10, 64); err == nil && mem > 0 {
		if err := limitAddressSpace(mem); err != nil {
			return fmt.Errorf("address-space limit: %w", err)
		}
		// Collect well before the limit, so that an honest build does not die of garbage.
		debug.SetMemoryLimit(mem / 2)
	}
	os.Clearenv()
	http.DefaultTransport = remote.transport()
	return lockdown()
}

// remote records the child's attempts to reach the network; there is one per process.
var remote = &netRecorder{}

// netRecorder is the only way out of a build process: a transport that records every URL
// asked for, over a dialer that refuses every address and records it. kustomize fetches remote
// files with an http.Client on the default transport, which the child replaces with this one,
// without proxies (so none from the environment either).
type netRecorder struct {
	mu    sync.Mutex
	urls  []string
	dials []string
}

var errNoNetwork = errors.New("a karpool build opens no connection")

func (n *netRecorder) transport() http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		n.mu.Lock()
		n.urls = append(n.urls, r.URL.String())
		n.mu.Unlock()
		return (&http.Transport{Proxy: nil, DialContext: n.dial, DialTLSContext: n.dial}).RoundTrip(r)
	})
}

func (n *netRecorder) dial(_ context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dials = append(n.dials, network+" "+addr)
	n.mu.Unlock()
	return nil, errNoNetwork
}

// record returns the URLs asked for and the addresses dialled so far.
func (n *netRecorder) record() (urls, dials []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.urls...), append([]string(nil), n.dials...)
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// run builds the kustomization of req.Dir in this process, reading through g. The caller has
// confined the process (or, in tests, records what it would have done).
func run(req Request, g *guardFS, nr *netRecorder) (*Result, *Error) {
	dir := path.Join(g.root, req.Dir)
	if g.onDisk {
		dir = filepath.Join(g.root, filepath.FromSlash(req.Dir))
	}
	urls, dials := nr.record()
	access := func(exec bool) Access {
		u, d := nr.record()
		return Access{Paths: g.inner.seen(), URLs: u[len(urls):], Dials: d[len(dials):], Exec: exec}
	}
	resMap, err := kustomize(g, dir)
	if err != nil {
		e := classify(err, g, nr, len(urls))
		e.Reads, _ = g.record()
		e.Access = access(e.Kind == Remote && e.Ref == "")
		return nil, e
	}
	res, e := collect(resMap, req.Limits)
	if e != nil {
		e.Access = access(false)
		return nil, e
	}
	res.Reads, _ = g.record()
	res.Access = access(false)
	return res, nil
}

// kustomize runs krusty on dir, a panic included in the error.
func kustomize(g *guardFS, dir string) (m resmap.ResMap, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("kustomize build failed unexpectedly (panic: %v)", r)
		}
	}()
	opts := krusty.MakeDefaultOptions()
	// g holds the repository and nothing else, so "no restriction" confines loads to the
	// repository's root while a base may share files with its overlays, as Flux does.
	opts.LoadRestrictions = types.LoadRestrictionsNone
	opts.PluginConfig = types.DisabledPluginConfig()
	return krusty.MakeKustomizer(opts).Run(g, dir)
}

// collect converts the built resources, within the caps.
func collect(m resmap.ResMap, l Limits) (*Result, *Error) {
	res := &Result{}
	size := int64(0)
	for _, r := range m.Resources() {
		if len(res.Objects) == l.Objects {
			return nil, &Error{Kind: Limit, Message: fmt.Sprintf("the build produces more than %d objects", l.Objects)}
		}
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, &Error{Kind: Failed, Message: fmt.Sprintf("converting %s: %v", r.CurId(), err)}
		}
		if size += int64(len(js)); size > l.OutputBytes {
			return nil, &Error{Kind: Limit, Message: fmt.Sprintf("the built objects take more than %s", Size(l.OutputBytes))}
		}
		o := Object{JSON: js}
		if origin, err := r.GetOrigin(); err == nil && origin != nil {
			o.OriginPath, o.ConfiguredIn = origin.Path, origin.ConfiguredIn
		}
		res.Objects = append(res.Objects, o)
	}
	return res, nil
}

// classify says why kustomize failed. A cap or confinement the file system enforced comes
// first (kustomize's message would only say a file could not be read), then a refused fetch
// (the first URL asked for since the build began), then kustomize's own message. A remote base
// fails at kustomize's lookup of the git program, since the child has no PATH, or at the start
// of the program, which the kernel refuses on Linux.
func classify(err error, g *guardFS, nr *netRecorder, urlsBefore int) *Error {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	g.mu.Lock()
	fault := g.fault
	g.mu.Unlock()
	urls, _ := nr.record()
	switch {
	case fault != nil:
		e := *fault
		return &e
	case len(urls) > urlsBefore:
		return &Error{Kind: Remote, Ref: urls[urlsBefore], Message: "kustomize tried to fetch a remote file: " + msg}
	case strings.Contains(msg, "no 'git' program on path") || strings.Contains(msg, "fork/exec"):
		return &Error{Kind: Remote, Message: "kustomize tried to fetch a remote base: " + msg}
	}
	return &Error{Kind: Failed, Message: msg}
}
