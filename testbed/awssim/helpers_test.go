package awssim_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
	"github.com/karpool/karpool/testbed/must"
)

func TestMain(m *testing.M) { localenvtest.Main(m) }

// newSim starts a simulator for one test and returns it with an aws.Config for the real clients.
func newSim(t *testing.T, opts awssim.Options) (*awssim.Server, aws.Config) {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	srv, err := awssim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the simulator: %v", err)
		}
	})
	return srv, srv.AWSConfig()
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// errorCode returns the AWS error code of err ("" when it is not an API error).
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got success", code)
	}
	if got := errorCode(err); got != code {
		t.Fatalf("want error %s, got %q (%v)", code, got, err)
	}
}

// try(c.Op(ctx, in)).OK(t) is the call's value, or the test stops.
func try[T any](v T, err error) must.Result[T] { return must.Of(v, err) }

func b64(s string) *string { return aws.String(base64.StdEncoding.EncodeToString([]byte(s))) }

// al2023UserData is the MIME multipart user data Karpenter writes for AL2023: a nodeadm
// NodeConfig with the pool's labels as a kubelet flag and its taints in the kubelet config.
const al2023UserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    apiServerEndpoint: https://example.gr7.us-east-1.eks.amazonaws.com
    certificateAuthority: Y2E=
    cidr: 10.96.0.0/24
    name: karpool
  kubelet:
    config:
      clusterDNS:
      - 10.96.0.10
      registerWithTaints:
      - key: example.com/dedicated
        value: batch
        effect: NoSchedule
    flags:
    - --node-labels="karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=default,team=blue"

--//--
`

// eventually polls cond every 20ms until it holds, failing the test with what after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
