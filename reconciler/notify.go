package reconciler

import (
	"fmt"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/internal/redact"
)

// ReportingController names karpool in the events it sends to Flux's notification-controller.
const ReportingController = "karpool"

// NewNotifier returns the recorder that posts every PoolSync event to Flux's
// notification-controller at addr (what Flux's controllers take as --events-addr, for example
// http://notification-controller.flux-system.svc.cluster.local./), in Flux's event format with
// its retries, so that an Alert and a Provider forward them to chat or as commit statuses.
// Kubernetes events are recorded separately (Options.EventRecorder).
func NewNotifier(addr string, log logr.Logger) (*events.Recorder, error) {
	if log.GetSink() == nil {
		// Flux's recorder asks the sink whether trace logging is on; logr.Discard() has none.
		log = funcr.New(func(string, string) {}, funcr.Options{})
	}
	n, err := events.NewRecorderForScheme(scheme.Scheme, discard{}, log, addr, ReportingController)
	if err != nil {
		return nil, fmt.Errorf("events address %q: %w", addr, err)
	}
	return n, nil
}

// notify posts the event to Flux with the revision it is about.
func (r *Reconciler) notify(obj *v1alpha1.PoolSync, eventType, reason, format string, args ...any) {
	// PoolSync is cluster-scoped, like the NodePools it applies, but notification-controller
	// matches events to Alerts by namespace: Flux sees PoolSyncs in the controller's namespace.
	ref := *obj
	ref.Namespace = r.opts.SecretNamespace
	var metadata map[string]string
	if rev := revisionOf(obj); rev != "" {
		// Prefixed with the object's API group, as Flux's controllers do: notification-controller
		// strips the prefix, and its commit-status providers read "revision".
		metadata = map[string]string{v1alpha1.GroupVersion.Group + "/" + eventv1.MetaRevisionKey: rev}
	}
	// Flux forwards events to chat and to commit statuses, out of the cluster: whatever an
	// argument quotes, URLs go redacted.
	r.opts.Notifier.AnnotatedEventf(&ref, metadata, eventType, reason, "%s", redact.Text(fmt.Sprintf(format, args...)))
}

// revisionOf is the revision an event is about: the one last attempted, else the one applied.
func revisionOf(obj *v1alpha1.PoolSync) string {
	if obj.Status.LastAttemptedRevision != "" {
		return obj.Status.LastAttemptedRevision
	}
	return obj.Status.LastAppliedRevision
}

// discard is the Kubernetes half of Flux's recorder, unused: the reconciler records Kubernetes
// events on the PoolSync itself, not on the namespaced copy notify sends.
type discard struct{}

var _ record.EventRecorder = discard{}

func (discard) Event(runtime.Object, string, string, string)                                      {}
func (discard) Eventf(runtime.Object, string, string, string, ...any)                             {}
func (discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {}
