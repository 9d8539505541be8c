package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/karpool/karpool/testbed/awssim"
)

var renderArgs = []string{"render", "--aws", "--cluster-name", "demo", "--region", "us-east-1", "--account-id", "111122223333",
	"--oidc-issuer", "https://oidc.eks.us-east-1.amazonaws.com/id/ABC", "--pools", "../../examples/workshop"}

// The workshop's EC2NodeClass, read through the manifest pipeline, gets its instance profile and
// its role; the JSON output is the rendered resources.
func TestRenderAWSFromPools(t *testing.T) {
	out, err := run(append(renderArgs, "--format", "json")...)
	if err != nil {
		t.Fatal(err, out)
	}
	var r struct {
		NodeRoles        []struct{ Name string }
		InstanceProfiles []struct{ Name, Role, NodeClass string }
		Rules            []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(r.InstanceProfiles) != 1 || r.InstanceProfiles[0].NodeClass != "default" || r.InstanceProfiles[0].Role != "KarpenterNodeRole-karpool-local" {
		t.Errorf("instance profiles %+v", r.InstanceProfiles)
	}
	if len(r.NodeRoles) != 2 || len(r.Rules) != 4 {
		t.Errorf("node roles %+v, rules %+v", r.NodeRoles, r.Rules)
	}
	cfn, err := run(renderArgs...)
	if err != nil || !strings.Contains(cfn, "AWSTemplateFormatVersion") || !strings.Contains(cfn, "KarpenterInterruptionQueue:") {
		t.Errorf("cloudformation output (%v):\n%s", err, cfn)
	}
}

// classWithRole is an EC2NodeClass gpu whose spec.role is %s.
const classWithRole = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: gpu
spec:
  role: %s
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`

// renderClass renders, as JSON, the pools of one EC2NodeClass whose role is role.
func renderClass(t *testing.T, role string, flags ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "class.yaml"), fmt.Appendf(nil, classWithRole, role), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(renderArgs[:len(renderArgs)-1]), dir, "--format", "json")
	return run(append(args, flags...)...)
}

// The pools come from a repository: a role or queue that would widen the controller policy, and a
// role of another account, are refused before anything renders, saying where and how to fix it.
func TestRenderRefusesWhatWouldWidenThePolicy(t *testing.T) {
	for _, c := range []struct {
		role  string
		flags []string
		want  string
	}{
		{`"*"`, nil, `EC2NodeClass gpu spec.role "*" is not an IAM role: write the role's name`},
		{`"${AWS::AccountId}"`, []string{"--format", "cloudformation"}, `EC2NodeClass gpu spec.role "${AWS::AccountId}" is not an IAM role`},
		{"GPUNodeRole", []string{"--interruption-queue", "*"}, `interruption queue "*" (--interruption-queue`},
		{"arn:aws:iam::444455556666:role/GPUNodeRole", nil, "is a role of account 444455556666, not of the cluster's account 111122223333: name a role of account 111122223333, or allow account 444455556666 (karpool render/apply --allow-account 444455556666"},
	} {
		out, err := renderClass(t, c.role, c.flags...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("role %s %v: %v (exit %d), want a usage error containing %q\n%s", c.role, c.flags, err, exitCode(err), c.want, out)
		}
	}
}

// statement is what the tests read of a policy statement.
type statement struct {
	Sid      string
	Resource any
}

// --allow-account lets a class name a role of that account, which the controller may then pass by
// its exact ARN; karpool does not make it.
func TestRenderAllowedAccount(t *testing.T) {
	const foreign = "arn:aws:iam::444455556666:role/GPUNodeRole"
	out, err := renderClass(t, foreign, "--allow-account", "444455556666")
	if err != nil {
		t.Fatal(err, out)
	}
	var r struct {
		NodeRoles          []struct{ Name string }
		ControllerPolicies []struct {
			Document struct{ Statement []statement }
		}
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(r.NodeRoles) != 1 || r.NodeRoles[0].Name != "KarpenterNodeRole-demo" {
		t.Errorf("node roles %+v, want only the default", r.NodeRoles)
	}
	var all []statement
	for _, p := range r.ControllerPolicies {
		all = append(all, p.Document.Statement...)
	}
	i := slices.IndexFunc(all, func(st statement) bool { return st.Sid == "PassNodeRolesToEC2" })
	if i < 0 {
		t.Fatalf("no PassRole statement:\n%s", out)
	}
	if got := fmt.Sprint(all[i].Resource); got != "[arn:aws:iam::111122223333:role/KarpenterNodeRole-demo "+foreign+"]" {
		t.Errorf("PassRole on %s", got)
	}
	if !strings.Contains(out, "warning: EC2NodeClass gpu spec.role "+foreign+" is a role of account 444455556666 (allowed)") {
		t.Errorf("no warning that karpool does not make the role:\n%s", out)
	}
}

func TestRenderUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"render", "--cluster-name", "demo"}, "say what: --aws"},
		{append(renderArgs, "--format", "yaml"), `--format "yaml": want one of cloudformation, terraform-json, json, plan`},
		{append(renderArgs, "--pod-identity"), "set the OIDC issuer (IRSA) or Pod Identity, exactly one"},
		{append(renderArgs, "--account-id", "12"), `account ID "12": 12 digits`},
	} {
		out, err := run(c.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v (exit %d), want a usage error containing %q\n%s", c.args[1:], err, exitCode(err), c.want, out)
		}
	}
}

// render --format plan and apply --aws against the simulator through the SDK's credential chain:
// the plan lists what apply then does, and a second apply has nothing left to do.
func TestPlanAndApplyAWS(t *testing.T) {
	srv, err := awssim.Start(awssim.Options{ClusterName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	args := func(cmd ...string) []string {
		// No --account-id and no --oidc-issuer: plan and apply read them from STS and EKS.
		return append(cmd, "--aws", "--cluster-name", "demo", "--region", srv.Region(), "--pools", "../../examples/workshop")
	}
	plan, err := run(args("render", "--format", "plan")...)
	if err != nil || !strings.Contains(plan, "+ IAM role demo-karpenter") || !strings.Contains(plan, "+ SQS queue demo") {
		t.Fatalf("plan (%v):\n%s", err, plan)
	}
	applied, err := run(args("apply")...)
	if err != nil || applied != plan {
		t.Fatalf("apply (%v) did other than the plan said:\n%s\nplan:\n%s", err, applied, plan)
	}
	if again, err := run(args("apply")...); err != nil || !strings.Contains(again, "nothing to change") {
		t.Errorf("second apply (%v):\n%s", err, again)
	}
}
