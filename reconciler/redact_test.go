package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
)

// TestFailedFetchReportsNoURLCredentials: a PoolSync whose spec.url carries a token, in the
// user name, the password or the query, fails to fetch (nothing listens on port 1, or the URL
// does not parse); the conditions, the event and the returned error name the server, not the
// token. No control plane: the fetch fails before the cluster is read.
func TestFailedFetchReportsNoURLCredentials(t *testing.T) {
	const secret = "SECRETTOKEN"
	for _, c := range []struct{ url, reason string }{
		{"https://" + secret + "@127.0.0.1:1/pools.git", GitOperationFailedReason},
		{"https://x-access-token:" + secret + "@127.0.0.1:1/pools.git?access_token=" + secret, GitOperationFailedReason},
		{"https://alice:" + secret + "/raw-slash@127.0.0.1:1/pools.git", InvalidSpecReason},
	} {
		events := record.NewFakeRecorder(4)
		obj := &v1alpha1.PoolSync{Spec: v1alpha1.PoolSyncSpec{URL: c.url, Interval: metav1.Duration{Duration: time.Minute}}}
		obj.Name = "pools"
		err := New(nil, Options{EventRecorder: events}).ReconcileDetached(context.Background(), obj)
		if err == nil || conditions.GetReason(obj, meta.ReadyCondition) != c.reason {
			t.Fatalf("%s: error %v, Ready %+v; want reason %s", c.url, err, conditions.Get(obj, meta.ReadyCondition), c.reason)
		}
		texts := []string{err.Error(), <-events.Events}
		for _, cond := range obj.Status.Conditions {
			texts = append(texts, cond.Message)
		}
		for _, text := range texts {
			if strings.Contains(text, secret) || !strings.Contains(text, "127.0.0.1:1") {
				t.Errorf("%s: %q shows the token or does not name the server", c.url, text)
			}
		}
	}
}

// TestFailRedactsWhatItReports: fail is where every failure becomes the Ready message, the
// event and the logged error; errors other than the fetch's (a build quoting a remote base)
// can quote URLs with credentials too.
func TestFailRedactsWhatItReports(t *testing.T) {
	events := record.NewFakeRecorder(1)
	obj := &v1alpha1.PoolSync{}
	cause := fmt.Errorf("accumulating resources from 'https://ghp_SECRETTOKEN@github.com/acme/base?ref=main': %w", context.DeadlineExceeded)
	_, err := New(nil, Options{EventRecorder: events}).fail(obj, meta.BuildFailedReason, cause)
	want := "accumulating resources from 'https://xxxxx@github.com/acme/base?ref=xxxxx': context deadline exceeded"
	if err.Error() != want || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("returned %v, want %q wrapping the cause", err, want)
	}
	if got := conditions.GetMessage(obj, meta.ReadyCondition); got != want {
		t.Errorf("Ready message %q, want %q", got, want)
	}
	if got := <-events.Events; !strings.HasSuffix(got, want) {
		t.Errorf("event %q, want it to end in %q", got, want)
	}
}
