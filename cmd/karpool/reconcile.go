package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/reconciler"
)

type reconcileFlags struct {
	once       bool
	kubeconfig string
	poolSync   string
	url        string
	path       string
	branch     string
	tag        string
	semver     string
	commit     string
	secret     string
	namespace  string
	name       string
	timeout    time.Duration
}

func newReconcileCommand() *cobra.Command {
	var f reconcileFlags
	cmd := &cobra.Command{
		Use:   "reconcile --once (--poolsync NAME | --url URL [--path DIR] [--branch B | --tag T | --semver RANGE | --commit SHA])",
		Short: "Run one GitOps reconciliation: fetch, build, validate and apply pools from Git",
		Long: `reconcile runs the PoolSync pipeline once, for CI and debugging: it fetches the repository,
builds the path (kustomize when it holds a kustomization, plain YAML otherwise), validates every
object (Go types, the CUE schema and an API server dry-run) and, only when all are valid, applies
them with server-side apply (field manager "karpool").

With --poolsync it reconciles an existing PoolSync once, exactly as the controller would,
including prune and the status update. With --url it reconciles an ad-hoc source that exists
only for this run: nothing is pruned (there is no stored inventory) and no status is written;
the applied objects are labelled poolsync.karpool.dev/name=<--name>.

The outcome is printed; the exit code is 0 when the revision was applied, 1 when it was not
(invalid manifests are listed as file:line:col), 2 for usage errors. Continuous reconciliation
is what 'karpool controller' does.`,
		Example: `  karpool reconcile --once --kubeconfig ~/.kube/config --url https://github.com/org/pools --path clusters/dev
  karpool reconcile --once --url file://$PWD --branch "$(git branch --show-current)" --path pools
  karpool reconcile --once --poolsync workshop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReconcile(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.once, "once", false, "run one reconciliation and exit (required)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, the in-cluster configuration or ~/.kube/config")
	fl.StringVar(&f.poolSync, "poolsync", "", "reconcile this existing PoolSync")
	fl.StringVar(&f.url, "url", "", "repository to reconcile from: https://, ssh:// or file://")
	fl.StringVar(&f.path, "path", "", "directory inside the repository (default the root)")
	fl.StringVar(&f.branch, "branch", "", "branch to follow (default main)")
	fl.StringVar(&f.tag, "tag", "", "tag to check out")
	fl.StringVar(&f.semver, "semver", "", `check out the highest tag in this semver range, e.g. ">=1.2.0 <2.0.0"`)
	fl.StringVar(&f.commit, "commit", "", "full SHA-1 of the commit to check out")
	fl.StringVar(&f.secret, "secret", "", "Secret with Git credentials, in --namespace (keys as for spec.secretRef)")
	fl.StringVar(&f.namespace, "namespace", reconciler.DefaultSecretNamespace, "the controller's namespace, where credential Secrets are read")
	fl.StringVar(&f.name, "name", "karpool-cli", "owner name the objects are labelled with in --url mode")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "time limit for the whole reconciliation")
	return cmd
}

func (f reconcileFlags) check() error {
	if !f.once {
		return errors.New("--once is required: this command runs a single reconciliation ('karpool controller' runs continuously)")
	}
	if (f.poolSync == "") == (f.url == "") {
		return errors.New("give exactly one of --poolsync NAME and --url URL")
	}
	refs := 0
	for _, s := range []string{f.branch, f.tag, f.semver, f.commit} {
		if s != "" {
			refs++
		}
	}
	if f.poolSync != "" && (refs > 0 || f.path != "" || f.secret != "") {
		return errors.New("--path, --branch, --tag, --semver, --commit and --secret describe an ad-hoc source; with --poolsync they come from the PoolSync")
	}
	if refs > 1 {
		return errors.New("give at most one of --branch, --tag, --semver and --commit")
	}
	if f.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

func runReconcile(cmd *cobra.Command, f reconcileFlags) error {
	if err := f.check(); err != nil {
		return usageError{err}
	}
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return usageError{err}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	out := cmd.OutOrStdout()
	r := reconciler.New(c, reconciler.Options{SecretNamespace: f.namespace, EventRecorder: printRecorder{out}, Jitter: -1})
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	// Errors reach the user through the status and the events printed; the logger stays quiet.
	ctx = ctrl.LoggerInto(ctx, logr.Discard())

	var ps *v1alpha1.PoolSync
	if f.poolSync != "" {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: f.poolSync}}); err != nil {
			return err
		}
		ps = &v1alpha1.PoolSync{}
		if err := c.Get(ctx, types.NamespacedName{Name: f.poolSync}, ps); err != nil {
			return fmt.Errorf("reading PoolSync %s: %w", f.poolSync, err)
		}
	} else {
		ps = &v1alpha1.PoolSync{
			ObjectMeta: metav1.ObjectMeta{Name: f.name},
			Spec: v1alpha1.PoolSyncSpec{
				URL:      f.url,
				Path:     f.path,
				Interval: metav1.Duration{Duration: f.timeout},
				Ref:      &v1alpha1.GitRef{Branch: f.branch, Tag: f.tag, SemVer: f.semver, Commit: f.commit},
			},
		}
		if f.secret != "" {
			ps.Spec.SecretRef = &meta.LocalObjectReference{Name: f.secret}
		}
		// The outcome is in the status, printed below.
		_ = r.ReconcileDetached(ctx, ps)
	}
	return report(out, ps)
}

// report prints the outcome and turns a failure into the command's error.
func report(out io.Writer, ps *v1alpha1.PoolSync) error {
	ready := conditions.Get(ps, meta.ReadyCondition)
	switch {
	case ps.Spec.Suspend:
		fmt.Fprintf(out, "PoolSync %s is suspended; nothing was done\n", ps.Name)
		return nil
	case ready == nil:
		return fmt.Errorf("PoolSync %s has no Ready condition after the reconciliation", ps.Name)
	case ready.Status == metav1.ConditionTrue:
		n := 0
		if ps.Status.Inventory != nil {
			n = len(ps.Status.Inventory.Entries)
		}
		fmt.Fprintf(out, "ready: applied %s (%d object%s)\n", ps.Status.LastAppliedRevision, n, map[bool]string{true: "", false: "s"}[n == 1])
		return nil
	default:
		return fmt.Errorf("%s: %s", ready.Reason, ready.Message)
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		if cfg.QPS == 0 {
			// client-go would otherwise allow 5 requests/s, minutes for a few hundred objects;
			// like controller-runtime, leave fairness to the API server.
			cfg.QPS = -1
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster configuration (give --kubeconfig or set KUBECONFIG): %w", err)
	}
	return cfg, nil
}

// printRecorder prints the reconciler's events that say what was applied, restored or pruned.
// Failure events are left out: the command's error says the same.
type printRecorder struct{ out io.Writer }

func (p printRecorder) Event(_ runtime.Object, eventType, reason, message string) {
	if eventType == corev1.EventTypeWarning && reason != reconciler.DriftCorrectedReason {
		return
	}
	fmt.Fprintf(p.out, "%s: %s\n", reason, message)
}

func (p printRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	p.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (p printRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	p.Eventf(obj, eventType, reason, format, args...)
}
