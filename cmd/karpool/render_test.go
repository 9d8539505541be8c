package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/karpool/karpool/internal/awssim"
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
