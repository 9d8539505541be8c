package disruption

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
	b "github.com/karpool/karpool/testbed/builders"
	"github.com/karpool/karpool/testbed/fakecloud"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// replacer is a Simulator whose replacements are NodeClaims r1, r2, … created in the client.
type replacer struct{ c client.Client }

func (r replacer) Pools(context.Context, *state.Cluster) ([]scheduling.Pool, map[string]string) {
	return nil, nil
}

func (r replacer) SimulateWithout(*state.Cluster, []scheduling.Pool, map[string]bool) *scheduling.Result {
	return &scheduling.Result{}
}

func (r replacer) SimulateConsolidation(*state.Cluster, []scheduling.Pool, map[string]bool, time.Time) *scheduling.Result {
	return &scheduling.Result{}
}

func (r replacer) Replace(ctx context.Context, planned []scheduling.NodeClaim, _ []scheduling.Pool, _ string) ([]string, error) {
	var names []string
	for i := range planned {
		nc := b.NodeClaim("r"+string(rune('1'+i)), b.CreatedAt(t0), b.WithFinalizer())
		if err := r.c.Create(ctx, nc); err != nil {
			return names, err
		}
		names = append(names, nc.Name)
	}
	return names, nil
}

// replacing starts a command that replaces node "old" by one new NodeClaim, r1: "old" is
// tainted and r1 created. It returns the controller, the client and the recorder.
func replacing(t *testing.T) (*Controller, client.Client, *record.FakeRecorder) {
	t.Helper()
	old := b.NodeClaim("old", b.CreatedAt(t0), b.Launched("fake:///zone-a/i-old", t0), b.Initialized(t0), b.WithFinalizer())
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithStatusSubresource(&karpv1.NodeClaim{}).
		WithObjects(old, b.Node("old", "fake:///zone-a/i-old", b.Ready()), b.NodePool("default")).Build()
	rec := record.NewFakeRecorder(20)
	ctl := New(c, Options{Simulator: replacer{c}, Recorder: rec})
	snap := take(t, c)
	cmd := &Command{Candidates: []Candidate{{NodeClaim: snap.NodeClaims[0], Node: snap.Nodes[0], Pool: snap.NodePools[0]}},
		Replacements: []scheduling.NodeClaim{{}}, Reason: karpv1.DisruptionReasonUnderutilized, Method: "single"}
	if err := ctl.execute(t.Context(), cmd, nil, t0); err != nil {
		t.Fatal(err)
	}
	if !hasDisruptedTaint(node(t, c, "old")) {
		t.Fatal("candidate not tainted before its replacement launched")
	}
	return ctl, c, rec
}

func take(t *testing.T, c client.Client) *state.Cluster {
	t.Helper()
	snap, err := state.Take(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func node(t *testing.T, c client.Client, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// claimIn returns the stored NodeClaim, nil once it is gone.
func claimIn(t *testing.T, c client.Client, name string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return nc
}

// setCondition writes a condition of the stored NodeClaim.
func setCondition(t *testing.T, c client.Client, name, cond string, status metav1.ConditionStatus) {
	t.Helper()
	nc := claimIn(t, c, name)
	nc.SetCondition(cond, status, "Test", "test", metav1.NewTime(t0))
	if err := c.Status().Update(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
}

// Once every replacement is initialized the candidates' NodeClaims are deleted, and the
// replacements are protected from emptiness while the pods move onto them.
func TestReplacementsInitializedDeleteTheCandidates(t *testing.T) {
	ctl, c, _ := replacing(t)
	if err := ctl.advance(t.Context(), take(t, c), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if claimIn(t, c, "old").DeletionTimestamp != nil {
		t.Fatal("candidate deleted before its replacement was initialized")
	}
	setCondition(t, c, "r1", karpv1.ConditionTypeInitialized, metav1.ConditionTrue)
	if err := ctl.advance(t.Context(), take(t, c), t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if claimIn(t, c, "old").DeletionTimestamp == nil || ctl.cons.running != nil {
		t.Error("candidate kept, or the command still running, after its replacement was initialized")
	}
	if _, ok := ctl.tracker.protected["r1"]; !ok {
		t.Error("replacement not protected while the pods move")
	}
}

// A replacement that fails to launch rolls the command back: the candidate is untainted and
// stays, the replacement is deleted.
func TestReplacementThatFailsToLaunchRollsBack(t *testing.T) {
	ctl, c, rec := replacing(t)
	setCondition(t, c, "r1", karpv1.ConditionTypeLaunched, metav1.ConditionFalse)
	if err := ctl.advance(t.Context(), take(t, c), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	assertRolledBack(t, ctl, c, rec, "failed to launch")
}

// Replacements that are not initialized within replacementTimeout roll the command back.
func TestLateReplacementsRollBack(t *testing.T) {
	ctl, c, rec := replacing(t)
	if err := ctl.advance(t.Context(), take(t, c), t0.Add(replacementTimeout)); err != nil {
		t.Fatal(err)
	}
	if ctl.cons.running == nil {
		t.Fatal("rolled back at the timeout, not after it")
	}
	if err := ctl.advance(t.Context(), take(t, c), t0.Add(replacementTimeout+time.Second)); err != nil {
		t.Fatal(err)
	}
	assertRolledBack(t, ctl, c, rec, "not initialized within")
}

func assertRolledBack(t *testing.T, ctl *Controller, c client.Client, rec *record.FakeRecorder, why string) {
	t.Helper()
	if ctl.cons.running != nil {
		t.Error("command still running")
	}
	if hasDisruptedTaint(node(t, c, "old")) || claimIn(t, c, "old").DeletionTimestamp != nil {
		t.Error("candidate still tainted, or deleted")
	}
	if r1 := claimIn(t, c, "r1"); r1 != nil && r1.DeletionTimestamp == nil {
		t.Error("replacement kept")
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	if !strings.Contains(strings.Join(events, "\n"), why) {
		t.Errorf("events %v, want one saying %q", events, why)
	}
}

// Drift the cloud reports (an instance's AMI is not one its class selects) makes the NodeClaim
// drifted; a failed check is not taken as an answer and is asked again next pass.
func TestCloudDriftFromTheProvider(t *testing.T) {
	c := newCluster(nil, "a", "b")
	for _, nc := range c.claims {
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Name: "default"}
	}
	provider := fakecloud.New()
	provider.SetDrifted("a", cloud.DriftAMI)
	provider.FailNext(fakecloud.IsDrifted, errors.New("DescribeInstances throttled"))
	ctl := New(nil, Options{Drift: provider})
	pass := func() map[string]Verdict {
		snap := c.snapshot()
		snap.NodeClasses["default"] = b.NodeClass("default", true)
		drift := map[string]Verdict{}
		ctl.addCloudDrift(t.Context(), snap, drift)
		return drift
	}
	if got := pass(); len(got) != 0 {
		t.Fatalf("first pass (a's check failed): drifted %v, want none", got)
	}
	got := pass()
	if len(got) != 1 || got["a"].Reason != string(cloud.DriftAMI) || !strings.Contains(got["a"].Message, "AMI") {
		t.Errorf("second pass: drifted %+v, want a: AMIDrift", got)
	}
}

// A dry run reports an expired NodeClaim once and deletes nothing.
func TestExpirationDryRunOnlyReports(t *testing.T) {
	nc := b.NodeClaim("old", b.CreatedAt(t0), b.ExpireAfter(ptr.To(time.Hour)), b.WithFinalizer())
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(nc).Build()
	rec := record.NewFakeRecorder(10)
	ctl := New(c, Options{DryRun: true, Recorder: rec})
	for range 2 {
		if err := ctl.expire(t.Context(), nc); err != nil {
			t.Fatal(err)
		}
	}
	if claimIn(t, c, "old").DeletionTimestamp != nil {
		t.Error("a dry run deleted the NodeClaim")
	}
	if len(rec.Events) != 1 || !strings.Contains(<-rec.Events, "DisruptionDryRun") {
		t.Error("want exactly one DisruptionDryRun event")
	}
}

// A NodeClaim expires at expireAfter after its creation, not before.
func TestExpiredAtExpireAfter(t *testing.T) {
	c := newCluster(nil, "n")
	c.claims[0].CreationTimestamp = metav1.NewTime(t0)
	c.claims[0].Spec.ExpireAfter = &karpv1.NillableDuration{Duration: ptr.To(time.Hour)}
	if got := expired(c.snapshot(), t0.Add(time.Hour-time.Nanosecond)); len(got) != 0 {
		t.Errorf("expired before expireAfter: %v", nodeClaimNames(got))
	}
	if got := expired(c.snapshot(), t0.Add(time.Hour)); len(got) != 1 {
		t.Error("not expired at expireAfter")
	}
}

// Budgets leave what they allow less the nodes already being disrupted (deleting, not Ready
// or tainted), per reason; a budget that cannot be read leaves nothing.
func TestBudgetsLeaveWhatIsNotBeingDisrupted(t *testing.T) {
	c := newCluster([]karpv1.Budget{{Nodes: "2"}, {Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}}, "a", "b", "c")
	c.node("a").Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
	tr := NewTracker()
	allowed, left := tr.budgets(c.snapshot(), karpv1.DisruptionReasonDrifted, t0)
	if allowed["default"] != 2 || left["default"] != 1 {
		t.Errorf("drift: allowed %d, left %d; want 2 and 1 (one node tainted)", allowed["default"], left["default"])
	}
	if _, left := tr.budgets(c.snapshot(), karpv1.DisruptionReasonEmpty, t0); left["default"] != 0 {
		t.Errorf("emptiness: left %d, want 0 (its own budget)", left["default"])
	}
	c.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Schedule: ptr.To("not a schedule"), Duration: &metav1.Duration{Duration: time.Hour}}}
	if _, left := tr.budgets(c.snapshot(), karpv1.DisruptionReasonDrifted, t0); left["default"] != 0 {
		t.Errorf("unreadable budget: left %d, want 0", left["default"])
	}
}
