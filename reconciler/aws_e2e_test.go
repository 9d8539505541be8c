package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpool/karpool/api/karpool/v1alpha1"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/gittest"
)

// startAWS runs the AWS simulator, holding cluster "demo", for the controller's spec.aws.
func startAWS(t *testing.T) (*awssim.Server, func(*Options)) {
	srv, err := awssim.Start(awssim.Options{ClusterName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, func(o *Options) {
		o.AWSConfig = func(_ context.Context, region string) (aws.Config, error) {
			cfg := srv.AWSConfig()
			cfg.Region = region
			return cfg, nil
		}
	}
}

// mutations are the account-changing calls the simulator answered since call number from.
func mutations(srv *awssim.Server, from int) []string {
	var out []string
	for _, c := range srv.Calls()[from:] {
		if c.Mutating() {
			out = append(out, c.Service+":"+c.Action)
		}
	}
	return out
}

// awsReady describes the AWSReady condition and status.aws.
func awsReady(ps *v1alpha1.PoolSync) string {
	c := conditions.Get(ps, v1alpha1.AWSReadyCondition)
	if c == nil {
		return "no AWSReady condition; " + describe(ps)
	}
	return fmt.Sprintf("AWSReady=%s %s: %s; status.aws %+v", c.Status, c.Reason, c.Message, ps.Status.AWS)
}

// spec.aws in plan mode reports what apply would do and changes nothing; switched to apply it
// makes exactly those changes, once; an account it cannot read in apply mode stops the revision
// from being applied.
func TestAWSResourcesArePlannedThenApplied(t *testing.T) {
	srv, withAWS := startAWS(t)
	h := startController(t, withAWS)
	repo, _, commit := workshopRepo(t)
	name := "aws"
	h.poolSync(name, repo.FileURL(), "clusters/dev", func(ps *v1alpha1.PoolSync) {
		ps.Spec.AWS = &v1alpha1.AWSSpec{Region: srv.Region(), ClusterName: "demo", Mode: v1alpha1.AWSModePlan}
	})

	// Plan: the pools are applied (Ready), the account is not (AWSReady=False, the changes listed).
	h.waitApplied(name, commit)
	var plan []string
	h.waitFor(30*time.Second, "the AWS plan", func() (bool, string) {
		ps := h.get(name)
		plan = nil
		if ps.Status.AWS != nil {
			plan = ps.Status.AWS.Changes
		}
		return conditions.GetReason(ps, v1alpha1.AWSReadyCondition) == AWSChangesPendingReason && ps.Status.AWS.Revision == "main@sha1:"+commit, awsReady(ps)
	})
	for _, want := range []string{"+ IAM role KarpenterNodeRole-demo", "+ IAM role demo-karpenter", "+ SQS queue demo", "+ EventBridge rule karpool-demo-spot-interruption"} {
		if !slices.Contains(plan, want) {
			t.Errorf("status.aws.changes lacks %q: %q", want, plan)
		}
	}
	if m := mutations(srv, 0); len(m) != 0 {
		t.Fatalf("plan mode changed the account: %v", m)
	}
	h.waitEvent(name, AWSChangesPendingReason, "to create")

	// Apply: the same changes are made, then the account is up to date and left alone.
	ps := h.get(name)
	ps.Spec.AWS.Mode = v1alpha1.AWSModeApply
	if err := h.c.Update(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(name, AWSAppliedReason, "to create")
	if _, err := iam.NewFromConfig(srv.AWSConfig()).GetRole(context.Background(), &iam.GetRoleInput{RoleName: aws.String("KarpenterNodeRole-demo")}); err != nil {
		t.Fatalf("the node role was not created: %v", err)
	}
	applied := h.events(name, AWSAppliedReason)
	h.waitFor(30*time.Second, "the account to be up to date", func() (bool, string) {
		ps := h.get(name)
		return conditions.IsTrue(ps, v1alpha1.AWSReadyCondition) && conditions.GetReason(ps, v1alpha1.AWSReadyCondition) == AWSUpToDateReason, awsReady(ps)
	})
	settled := len(srv.Calls())
	// Two more reconciliations (every second; each asks STS who it is): neither changes anything.
	h.waitFor(30*time.Second, "two more reconciliations", func() (bool, string) {
		n := 0
		for _, c := range srv.Calls()[settled:] {
			if c.Action == "GetCallerIdentity" {
				n++
			}
		}
		return n >= 2, fmt.Sprintf("%d reconciliations since", n)
	})
	if m := mutations(srv, settled); len(m) != 0 {
		t.Errorf("an up-to-date account was changed again: %v", m)
	}
	if applied = h.events(name, AWSAppliedReason); len(applied) != 1 {
		t.Errorf("want one %s event, got %q", AWSAppliedReason, applied)
	}

	// A second PoolSync for the same cluster is refused: the first by name keeps the resources.
	other := gittest.NewRepo(t, t.TempDir(), "other.git")
	other.Write("cm/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: aws-other, namespace: default}\ndata: {a: b}\n")
	otherCommit := other.Commit("a ConfigMap")
	h.poolSync("awt", other.FileURL(), "cm", func(ps *v1alpha1.PoolSync) {
		ps.Spec.AWS = &v1alpha1.AWSSpec{Region: srv.Region(), ClusterName: "demo"}
	})
	h.waitApplied("awt", otherCommit)
	h.waitFor(30*time.Second, "the second PoolSync's AWS plan refused", func() (bool, string) {
		ps := h.get("awt")
		return conditions.GetReason(ps, v1alpha1.AWSReadyCondition) == AWSFailedReason &&
			strings.Contains(conditions.GetMessage(ps, v1alpha1.AWSReadyCondition), "PoolSync aws already manages the AWS resources of cluster demo"), awsReady(ps)
	})
	// Two more reconciliations, asked for the Flux way: the same failure is not reported again.
	for _, at := range []string{"first", "second"} {
		ps := h.get("awt")
		patch := client.MergeFrom(ps.DeepCopy())
		ps.Annotations = map[string]string{meta.ReconcileRequestAnnotation: at}
		if err := h.c.Patch(context.Background(), ps, patch); err != nil {
			t.Fatal(err)
		}
		h.waitFor(30*time.Second, "the reconciliation requested "+at, func() (bool, string) {
			ps := h.get("awt")
			return ps.Status.LastHandledReconcileAt == at, describe(ps)
		})
	}
	// The recorder folds repeats into one Event and counts them.
	var list corev1.EventList
	if err := h.c.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	sent := int32(0)
	for _, e := range list.Items {
		if e.InvolvedObject.Name == "awt" && e.Reason == AWSFailedReason {
			sent += max(e.Count, 1)
		}
	}
	if sent != 1 {
		t.Errorf("%s sent %d times for a plan that keeps failing the same way; want once", AWSFailedReason, sent)
	}
	h.cleanup("awt")

	// An account that cannot be read in apply mode fails the reconciliation before the pools.
	h.cleanup(name)
	repo2, _, commit2 := workshopRepo(t)
	h.poolSync("aws-elsewhere", repo2.FileURL(), "clusters/dev", func(ps *v1alpha1.PoolSync) {
		ps.Spec.AWS = &v1alpha1.AWSSpec{Region: srv.Region(), ClusterName: "elsewhere", Mode: v1alpha1.AWSModeApply}
	})
	failed := h.waitFailed("aws-elsewhere", AWSFailedReason)
	if msg := conditions.GetMessage(failed, meta.ReadyCondition); !strings.Contains(msg, "cluster elsewhere") || !strings.Contains(msg, commit2) {
		t.Errorf("Ready message %q: want the cluster and the revision named", msg)
	}
	if _, err := h.nodePool("default"); !apierrors.IsNotFound(err) {
		t.Errorf("the pools were applied although the AWS apply failed: %v", err)
	}
}
