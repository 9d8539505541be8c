package aws_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	cloudaws "github.com/karpool/karpool/autoscaler/cloud/aws"
	"github.com/karpool/karpool/autoscaler/cloud/aws/instanceprofile"
	"github.com/karpool/karpool/testbed/awssim"
	"github.com/karpool/karpool/testbed/policycheck"
)

const nodeRole = "KarpenterNodeRole-" + cluster

var (
	controllerKey = awssim.Credential{AccessKeyID: "AKIAKARPOOLCONTROLLER", SecretAccessKey: "controller-secret"}
	adminKey      = awssim.Credential{AccessKeyID: "AKIAKARPOOLTESTADMIN0", SecretAccessKey: "admin-secret"}
)

// policyEnv is a simulator that checks signatures of two identities: the controller, whose
// requests are checked against the policy, and an administrator for the test's own setup.
func policyEnv(t *testing.T, k8sVersion string) (*awssim.Server, aws.Config, aws.Config, context.Context) {
	t.Helper()
	srv, err := awssim.Start(awssim.Options{ClusterName: cluster, KubernetesVersion: k8sVersion,
		Credentials: []awssim.Credential{controllerKey, adminKey}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ctrl := srv.AWSConfig()
	admin := ctrl.Copy()
	admin.Credentials = credentials.NewStaticCredentialsProvider(adminKey.AccessKeyID, adminKey.SecretAccessKey, "")
	ic := iam.NewFromConfig(admin)
	for _, role := range []string{nodeRole, "LegacyNodeRole"} {
		must(t, func() error {
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(role),
				AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
			return err
		})
	}
	return srv, ctrl, admin, ctx
}

func roleClass(name, alias string) *awsv1.EC2NodeClass {
	discovery := map[string]string{"karpenter.sh/discovery": cluster}
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-class-" + name)}, Spec: awsv1.EC2NodeClassSpec{
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: alias}},
		Role:                       nodeRole,
	}}
}

// TestProviderStaysWithinTheControllerPolicy runs every operation of the provider against the
// simulator as the controller and checks each request against the least-privilege controller
// policy of the reference template (package policycheck).
func TestProviderStaysWithinTheControllerPolicy(t *testing.T) {
	// Kubernetes 1.32 is the last version with AL2 AMIs.
	srv, ctrl, admin, ctx := policyEnv(t, "1.32")
	p, err := cloudaws.New(ctrl, cloudaws.Options{ClusterName: cluster})
	if err != nil {
		t.Fatal(err)
	}
	ic := iam.NewFromConfig(admin)
	classes := []*awsv1.EC2NodeClass{roleClass("al2023", "al2023@latest"), roleClass("al2", "al2@latest"), roleClass("bottlerocket", "bottlerocket@latest")}

	// Status resolution and the instance profile's life: create, reuse, a role changed behind
	// karpool's back, new class tags.
	c0 := classes[0]
	for _, resolve := range []func() error{
		func() error { _, err := p.Subnets(ctx, c0); return err },
		func() error { _, err := p.SecurityGroups(ctx, c0); return err },
		func() error { _, err := p.AMIs(ctx, c0); return err },
	} {
		must(t, resolve)
	}
	profile, err := p.EnsureInstanceProfile(ctx, c0)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := p.EnsureInstanceProfile(ctx, c0); err != nil || again != profile {
		t.Fatalf("second EnsureInstanceProfile: %q %v", again, err)
	}
	must(t, func() error {
		_, err := ic.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String(nodeRole)})
		return err
	})
	must(t, func() error {
		_, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("LegacyNodeRole")})
		return err
	})
	c0.Spec.Tags = map[string]string{"team": "platform"}
	if _, err := p.EnsureInstanceProfile(ctx, c0); err != nil {
		t.Fatal(err)
	}
	c0.Status.InstanceProfile = profile

	// Launches of every family, on-demand and spot, each class with the profile its class
	// controller recorded (a launch only reads it).
	var launched []*karpv1.NodeClaim
	for i, class := range classes {
		if class.Status.InstanceProfile, err = p.EnsureInstanceProfile(ctx, class); err != nil {
			t.Fatal(err)
		}
		got, err := p.Create(ctx, workshopClaim("default-pol0"+string(rune('a'+i))), class)
		if err != nil {
			t.Fatalf("%s: %v", class.Name, err)
		}
		launched = append(launched, got)
	}
	spot := workshopClaim("default-polspot")
	spot.Spec.Requirements[1].Values = []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
	got, err := p.Create(ctx, spot, c0)
	if err != nil {
		t.Fatal(err)
	}
	launched = append(launched, got)
	launched = append(launched, reservedLaunches(t, ctx, srv, p, c0)...)

	// Reads, drift, instance types.
	if _, err := p.Get(ctx, launched[0].Status.ProviderID); err != nil {
		t.Fatal(err)
	}
	if list, err := p.List(ctx); err != nil || len(list) != len(launched) {
		t.Fatalf("List: %d %v", len(list), err)
	}
	if _, err := p.IsDrifted(ctx, launched[0], c0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.InstanceTypes(ctx, c0); err != nil {
		t.Fatal(err)
	}

	// Termination, garbage collection, class deletion.
	must(t, func() error { return p.Delete(ctx, launched[0]) })
	if ids, err := p.GarbageCollect(ctx, nil, time.Now().Add(cloudaws.LeakGracePeriod+time.Second)); err != nil || len(ids) != len(launched)-1 {
		t.Fatalf("GarbageCollect: %v %v", ids, err)
	}
	for _, class := range classes {
		must(t, func() error { return p.DeleteLaunchTemplates(ctx, class) })
		must(t, func() error { return p.DeleteInstanceProfile(ctx, class) })
	}

	// What the controller did, checked against the policy.
	seen := map[string]bool{}
	for _, c := range srv.Calls() {
		if c.AccessKeyID == controllerKey.AccessKeyID {
			seen[c.Service+":"+c.Action] = true
		}
	}
	for _, v := range policycheck.Check(policycheck.Params{ClusterName: cluster, Region: srv.Region(), NodeRole: nodeRole,
		AccessKeyID: controllerKey.AccessKeyID}, srv.Calls()) {
		t.Errorf("outside the controller policy: %s", v)
	}
	for _, want := range []string{"ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:DescribeLaunchTemplates", "ec2:DeleteLaunchTemplate",
		"ec2:TerminateInstances", "ec2:DescribeInstances", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeImages",
		"ssm:GetParameter", "eks:DescribeCluster", "iam:GetInstanceProfile", "iam:CreateInstanceProfile", "iam:TagInstanceProfile",
		"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile",
		"ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSpotPriceHistory", "pricing:GetProducts",
		"ec2:DescribeCapacityReservations"} {
		if !seen[want] {
			t.Errorf("the run never called %s, so the policy check did not cover it", want)
		}
	}

	// Class deletion left nothing behind.
	if _, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)}); err == nil {
		t.Errorf("instance profile %s survived the class's deletion", profile)
	}
	lts, err := ec2.NewFromConfig(admin).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lts.LaunchTemplates); n != 0 {
		t.Errorf("%d launch templates survived the classes' deletion", n)
	}
}

// reservedLaunches resolves a reservation of one m5.large into the class's status and launches
// twice with capacity type reserved allowed: the first into the reservation (its template
// targets it), the second on-demand once the reservation is full.
func reservedLaunches(t *testing.T, ctx context.Context, srv *awssim.Server, p *cloudaws.Provider, class *awsv1.EC2NodeClass) []*karpv1.NodeClaim {
	t.Helper()
	subnets, err := p.Subnets(ctx, class)
	if err != nil {
		t.Fatal(err)
	}
	id, err := srv.AddCapacityReservation(awssim.CapacityReservationSpec{InstanceType: "m5.large", AvailabilityZone: subnets[0].Zone, TotalInstanceCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: id}}
	if class.Status.CapacityReservations, err = p.CapacityReservations(ctx, class); err != nil || len(class.Status.CapacityReservations) != 1 {
		t.Fatalf("reservations %+v, %v", class.Status.CapacityReservations, err)
	}
	var out []*karpv1.NodeClaim
	for i, want := range []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand} {
		claim := workshopClaim(fmt.Sprintf("default-polres%d", i))
		claim.Spec.Requirements[1].Values = []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand}
		got, err := p.Create(ctx, claim, class)
		if err != nil {
			t.Fatal(err)
		}
		if ct, rid := got.Labels[karpv1.LabelCapacityType], got.Labels[awsv1.LabelCapacityReservationID]; ct != want || (ct == karpv1.CapacityTypeReserved) != (rid == id) {
			t.Fatalf("launch %d: capacity type %s, reservation %q; want %s (reservation %s holds 1)", i, ct, rid, want, id)
		}
		out = append(out, got)
	}
	class.Spec.CapacityReservationSelectorTerms, class.Status.CapacityReservations = nil, nil
	return out
}

// TestInstanceProfileFromRole follows the profile karpool manages for spec.role.
func TestInstanceProfileFromRole(t *testing.T) {
	_, ctrl, admin, ctx := policyEnv(t, "")
	p, err := cloudaws.New(ctrl, cloudaws.Options{ClusterName: cluster})
	if err != nil {
		t.Fatal(err)
	}
	ic := iam.NewFromConfig(admin)
	class := roleClass("default", "al2023@latest")
	class.Spec.Tags = map[string]string{"team": "platform"}
	name, err := p.EnsureInstanceProfile(ctx, class)
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic, distinct per class, named after the cluster.
	if name != p.InstanceProfileName("default") || name == p.InstanceProfileName("other") || len(name) > 128 || name[:len(cluster)+1] != cluster+"_" {
		t.Errorf("profile name %q", name)
	}
	get := func() *iam.GetInstanceProfileOutput {
		t.Helper()
		out, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := get()
	tags := map[string]string{}
	for _, tg := range out.InstanceProfile.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	for k, v := range map[string]string{"kubernetes.io/cluster/" + cluster: "owned", "eks:eks-cluster-name": cluster,
		"topology.kubernetes.io/region": "us-east-1", "karpenter.k8s.aws/ec2nodeclass": "default", "team": "platform"} {
		if tags[k] != v {
			t.Errorf("profile tag %s = %q, want %q", k, tags[k], v)
		}
	}
	if len(out.InstanceProfile.Roles) != 1 || aws.ToString(out.InstanceProfile.Roles[0].RoleName) != nodeRole {
		t.Errorf("roles %+v", out.InstanceProfile.Roles)
	}

	// The class now names another role (with an IAM path): it replaces the old one.
	class.Spec.Role = "nodes/LegacyNodeRole"
	if _, err := p.EnsureInstanceProfile(ctx, class); err != nil {
		t.Fatal(err)
	}
	if rs := get().InstanceProfile.Roles; len(rs) != 1 || aws.ToString(rs[0].RoleName) != "LegacyNodeRole" {
		t.Errorf("after the role change: %+v", rs)
	}
	// A role that does not exist is a clear error.
	class.Spec.Role = "NoSuchRole"
	if _, err := p.EnsureInstanceProfile(ctx, class); err == nil || !strings.Contains(err.Error(), `spec.role: IAM role "NoSuchRole" does not exist`) {
		t.Errorf("missing role: %v", err)
	}
	// A profile with karpool's name that karpool did not create is left alone.
	stranger := roleClass("stranger", "al2023@latest")
	must(t, func() error {
		_, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(p.InstanceProfileName("stranger"))})
		return err
	})
	if _, err := p.EnsureInstanceProfile(ctx, stranger); !errors.Is(err, instanceprofile.ErrNotOwned) {
		t.Errorf("foreign profile: want instanceprofile.ErrNotOwned, got %v", err)
	}
	must(t, func() error { return p.DeleteInstanceProfile(ctx, stranger) })
	if _, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(p.InstanceProfileName("stranger"))}); err != nil {
		t.Errorf("DeleteInstanceProfile removed a profile karpool does not own: %v", err)
	}
	// spec.instanceProfile must exist.
	byName := roleClass("byname", "al2023@latest")
	byName.Spec.Role, byName.Spec.InstanceProfile = "", aws.String("missing_profile")
	if _, err := p.EnsureInstanceProfile(ctx, byName); err == nil || !strings.Contains(err.Error(), `spec.instanceProfile: instance profile "missing_profile" does not exist`) {
		t.Errorf("missing spec.instanceProfile: %v", err)
	}
	// Deletion removes the role and the profile, and is idempotent.
	for range 2 {
		must(t, func() error { return p.DeleteInstanceProfile(ctx, class) })
	}
	if _, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)}); err == nil {
		t.Errorf("profile %s still exists", name)
	}
}

// implicitActions are the controller policy's actions no SDK call names: EC2 authorizes the
// instances a CreateFleet launches as ec2:RunInstances, the tags it puts on them as
// ec2:CreateTags, and the node role it gives them as iam:PassRole.
var implicitActions = map[string]bool{"ec2:RunInstances": true, "ec2:CreateTags": true, "iam:PassRole": true}

// The controller policy grants nothing the controller's code does not ask for: every action is
// an operation the AWS code outside prereq (which runs with the operator's credentials) calls,
// directly or through a paginator, or one of implicitActions.
func TestControllerPolicyGrantsOnlyWhatIsCalled(t *testing.T) {
	var src strings.Builder
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path == "prereq":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		src.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	doc := policycheck.ControllerPolicy(policycheck.Params{ClusterName: cluster, Region: "us-east-1", AccountID: "111122223333", NodeRole: nodeRole})
	for _, st := range doc.Statement {
		for _, action := range st.Action {
			op := action[strings.Index(action, ":")+1:]
			if !implicitActions[action] && !strings.Contains(src.String(), "."+op+"(") && !strings.Contains(src.String(), "New"+op+"Paginator(") {
				t.Errorf("statement %s grants %s, which the controller never calls", st.Sid, action)
			}
		}
	}
}
