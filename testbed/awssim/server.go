package awssim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"k8s.io/client-go/rest"

	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/internal/awstransport"
)

// Defaults of Options.
const (
	DefaultRegion            = "us-east-1"
	DefaultAccountID         = "111122223333"
	DefaultClusterName       = "karpool"
	DefaultKubernetesVersion = "1.36"
	DefaultAccessKeyID       = "AKIAAWSSIMEXAMPLE001"
	DefaultSecretAccessKey   = "awssim/secret/access/key/EXAMPLEKEY0001"
)

// Credential is an access key the simulator accepts.
type Credential struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Options configure a simulator. The zero value is a usable us-east-1 account.
type Options struct {
	// Addr is the listen address; default 127.0.0.1:0 (a free port).
	Addr string
	// Region of the account; default us-east-1. Its embedded catalog must exist
	// (catalog.Regions()).
	Region string
	// AccountID; default 111122223333.
	AccountID string
	// ClusterName is the EKS cluster the account holds and the value of the
	// karpenter.sh/discovery tag on its subnets and security group; default karpool.
	ClusterName string
	// KubernetesVersion of the EKS cluster (major.minor); default 1.36.
	KubernetesVersion string
	// Seed of the simulator's random choices (fault injection, spot pool tie-breaks); default 1.
	Seed uint64
	// Credentials, when set, are the only access keys accepted and every request's SigV4
	// signature is verified (InvalidClientTokenId / SignatureDoesNotMatch otherwise). When empty,
	// any well-formed SigV4 Authorization header is accepted without checking the signature.
	Credentials []Credential
	// Kube, when set, turns node bootstrap on: every running instance gets the Node its kubelet
	// would register (kwok runs it), deleted when the instance terminates.
	Kube *rest.Config
	// ClusterEndpoint and ClusterCA are what EKS DescribeCluster reports; by default the Kube
	// config's host and CA, else a made-up EKS endpoint.
	ClusterEndpoint string
	ClusterCA       []byte
	// Catalog overrides the embedded catalog of Region.
	Catalog *catalog.Catalog
	// Logf receives one line per notable event (launches, terminations, faults, node bootstrap).
	Logf func(format string, args ...any)
	// Clock, when set, is the simulator's time (default time.Now): request times, launches and
	// terminations, reservation start and end dates, message visibility. Tests move it forward
	// to reach a date (a capacity block's end) without waiting. It must not go backwards; the
	// ticker still runs every 100 ms of real time, and SQS long polls wait at most their
	// WaitTimeSeconds of real time.
	Clock func() time.Time
}

// Server is a running simulator.
type Server struct {
	opts     Options
	ln       net.Listener
	httpSrv  *http.Server
	url      string
	catalog  *catalog.Catalog
	services map[string]*service

	mu     sync.Mutex
	rng    *rand.Rand
	faults Faults
	calls  []Call
	st     *state

	// changed is closed and replaced whenever state that long pollers and the node bootstrapper
	// wait for changes.
	changed chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	nodes  *nodeBootstrapper
}

// Start starts a simulator listening on opts.Addr.
func Start(opts Options) (*Server, error) {
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	addr := s.opts.Addr
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("awssim: listen %s: %w", addr, err)
	}
	if err := s.Serve(ln); err != nil {
		ln.Close()
		return nil, err
	}
	return s, nil
}

// New builds a simulator without listening; use Serve, or use the Server as an http.Handler.
func New(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	if opts.ClusterName == "" {
		opts.ClusterName = DefaultClusterName
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = DefaultKubernetesVersion
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	cat := opts.Catalog
	if cat == nil {
		var err error
		cat, err = catalog.Load(opts.Region)
		if err != nil {
			return nil, fmt.Errorf("awssim: region %s: %w (regions with an embedded catalog: %s)", opts.Region, err, strings.Join(catalog.Regions(), ", "))
		}
	}
	if opts.Kube != nil {
		if opts.ClusterEndpoint == "" {
			opts.ClusterEndpoint = opts.Kube.Host
		}
		if len(opts.ClusterCA) == 0 {
			opts.ClusterCA = opts.Kube.CAData
		}
	}
	s := &Server{
		opts:    opts,
		catalog: cat,
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		changed: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.st = newState(s)
	s.services = s.buildServices()
	return s, nil
}

// Serve serves the simulator on ln in the background.
func (s *Server) Serve(ln net.Listener) error {
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.httpSrv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logf("awssim: serve: %v", err)
		}
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.ticker()
	}()
	if s.opts.Kube != nil {
		nb, err := newNodeBootstrapper(s, s.opts.Kube)
		if err != nil {
			s.Close()
			return err
		}
		s.nodes = nb
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			nb.run(s.ctx)
		}()
	}
	s.opts.Logf("awssim: serving account %s region %s cluster %s at %s", s.opts.AccountID, s.opts.Region, s.opts.ClusterName, s.url)
	return nil
}

// Close stops the server, its background loops and any long polls.
func (s *Server) Close() error {
	s.cancel()
	var err error
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.httpSrv.Shutdown(ctx)
		cancel()
		if err != nil {
			err = s.httpSrv.Close()
		}
	}
	s.wg.Wait()
	return err
}

// URL is the simulator's base URL (http://127.0.0.1:PORT): the BaseEndpoint of every client.
func (s *Server) URL() string { return s.url }

// AdminURL is the base URL of the admin API (see admin.go).
func (s *Server) AdminURL() string { return s.url + adminPrefix }

// Region, AccountID and ClusterName are the simulated account's.
func (s *Server) Region() string      { return s.opts.Region }
func (s *Server) AccountID() string   { return s.opts.AccountID }
func (s *Server) ClusterName() string { return s.opts.ClusterName }

// Credential returns the access key clients should use: the first of Options.Credentials, or
// the default example key.
func (s *Server) Credential() Credential {
	if len(s.opts.Credentials) > 0 {
		return s.opts.Credentials[0]
	}
	return Credential{AccessKeyID: DefaultAccessKeyID, SecretAccessKey: DefaultSecretAccessKey}
}

// AWSConfig returns an aws.Config for the real SDK clients: the simulator as BaseEndpoint,
// static credentials and the region. Retries use the SDK's standard retryer.
func (s *Server) AWSConfig() aws.Config {
	c := s.Credential()
	return aws.Config{
		Region:       s.opts.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""),
		BaseEndpoint: aws.String(s.url),
		// A local endpoint answers fast enough to trip the SDK's request-body race (see
		// internal/awstransport), so clients of the simulator get the buffered client.
		HTTPClient: awstransport.New(nil),
	}
}

// Env returns the environment variables that point the standard SDK credential and endpoint
// chain (config.LoadDefaultConfig) at the simulator.
func (s *Server) Env() []string {
	c := s.Credential()
	return []string{
		"AWS_ENDPOINT_URL=" + s.url,
		"AWS_REGION=" + s.opts.Region,
		"AWS_ACCESS_KEY_ID=" + c.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + c.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// notify wakes long polls and the node bootstrapper. Call with s.mu held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ticker advances time-driven state: launches finishing, terminations completing, message
// visibility and retention.
func (s *Server) ticker() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			if s.st.advance(s.now()) {
				s.notify()
			}
			s.mu.Unlock()
		}
	}
}

func (s *Server) logf(format string, args ...any) { s.opts.Logf("awssim: "+format, args...) }

// now is the simulator's time (Options.Clock).
func (s *Server) now() time.Time { return s.opts.Clock() }

// ServeHTTP implements http.Handler: the AWS APIs at /, the admin API under /_awssim/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, adminPrefix) {
		s.serveAdmin(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.serveAPI(w, r, body)
}

const maxBody = 16 << 20
