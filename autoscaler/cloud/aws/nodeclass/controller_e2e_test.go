package nodeclass_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/api/scheme"
	cloudaws "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/autoscaler/cloud/aws/nodeclass"
	"github.com/karpool/karpool/internal/unimplemented"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
	"github.com/karpool/karpool/testbed/policycheck"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	localenvtest.Main(m)
}

const cluster = "nodeclass-e2e"

type harness struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	srv *awssim.Server
	p   *cloudaws.Provider
	iam *iam.Client
	ec2 *ec2.Client
}

// start runs the controller in a manager against the local control plane and a simulated AWS
// account holding the node role.
func start(t *testing.T) *harness {
	t.Helper()
	env := localenvtest.Env(t)
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := awssim.Start(awssim.Options{ClusterName: cluster, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cfg := srv.AWSConfig()
	ic := iam.NewFromConfig(cfg)
	if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-" + cluster),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	// From here on every request is the controller's (or an allowed read of the test's), and
	// must stay within the controller policy.
	srv.ResetCalls()
	p, err := cloudaws.New(cfg, cloudaws.Options{ClusterName: cluster})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	r := nodeclass.New(mgr.GetClient(), p, nodeclass.Options{Interval: 2 * time.Second, RetryInterval: time.Second, SkipNameValidation: true})
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &harness{t: t, ctx: ctx, c: c, srv: srv, p: p, iam: ic, ec2: ec2.NewFromConfig(cfg)}
}

func (h *harness) class(name string, mutate func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	h.t.Helper()
	d := map[string]string{"karpenter.sh/discovery": cluster}
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: awsv1.EC2NodeClassSpec{
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: d}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: d}},
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "KarpenterNodeRole-" + cluster,
	}}
	if mutate != nil {
		mutate(nc)
	}
	if err := h.c.Create(h.ctx, nc); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { h.deleteClass(name) })
	return nc
}

// deleteClass deletes a class and waits until the controller let it go.
func (h *harness) deleteClass(name string) {
	h.t.Helper()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := h.c.Delete(context.Background(), nc); err != nil && !apierrors.IsNotFound(err) {
		h.t.Errorf("deleting EC2NodeClass %s: %v", name, err)
		return
	}
	h.eventually("EC2NodeClass "+name+" deleted", func() (bool, string) {
		err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, &awsv1.EC2NodeClass{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// eventually polls cond every 100 ms until it holds, failing the test after 60 s with the last
// state cond described.
func (h *harness) eventually(what string, cond func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not reached within 60s; last: %s", what, last)
		}
		<-tick.C
	}
}

func (h *harness) get(name string) *awsv1.EC2NodeClass {
	h.t.Helper()
	nc := &awsv1.EC2NodeClass{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: name}, nc); err != nil {
		h.t.Fatal(err)
	}
	return nc
}

// waitCondition waits until the class's condition has the status for its current generation.
func (h *harness) waitCondition(name, condType string, status metav1.ConditionStatus) *awsv1.EC2NodeClass {
	h.t.Helper()
	var nc *awsv1.EC2NodeClass
	h.eventually(fmt.Sprintf("%s %s=%s", name, condType, status), func() (bool, string) {
		nc = h.get(name)
		c := meta.FindStatusCondition(nc.Status.Conditions, condType)
		return c != nil && c.Status == status && c.ObservedGeneration == nc.Generation, fmt.Sprintf("%+v", nc.Status.Conditions)
	})
	return nc
}

func TestEC2NodeClassStatus(t *testing.T) {
	h := start(t)

	// A class that resolves: Ready with everything in its status.
	h.class("ready", nil)
	nc := h.waitCondition("ready", awsv1.ConditionTypeReady, metav1.ConditionTrue)
	if !nodeclass.Ready(nc) {
		t.Errorf("nodeclass.Ready is false for %+v", nc.Status.Conditions)
	}
	var zones []string
	for _, s := range nc.Status.Subnets {
		zones = append(zones, s.Zone)
	}
	if strings.Join(zones, ",") != "us-east-1a,us-east-1b,us-east-1c" {
		t.Errorf("subnets %+v", nc.Status.Subnets)
	}
	if len(nc.Status.SecurityGroups) != 1 || !strings.HasPrefix(nc.Status.SecurityGroups[0].ID, "sg-") {
		t.Errorf("security groups %+v", nc.Status.SecurityGroups)
	}
	archs := map[string]bool{}
	for _, a := range nc.Status.AMIs {
		for _, r := range a.Requirements {
			if r.Key == corev1.LabelArchStable {
				archs[strings.Join(r.Values, ",")] = strings.HasPrefix(a.ID, "ami-")
			}
		}
	}
	// al2023@latest: standard, NVIDIA and Neuron images on x86_64, standard and NVIDIA on arm64,
	// each listed with the requirements of the types it suits.
	if len(nc.Status.AMIs) != 5 || !archs["amd64"] || !archs["arm64"] {
		t.Errorf("AMIs %+v", nc.Status.AMIs)
	}
	if nc.Status.InstanceProfile != h.p.InstanceProfileName("ready") {
		t.Errorf("instance profile %q", nc.Status.InstanceProfile)
	}
	for _, ct := range []string{awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady, awsv1.ConditionTypeAMIsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeValidationSucceeded} {
		if c := meta.FindStatusCondition(nc.Status.Conditions, ct); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != nc.Generation {
			t.Errorf("condition %s: %+v", ct, c)
		}
	}
	if !strings.Contains(strings.Join(nc.Finalizers, ","), nodeclass.Finalizer) {
		t.Errorf("finalizers %v", nc.Finalizers)
	}
	if nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != nc.Hash() || nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
		t.Errorf("annotations %v, want the class's hash %s under version %s", nc.Annotations, nc.Hash(), awsv1.EC2NodeClassHashVersion)
	}
	prof, err := h.iam.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(nc.Status.InstanceProfile)})
	if err != nil || len(prof.InstanceProfile.Roles) != 1 {
		t.Fatalf("instance profile in IAM: %v %+v", err, prof)
	}

	// A subnet selector that matches nothing: not Ready, and the message says what to fix.
	h.class("nosubnets", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "someone-else"}}}
	})
	bad := h.waitCondition("nosubnets", awsv1.ConditionTypeReady, metav1.ConditionFalse)
	sub := meta.FindStatusCondition(bad.Status.Conditions, awsv1.ConditionTypeSubnetsReady)
	ready := meta.FindStatusCondition(bad.Status.Conditions, awsv1.ConditionTypeReady)
	for _, msg := range []string{sub.Message, ready.Message} {
		if !strings.Contains(msg, "spec.subnetSelectorTerms match no available subnet") || !strings.Contains(msg, "karpenter.sh/discovery="+cluster) {
			t.Errorf("message %q does not say what matched nothing and how to fix it", msg)
		}
	}
	if sub.Status != metav1.ConditionFalse || sub.Reason != nodeclass.ReasonNotFound || len(bad.Status.Subnets) != 0 || nodeclass.Ready(bad) {
		t.Errorf("SubnetsReady %+v, subnets %+v", sub, bad.Status.Subnets)
	}
	if c := meta.FindStatusCondition(bad.Status.Conditions, awsv1.ConditionTypeSecurityGroupsReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the security groups resolve all the same: %+v", c)
	}
	// Fixing the selector makes it Ready for the new generation.
	bad.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] = cluster
	if err := h.c.Update(h.ctx, bad); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("nosubnets", awsv1.ConditionTypeReady, metav1.ConditionTrue)

	// AWS failing: a class resolved for its current spec stays Ready; a changed spec cannot
	// become Ready until it is resolved.
	h.srv.SetFaults(awssim.Faults{Errors: []awssim.ErrorFault{{Operation: "ec2:DescribeSubnets", Rate: 1, Code: "UnauthorizedOperation", Status: 403}}})
	failedAt := len(h.srv.Calls())
	h.eventually("a failed DescribeSubnets", func() (bool, string) {
		for _, c := range h.srv.Calls()[failedAt:] {
			if c.Action == "DescribeSubnets" && c.ErrorCode == "UnauthorizedOperation" {
				return true, ""
			}
		}
		return false, "none yet"
	})
	if still := h.get("nosubnets"); !nodeclass.Ready(still) {
		t.Errorf("a passing AWS failure made the class unready: %+v", still.Status.Conditions)
	}
	changed := h.get("nosubnets")
	changed.Spec.Tags = map[string]string{"team": "platform"}
	if err := h.c.Update(h.ctx, changed); err != nil {
		t.Fatal(err)
	}
	unknown := h.waitCondition("nosubnets", awsv1.ConditionTypeSubnetsReady, metav1.ConditionUnknown)
	if c := meta.FindStatusCondition(unknown.Status.Conditions, awsv1.ConditionTypeReady); nodeclass.Ready(unknown) || c.Status != metav1.ConditionUnknown ||
		!strings.Contains(c.Message, "SubnetsReady") {
		t.Errorf("Ready while its subnets could not be resolved: %+v", c)
	}
	h.srv.SetFaults(awssim.Faults{})
	h.waitCondition("nosubnets", awsv1.ConditionTypeReady, metav1.ConditionTrue)

	// User data that cannot be merged fails validation.
	h.class("baduserdata", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
		nc.Spec.UserData = aws.String("[settings.kubernetes\n")
	})
	inv := h.waitCondition("baduserdata", awsv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse)
	if c := meta.FindStatusCondition(inv.Status.Conditions, awsv1.ConditionTypeReady); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.userData") {
		t.Errorf("Ready %+v", c)
	}

	// A field karpool does not act on is said in FieldsHonored (not in Ready: the class works,
	// without it); the plain class honours every field it sets.
	if c := meta.FindStatusCondition(nc.Status.Conditions, unimplemented.ConditionType); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("FieldsHonored of a plain class: %+v, want True", c)
	}
	h.class("placed", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelectorTerm{Name: "ml"}
	})
	pre := h.waitCondition("placed", unimplemented.ConditionType, metav1.ConditionFalse)
	if c := meta.FindStatusCondition(pre.Status.Conditions, unimplemented.ConditionType); !strings.Contains(c.Message, "spec.placementGroupSelector is not implemented by karpool") {
		t.Errorf("FieldsHonored %+v, want it to name spec.placementGroupSelector", c)
	}
	h.waitCondition("placed", awsv1.ConditionTypeReady, metav1.ConditionTrue)

	// Deletion waits for the class's NodeClaims, then removes its launch templates and
	// instance profile.
	launched := workshopClaim("ready-aaaaa", "ready")
	launched.UID = "uid-ready-aaaaa"
	if _, err := h.p.Create(h.ctx, launched, nc); err != nil {
		t.Fatal(err)
	}
	claim := workshopClaim("ready-bbbbb", "ready")
	if err := h.c.Create(h.ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(h.ctx, nc); err != nil {
		t.Fatal(err)
	}
	term := h.waitCondition("ready", awsv1.ConditionTypeReady, metav1.ConditionFalse)
	if c := meta.FindStatusCondition(term.Status.Conditions, awsv1.ConditionTypeReady); c.Reason != nodeclass.ReasonTerminating || !strings.Contains(c.Message, "ready-bbbbb") {
		t.Errorf("Ready while waiting: %+v", c)
	}
	if _, err := h.iam.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(nc.Status.InstanceProfile)}); err != nil {
		t.Errorf("the instance profile went while a NodeClaim still uses the class: %v", err)
	}
	if err := h.c.Delete(h.ctx, claim); err != nil {
		t.Fatal(err)
	}
	h.eventually("EC2NodeClass ready deleted", func() (bool, string) {
		err := h.c.Get(h.ctx, client.ObjectKey{Name: "ready"}, &awsv1.EC2NodeClass{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := h.iam.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(nc.Status.InstanceProfile)}); err == nil {
		t.Errorf("instance profile %s survived the class", nc.Status.InstanceProfile)
	}
	for _, v := range policycheck.Check(policycheck.Params{ClusterName: cluster, Region: h.srv.Region(), NodeRole: "KarpenterNodeRole-" + cluster}, h.srv.Calls()) {
		t.Errorf("outside the controller policy: %s", v)
	}
	lts, err := h.ec2.DescribeLaunchTemplates(h.ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range lts.LaunchTemplates {
		for _, tg := range lt.Tags {
			if aws.ToString(tg.Key) == awsv1.LabelNodeClass && aws.ToString(tg.Value) == "ready" {
				t.Errorf("launch template %s of the deleted class survived", aws.ToString(lt.LaunchTemplateName))
			}
		}
	}
}

func workshopClaim(name, class string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class},
		},
	}
}

// TestCapacityBlockNodesDrainBeforeTheEnd: a capacity block 35 minutes from its end is inside
// Karpenter's 40-minute window: the class reports it expiring and the controller deletes the
// NodeClaims launched into it (their termination drains the nodes), not the others.
func TestCapacityBlockNodesDrainBeforeTheEnd(t *testing.T) {
	h := start(t)
	end := time.Now().Add(35 * time.Minute)
	id, err := h.srv.AddCapacityReservation(awssim.CapacityReservationSpec{InstanceType: "p5.48xlarge", AvailabilityZone: h.srv.Region() + "a",
		TotalInstanceCount: 2, ReservationType: "capacity-block", EndDate: &end})
	if err != nil {
		t.Fatal(err)
	}
	h.class("blocks", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: id}}
	})
	h.eventually("the capacity block expiring in status", func() (bool, string) {
		rs := h.get("blocks").Status.CapacityReservations
		return len(rs) == 1 && rs[0].State == "expiring" && rs[0].ReservationType == "capacity-block", fmt.Sprintf("%+v", rs)
	})
	inBlock, other := workshopClaim("blocks-aaaaa", "blocks"), workshopClaim("blocks-bbbbb", "blocks")
	inBlock.Labels[awsv1.LabelCapacityReservationID] = id
	for _, c := range []*karpv1.NodeClaim{inBlock, other} {
		if err := h.c.Create(h.ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("the capacity block's NodeClaim deleted", func() (bool, string) {
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(inBlock), &karpv1.NodeClaim{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(other), &karpv1.NodeClaim{}); err != nil {
		t.Errorf("the NodeClaim outside the block: %v", err)
	}
	// The class goes at the end of the test once its NodeClaims have.
	if err := h.c.Delete(h.ctx, other); err != nil {
		t.Fatal(err)
	}
}

// TestReservationEndedTurnsNodesOnDemand: when a reservation is cancelled, EC2 keeps its
// instances running as on-demand; the NodeClaims launched into it lose the reservation labels
// and say on-demand, as Karpenter's capacity-type controller has them.
func TestReservationEndedTurnsNodesOnDemand(t *testing.T) {
	h := start(t)
	id, err := h.srv.AddCapacityReservation(awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: h.srv.Region() + "a", TotalInstanceCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.class("odcr", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: id}}
	})
	nc := h.waitCondition("odcr", awsv1.ConditionTypeReady, metav1.ConditionTrue)
	if len(nc.Status.CapacityReservations) != 1 {
		t.Fatalf("status.capacityReservations %+v", nc.Status.CapacityReservations)
	}
	claim := workshopClaim("odcr-aaaaa", "odcr")
	claim.UID = "uid-odcr-aaaaa"
	claim.Spec.Requirements[1].Values = []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand}
	got, err := h.p.Create(h.ctx, claim, nc)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[awsv1.LabelCapacityReservationID] != id {
		t.Fatalf("launched as %v, want into %s", got.Labels, id)
	}
	obj := workshopClaim("odcr-aaaaa", "odcr")
	obj.Labels = got.Labels
	if err := h.c.Create(h.ctx, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status.ProviderID = got.Status.ProviderID
	if err := h.c.Status().Update(h.ctx, obj); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.SetCapacityReservationState(id, "cancelled"); err != nil {
		t.Fatal(err)
	}
	h.eventually("the NodeClaim on-demand without reservation labels", func() (bool, string) {
		c := &karpv1.NodeClaim{}
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(obj), c); err != nil {
			return false, err.Error()
		}
		_, rid := c.Labels[awsv1.LabelCapacityReservationID]
		return c.Labels[karpv1.LabelCapacityType] == karpv1.CapacityTypeOnDemand && !rid, fmt.Sprint(c.Labels)
	})
	if err := h.c.Delete(h.ctx, obj); err != nil {
		t.Fatal(err)
	}
}
