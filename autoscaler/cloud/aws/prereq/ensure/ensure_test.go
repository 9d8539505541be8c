package ensure

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/testbed/awssim"
)

type fixture struct {
	t   *testing.T
	srv *awssim.Server
	c   Clients
	ctx context.Context
	s   prereq.Settings
}

func newFixture(t *testing.T) *fixture {
	srv, err := awssim.Start(awssim.Options{ClusterName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, srv: srv, c: NewClients(srv.AWSConfig()), ctx: ctx}
	subnets, err := f.c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("the simulator has no subnets: %v", err)
	}
	// The simulator's subnets carry the discovery tag already; one loses it.
	subnet := subnets.Subnets[0].SubnetId
	if _, err := f.c.EC2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{aws.ToString(subnet)}, Tags: []ec2types.Tag{{Key: aws.String(prereq.DiscoveryTag)}}}); err != nil {
		t.Fatal(err)
	}
	f.s = prereq.Settings{ClusterName: "demo", Region: srv.Region(), AccountID: awssim.DefaultAccountID,
		OIDCIssuer: "https://oidc.eks.us-east-1.amazonaws.com/id/ONE", Subnets: []string{aws.ToString(subnet)}}
	return f
}

func nodeClass(name, role string) awsv1.EC2NodeClass {
	nc := awsv1.EC2NodeClass{}
	nc.Name, nc.Spec.Role = name, role
	return nc
}

// run renders and applies (or plans), and returns the changes and the mutating calls it made.
func (f *fixture) run(classes []awsv1.EC2NodeClass, planOnly bool) ([]Change, []string, error) {
	f.t.Helper()
	r, err := prereq.Render(f.s, classes)
	if err != nil {
		f.t.Fatal(err)
	}
	before := len(f.srv.Calls())
	changes, err := Run(f.ctx, f.c, r, Options{PlanOnly: planOnly})
	var mutations []string
	for _, c := range f.srv.Calls()[before:] {
		if c.Mutating() {
			mutations = append(mutations, c.Service+":"+c.Action)
		}
	}
	return changes, mutations, err
}

func (f *fixture) apply(classes []awsv1.EC2NodeClass) ([]Change, []string) {
	f.t.Helper()
	changes, mutations, err := f.run(classes, false)
	if err != nil {
		f.t.Fatalf("apply: %v\n%s", err, Text(changes))
	}
	return changes, mutations
}

func TestApplyFromAnEmptyAccount(t *testing.T) {
	f := newFixture(t)
	classes := []awsv1.EC2NodeClass{nodeClass("default", "KarpenterNodeRole-demo"), nodeClass("gpu", "GPUNodeRole")}

	plan, mutations, err := f.run(classes, true)
	if err != nil || len(mutations) != 0 {
		t.Fatalf("plan: %v, mutating calls %v", err, mutations)
	}
	text := Text(plan)
	for _, want := range []string{"+ IAM role KarpenterNodeRole-demo", "+ IAM role demo-karpenter", "+ IAM policy KarpenterControllerNodeLifecyclePolicy-demo",
		"+ IAM policy KarpenterControllerIAMIntegrationPolicy-demo", "+ IAM policy KarpenterControllerResourceDiscoveryPolicy-demo",
		"+ SQS queue demo", "+ EventBridge rule karpool-demo-spot-interruption", "+ EKS access entry arn:aws:iam::111122223333:role/GPUNodeRole",
		"+ IAM service-linked role AWSServiceRoleForEC2Spot", "~ EC2 tag on subnet-", "18 to create, 1 to update, 0 to delete."} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}

	f.apply(classes)
	role, err := f.c.IAM.GetRole(f.ctx, &iam.GetRoleInput{RoleName: aws.String("demo-karpenter")})
	if err != nil || !strings.Contains(aws.ToString(role.Role.AssumeRolePolicyDocument), "system%3Aserviceaccount%3Akarpool-system%3Akarpool") {
		t.Errorf("controller role: %v %+v", err, role)
	}
	url := aws.String("https://sqs.us-east-1.amazonaws.com/111122223333/demo")
	attrs, err := f.c.SQS.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil || attrs.Attributes["MessageRetentionPeriod"] != "300" || attrs.Attributes["SqsManagedSseEnabled"] != "true" {
		t.Errorf("queue attributes %v: %v", attrs, err)
	}
	targets, err := f.c.Events.ListTargetsByRule(f.ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String("karpool-demo-rebalance")})
	if err != nil || len(targets.Targets) != 1 || aws.ToString(targets.Targets[0].Arn) != "arn:aws:sqs:us-east-1:111122223333:demo" {
		t.Errorf("rebalance rule targets %+v: %v", targets, err)
	}
	profile, err := f.c.IAM.GetInstanceProfile(f.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(prereq.InstanceProfileName("demo", f.s.Region, "gpu"))})
	if err != nil || len(profile.InstanceProfile.Roles) != 1 || aws.ToString(profile.InstanceProfile.Roles[0].RoleName) != "GPUNodeRole" {
		t.Errorf("gpu instance profile %+v: %v", profile, err)
	}

	// An immediate second apply changes nothing and makes no mutating call.
	if changes, mutations := f.apply(classes); len(changes) != 0 || len(mutations) != 0 {
		t.Errorf("second apply: %v, mutating calls %v", Text(changes), mutations)
	}

	// A new OIDC issuer changes only the controller role's trust policy.
	f.s.OIDCIssuer = "https://oidc.eks.us-east-1.amazonaws.com/id/TWO"
	changes, mutations := f.apply(classes)
	if len(changes) != 1 || changes[0].Name != "demo-karpenter" || strings.Join(mutations, " ") != "iam:UpdateAssumeRolePolicy" {
		t.Errorf("after an issuer change: %s, mutating calls %v", Text(changes), mutations)
	}

	// The class that named GPUNodeRole leaves. PoolSync keeps its instance profile (the class
	// controller deletes it with the class) ...
	r, err := prereq.Render(f.s, classes[:1])
	if err != nil {
		t.Fatal(err)
	}
	kept, err := Run(f.ctx, f.c, r, Options{PlanOnly: true, KeepInstanceProfiles: true})
	if err != nil || len(kept) != 1 || kept[0].Name != "KarpenterControllerIAMIntegrationPolicy-demo" {
		t.Errorf("keeping instance profiles: %v %s", err, Text(kept))
	}
	// ... apply --aws deletes it, and the controller may no longer pass that role.
	changes, _ = f.apply(classes[:1])
	if len(changes) != 2 || changes[0].Name != "KarpenterControllerIAMIntegrationPolicy-demo" || changes[1].Op != Delete || changes[1].Name != prereq.InstanceProfileName("demo", f.s.Region, "gpu") {
		t.Errorf("after removing a class: %s", Text(changes))
	}
	if _, err := f.c.IAM.GetInstanceProfile(f.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(prereq.InstanceProfileName("demo", f.s.Region, "gpu"))}); awserr.Code(err) != "NoSuchEntity" {
		t.Errorf("the pruned profile is still there: %v", err)
	}
}

// A queue of the same name that karpool did not create is reported and left as it is.
func TestWhatIsNotOwnedIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	if _, err := f.c.SQS.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("demo"), Attributes: map[string]string{"MessageRetentionPeriod": "600"}}); err != nil {
		t.Fatal(err)
	}
	changes, mutations := f.apply(nil)
	text := Text(changes)
	if !strings.Contains(text, "! SQS queue demo\n    not tagged karpool.dev/cluster=demo") || !strings.Contains(text, "MessageRetentionPeriod: 600 → 300") {
		t.Errorf("plan:\n%s", text)
	}
	for _, m := range mutations {
		if strings.HasPrefix(m, "sqs:") {
			t.Errorf("apply changed the queue it does not own: %s", m)
		}
	}
}

// A failure half way (CreateQueue refused) leaves a state the next apply completes.
func TestInterruptedApplyIsCompletedByTheNext(t *testing.T) {
	f := newFixture(t)
	f.srv.SetFaults(awssim.Faults{Errors: []awssim.ErrorFault{{Operation: "sqs:CreateQueue", Rate: 1}}})
	changes, _, err := f.run(nil, false)
	if err == nil || !strings.Contains(err.Error(), "creating SQS queue demo") {
		t.Fatalf("apply with CreateQueue failing: %v", err)
	}
	if len(changes) == 0 || changes[len(changes)-1].Name != "demo" {
		t.Errorf("changes up to the failure: %s", Text(changes))
	}
	f.srv.SetFaults(awssim.Faults{})
	changes, _ = f.apply(nil)
	text := Text(changes)
	if !strings.Contains(text, "+ SQS queue demo") || strings.Contains(text, "IAM role") {
		t.Errorf("the second apply should create the queue and what follows it, not the roles again:\n%s", text)
	}
	if changes, _ := f.apply(nil); len(changes) != 0 {
		t.Errorf("third apply: %s", Text(changes))
	}
}

// Discover reads the account and the cluster's issuer, keeps what was given, and names a
// cluster it cannot find.
func TestDiscover(t *testing.T) {
	f := newFixture(t)
	cluster, err := eks.NewFromConfig(f.srv.AWSConfig()).DescribeCluster(f.ctx, &eks.DescribeClusterInput{Name: aws.String("demo")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Discover(f.ctx, f.c, prereq.Settings{ClusterName: "demo", Region: f.srv.Region()})
	if err != nil || s.AccountID != f.srv.AccountID() || s.OIDCIssuer != aws.ToString(cluster.Cluster.Identity.Oidc.Issuer) {
		t.Fatalf("Discover = %+v, %v; want account %s and issuer %s", s, err, f.srv.AccountID(), aws.ToString(cluster.Cluster.Identity.Oidc.Issuer))
	}
	given := prereq.Settings{ClusterName: "demo", AccountID: "444455556666", OIDCIssuer: "https://issuer.example"}
	if s, err := Discover(f.ctx, f.c, given); err != nil || s.AccountID != given.AccountID || s.OIDCIssuer != given.OIDCIssuer {
		t.Errorf("Discover(given) = %+v, %v: want the given values kept", s, err)
	}
	if s, err := Discover(f.ctx, f.c, prereq.Settings{ClusterName: "elsewhere", PodIdentity: true}); err != nil || s.OIDCIssuer != "" {
		t.Errorf("with Pod Identity no issuer is read: %+v, %v", s, err)
	}
	if _, err := Discover(f.ctx, f.c, prereq.Settings{ClusterName: "elsewhere"}); err == nil || !strings.Contains(err.Error(), "cluster elsewhere") {
		t.Errorf("an unknown cluster: %v, want an error naming it", err)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenText compares a plan's text with testdata/name.txt (go test -update rewrites it).
func goldenText(t *testing.T, name string, changes []Change) {
	t.Helper()
	got := Text(changes)
	file := filepath.Join("testdata", name+".txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./autoscaler/cloud/aws/prereq/ensure -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; got:\n%s", file, got)
	}
}

// TestPlanGolden: the plan people read, from an empty account and after changes on both sides
// (a class gone, a new issuer, a queue attribute edited by hand).
func TestPlanGolden(t *testing.T) {
	f := newFixture(t)
	classes := []awsv1.EC2NodeClass{nodeClass("default", "KarpenterNodeRole-demo"), nodeClass("gpu", "GPUNodeRole")}
	plan, _, err := f.run(classes, true)
	if err != nil {
		t.Fatal(err)
	}
	goldenText(t, "plan-empty-account", plan)

	f.apply(classes)
	url := aws.String("https://sqs.us-east-1.amazonaws.com/111122223333/demo")
	if _, err := f.c.SQS.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: url, Attributes: map[string]string{"MessageRetentionPeriod": "600"}}); err != nil {
		t.Fatal(err)
	}
	f.s.OIDCIssuer = "https://oidc.eks.us-east-1.amazonaws.com/id/TWO"
	drift, _, err := f.run(classes[:1], true)
	if err != nil {
		t.Fatal(err)
	}
	goldenText(t, "plan-changes", drift)
}

// A role named with a path is created at that path, which the controller policy's ARN names; a
// role of that name at another path is reported, since IAM cannot move a role.
func TestRolePaths(t *testing.T) {
	f := newFixture(t)
	classes := []awsv1.EC2NodeClass{nodeClass("gpu", "team/GPUNodeRole")}
	f.apply(classes)
	role, err := f.c.IAM.GetRole(f.ctx, &iam.GetRoleInput{RoleName: aws.String("GPUNodeRole")})
	if err != nil || aws.ToString(role.Role.Arn) != "arn:aws:iam::111122223333:role/team/GPUNodeRole" {
		t.Fatalf("GPUNodeRole: %v %+v", err, role)
	}
	if changes, mutations := f.apply(classes); len(changes) != 0 || len(mutations) != 0 {
		t.Errorf("second apply: %v, mutating calls %v", Text(changes), mutations)
	}
	changes, _, err := f.run([]awsv1.EC2NodeClass{nodeClass("gpu", "other/GPUNodeRole")}, true)
	if err != nil || !strings.Contains(Text(changes), "! IAM role GPUNodeRole\n    path /team/, not /other/ as named: IAM cannot move a role; name it with its path (team/GPUNodeRole)") {
		t.Errorf("a role at another path (%v):\n%s", err, Text(changes))
	}
}
