package reconciler

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-logr/logr"
)

// Flux's notification-controller receives the PoolSync's events in its format: the PoolSync in
// the controller's namespace (Alerts match by namespace), the severity, and the revision under
// karpool.dev/revision, which its commit-status providers read once the group is stripped.
func TestEventsAreSentToFlux(t *testing.T) {
	received := make(chan eventv1.Event, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e eventv1.Event
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s with content type %q, want a JSON POST", r.Method, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			t.Errorf("event body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		received <- e
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	notifier, err := NewNotifier(srv.URL, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	h := startController(t, func(o *Options) { o.Notifier = notifier })
	repo, _, good := workshopRepo(t)
	name := "flux-events"
	h.poolSync(name, repo.FileURL(), "clusters/dev")
	h.waitApplied(name, good)

	e := waitFluxEvent(t, received, meta.ReconciliationSucceededReason)
	obj := e.InvolvedObject
	if obj.Kind != "PoolSync" || obj.APIVersion != "karpool.dev/v1alpha1" || obj.Name != name || obj.Namespace != secretNamespace {
		t.Errorf("involved object %s %s %s/%s, want PoolSync karpool.dev/v1alpha1 %s/%s", obj.Kind, obj.APIVersion, obj.Namespace, obj.Name, secretNamespace, name)
	}
	if e.Severity != eventv1.EventSeverityInfo || e.ReportingController != ReportingController {
		t.Errorf("severity %q from %q, want info from %q", e.Severity, e.ReportingController, ReportingController)
	}
	if got := e.Metadata["karpool.dev/revision"]; got != "main@sha1:"+good {
		t.Errorf("revision metadata %q, want main@sha1:%s (all metadata: %v)", got, good, e.Metadata)
	}
	if !strings.Contains(e.Message, "Applied revision main@sha1:"+good) {
		t.Errorf("message %q", e.Message)
	}

	// A failure is an error-severity event about the revision that failed.
	nodepool := "clusters/dev/nodepool.yaml"
	repo.Write(nodepool, strings.Replace(readFile(t, repo, nodepool), "operator: In", "operator: Inn", 1))
	bad := repo.Commit("bad operator")
	h.waitFailed(name, ValidationFailedReason)
	e = waitFluxEvent(t, received, ValidationFailedReason)
	if e.Severity != eventv1.EventSeverityError || e.Metadata["karpool.dev/revision"] != "main@sha1:"+bad {
		t.Errorf("failure event: severity %q, metadata %v; want error about main@sha1:%s", e.Severity, e.Metadata, bad)
	}
	if !strings.Contains(e.Message, "nodepool.yaml:") {
		t.Errorf("failure message does not locate the error: %q", e.Message)
	}
}

// waitFluxEvent returns the first event received with the reason, within a minute.
func waitFluxEvent(t *testing.T, received <-chan eventv1.Event, reason string) eventv1.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	var seen []string
	for {
		select {
		case e := <-received:
			if e.Reason == reason {
				return e
			}
			seen = append(seen, e.Reason)
		case <-deadline:
			t.Fatalf("no %s event sent to Flux within a minute; received %v", reason, seen)
		}
	}
}
