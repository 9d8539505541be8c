package prereq

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/iampolicy"
)

// passes says whether the controller policy lets the controller pass a role to EC2.
func passes(doc iampolicy.Document, arn string) bool {
	return iampolicy.Decide(iampolicy.Request{Action: "iam:PassRole", Resource: arn,
		Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}, doc).Allowed
}

// A class's spec.role, read as Karpenter reads it, becomes exactly one role ARN the controller
// may pass; what is not a role, or is a role of another account or partition, is refused.
func TestClassRoles(t *testing.T) {
	for _, c := range []struct {
		role, arn, err string
	}{
		{role: "GPUNodeRole", arn: "arn:aws:iam::111122223333:role/GPUNodeRole"},
		{role: "team/GPUNodeRole", arn: "arn:aws:iam::111122223333:role/team/GPUNodeRole"},
		{role: "/team/GPUNodeRole", arn: "arn:aws:iam::111122223333:role/team/GPUNodeRole"},
		{role: "arn:aws:iam::111122223333:role/a/GPUNodeRole", arn: "arn:aws:iam::111122223333:role/a/GPUNodeRole"},
		{role: "*", err: `EC2NodeClass gpu spec.role "*" is not an IAM role: write the role's name`},
		{role: "team/*", err: `EC2NodeClass gpu spec.role "team/*" is not an IAM role`},
		{role: "GPU?", err: `spec.role "GPU?" is not an IAM role`},
		{role: "${AWS::AccountId}", err: `spec.role "${AWS::AccountId}" is not an IAM role`},
		{role: strings.Repeat("r", 65), err: "is not an IAM role"},
		{role: "arn:aws:iam::444455556666:role/GPUNodeRole", err: `is a role of account 444455556666, not of the cluster's account 111122223333: name a role of account 111122223333, or allow account 444455556666 (karpool render/apply --allow-account 444455556666; PoolSync spec.aws.allowedAccounts)`},
		{role: "arn:aws-cn:iam::111122223333:role/GPUNodeRole", err: "is a role of partition aws-cn, but the cluster is in aws"},
		{role: "arn:aws:iam::111122223333:user/GPUNodeRole", err: "is not an IAM role"},
	} {
		r, err := Render(settings, []awsv1.EC2NodeClass{class("gpu", c.role)})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %v, want an error containing %q", c.role, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.role, err)
		}
		want := []string{c.arn, "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo"}
		slices.Sort(want)
		if got := statementFor(t, r.ControllerDocument(), "iam:PassRole").Resource; !slices.Equal(got, want) {
			t.Errorf("%s: PassRole on %v, want %v", c.role, got, want)
		}
		if len(r.InstanceProfiles) != 1 || r.InstanceProfiles[0].Role != "GPUNodeRole" {
			t.Errorf("%s: instance profiles %+v, want one holding GPUNodeRole by name", c.role, r.InstanceProfiles)
		}
	}
}

// A role of another account is passed only when its account is allowed, by its exact ARN, and
// karpool makes neither the role nor an instance profile for it.
func TestRoleOfAnAllowedAccount(t *testing.T) {
	s := settings
	s.AllowedAccounts = []string{"444455556666"}
	const foreign = "arn:aws:iam::444455556666:role/nodes/GPUNodeRole"
	r, err := Render(s, []awsv1.EC2NodeClass{class("gpu", foreign)})
	if err != nil {
		t.Fatal(err)
	}
	doc := r.ControllerDocument()
	if !passes(doc, foreign) || passes(doc, "arn:aws:iam::111122223333:role/GPUNodeRole") || passes(doc, "arn:aws:iam::111122223333:role/nodes/GPUNodeRole") {
		t.Errorf("PassRole on %v: want the foreign ARN, and not the role of the same name in this account", statementFor(t, doc, "iam:PassRole").Resource)
	}
	if len(r.NodeRoles) != 1 || r.NodeRoles[0].Name != "KarpenterNodeRole-demo" || len(r.InstanceProfiles) != 0 {
		t.Errorf("node roles %+v, instance profiles %+v: want neither for the foreign role", r.NodeRoles, r.InstanceProfiles)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "EC2NodeClass gpu spec.role "+foreign+" is a role of account 444455556666 (allowed)") {
		t.Errorf("warnings %v", r.Warnings)
	}
	// Allowing an account does not allow a partition.
	if _, err := Render(s, []awsv1.EC2NodeClass{class("gpu", "arn:aws-cn:iam::444455556666:role/GPUNodeRole")}); err == nil || !strings.Contains(err.Error(), "partition aws-cn") {
		t.Errorf("a role of another partition: %v", err)
	}
}

// A role named with a path is made at that path, which its ARN includes; a role is at one path.
func TestRolePaths(t *testing.T) {
	r, err := Render(settings, []awsv1.EC2NodeClass{class("gpu", "team/GPUNodeRole")})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(r.NodeRoles, func(r Role) bool { return r.Name == "GPUNodeRole" }); i < 0 || r.NodeRoles[i].Path != "/team/" {
		t.Errorf("node roles %+v, want GPUNodeRole at /team/", r.NodeRoles)
	}
	tf, err := TerraformJSON(r)
	if err != nil || !strings.Contains(string(tf), `"path": "/team/"`) {
		t.Errorf("terraform (%v) lacks the role's path:\n%s", err, tf)
	}
	cfn, err := CloudFormation(settings, []awsv1.EC2NodeClass{class("gpu", "team/GPUNodeRole")})
	if err != nil || !strings.Contains(string(cfn), "Path: /team/\n      RoleName: GPUNodeRole") {
		t.Errorf("cloudformation (%v) lacks the role's path:\n%s", err, cfn)
	}
	_, err = Render(settings, []awsv1.EC2NodeClass{class("a", "a/GPUNodeRole"), class("b", "b/GPUNodeRole")})
	if err == nil || !strings.Contains(err.Error(), "EC2NodeClass a spec.role names role GPUNodeRole at path /a/, and EC2NodeClass b spec.role at path /b/, but a role has one path") {
		t.Errorf("one role at two paths: %v", err)
	}
}

func TestNameSettingsErrors(t *testing.T) {
	for _, c := range []struct {
		change func(*Settings)
		want   string
	}{
		{func(s *Settings) { s.InterruptionQueue = "*" }, `interruption queue "*" (--interruption-queue, PoolSync spec.aws.interruptionQueue; default the cluster name) is not an SQS queue name`},
		{func(s *Settings) { s.InterruptionQueue = "q${AWS::AccountId}" }, "is not an SQS queue name"},
		{func(s *Settings) { s.InterruptionQueue = strings.Repeat("q", 76) + ".fifo" }, "is not an SQS queue name"},
		{func(s *Settings) { s.NodeRole = "Nodes*" }, `node role (--node-role, PoolSync spec.aws.nodeRole; default KarpenterNodeRole-<cluster>) "Nodes*" is not an IAM role`},
		{func(s *Settings) { s.ClusterName = strings.Repeat("c", 50) }, `default KarpenterNodeRole-<cluster>) "KarpenterNodeRole-ccc`},
		{func(s *Settings) { s.InstanceProfileRoles = []string{"arn:aws:iam::444455556666:role/P"} }, "instance profile role (--instance-profile-role) \"arn:aws:iam::444455556666:role/P\" is a role of account 444455556666"},
		{func(s *Settings) { s.AllowedAccounts = []string{"*"} }, `allowed account "*" (--allow-account, PoolSync spec.aws.allowedAccounts) is not an account ID`},
		{func(s *Settings) { s.Subnets = []string{"subnet-1${x}"} }, `subnet (--subnet) "subnet-1${x}" is not a subnet ID`},
		{func(s *Settings) { s.SecurityGroups = []string{"sg-*"} }, `security group (--security-group) "sg-*" is not a security group ID`},
		{func(s *Settings) { s.OIDCIssuer = "https://oidc.example/${x}" }, `OIDC issuer "https://oidc.example/${x}"`},
	} {
		s := settings
		c.change(&s)
		if _, err := Render(s, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	s := settings
	s.InterruptionQueue = strings.Repeat("q", 75) + ".fifo"
	if _, err := Render(s, nil); err != nil {
		t.Errorf("a FIFO queue of 80 characters: %v", err)
	}
	nc := class("gpu", "GPUNodeRole")
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-1 ${x}"}}
	if _, err := Render(settings, []awsv1.EC2NodeClass{nc}); err == nil || !strings.Contains(err.Error(), `EC2NodeClass gpu spec.subnetSelectorTerms id "subnet-1 ${x}" is not a subnet ID`) {
		t.Errorf("a class's subnet: %v", err)
	}
}

// An instance profile name Karpenter cannot use is a warning, quoted, not an error: it reaches no
// policy and no resource karpool renders.
func TestInstanceProfileNames(t *testing.T) {
	nc := class("byo", "")
	nc.Spec.InstanceProfile = new("${aws_iam_instance_profile.nodes.name}")
	r, err := Render(settings, []awsv1.EC2NodeClass{nc})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `EC2NodeClass byo spec.instanceProfile "${aws_iam_instance_profile.nodes.name}" is not an instance profile name`) {
		t.Errorf("warnings %v", r.Warnings)
	}
}

// ControllerPolicy cannot return an error: what Render would refuse it leaves out, and from
// settings Render would refuse it allows nothing.
func TestControllerPolicyFailsClosed(t *testing.T) {
	doc := ControllerPolicy(settings, []string{"*", "arn:aws:iam::444455556666:role/X", "GPUNodeRole"})
	if got := statementFor(t, doc, "iam:PassRole").Resource; !slices.Equal(got, []string{"arn:aws:iam::111122223333:role/GPUNodeRole"}) {
		t.Errorf("PassRole on %v", got)
	}
	// With no role left there is no PassRole statement: one without resources would pass any.
	doc = ControllerPolicy(settings, []string{"*"})
	if passes(doc, "arn:aws:iam::111122223333:role/Admin") || slices.ContainsFunc(doc.Statement, func(st iampolicy.Statement) bool { return len(st.Resource) == 0 }) {
		t.Errorf("a policy without node roles passes roles:\n%s", doc.JSON())
	}
	s := settings
	s.InterruptionQueue = "*"
	if doc := ControllerPolicy(s, []string{"GPUNodeRole"}); len(doc.Statement) != 0 {
		t.Errorf("settings with a wildcard queue: %s", doc.JSON())
	}
}

// Input that holds what the template uses in place of the cluster name or account, or ${, stays
// literal: nothing but the cluster name and account becomes a substitution.
func TestCloudFormationKeepsInputLiteral(t *testing.T) {
	out, err := CloudFormation(settings, []awsv1.EC2NodeClass{class("a", clusterSentinels[0]+"-nodes"), class("b", "r"+accountSentinels[0])})
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct{ Properties map[string]any }
	}
	if err := yaml.Unmarshal(out, &tpl); err != nil {
		t.Fatal(err)
	}
	policy := tpl.Resources["KarpenterControllerIAMIntegrationPolicy"].Properties["PolicyDocument"].(map[string]any)["Fn::Sub"].(string)
	for _, want := range []string{`arn:aws:iam::${AWS::AccountId}:role/KarpoolClusterNameSentinelA-nodes"`, `arn:aws:iam::${AWS::AccountId}:role/r999999999999"`,
		`arn:aws:iam::${AWS::AccountId}:role/KarpenterNodeRole-${ClusterName}"`} {
		if !strings.Contains(policy, want) {
			t.Errorf("the controller policy lacks %s:\n%s", want, policy)
		}
	}

	got, err := substitution("p", "a${X}%"+clusterSentinels[0]+"$"+accountSentinels[0], "a${X}%"+clusterSentinels[1]+"$"+accountSentinels[1])
	if want := map[string]any{"Fn::Sub": "a${!X}%${ClusterName}$${AWS::AccountId}"}; err != nil || !equalJSON(got, want) {
		t.Errorf("substitution = %v, %v; want %v", got, err, want)
	}
	if _, err := substitution("p", "a-"+clusterSentinels[0], "b-"+clusterSentinels[1]); err == nil {
		t.Error("strings that differ beyond the sentinels became a substitution")
	}

	// An allowed account that is a sentinel: refused, not parameterised.
	s := settings
	s.AllowedAccounts = []string{accountSentinels[1]}
	_, err = CloudFormation(s, []awsv1.EC2NodeClass{class("a", "arn:aws:iam::"+accountSentinels[1]+":role/X")})
	if err == nil || !strings.Contains(err.Error(), "render --format terraform-json or json instead") {
		t.Errorf("a role of the sentinel account: %v", err)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Terraform reads every string of a *.tf.json file, and the keys of its maps, as a template:
// the EC2NodeClasses' tags are escaped, karpool's references are not.
func TestTerraformKeepsInputLiteral(t *testing.T) {
	nc := class("gpu", "GPUNodeRole")
	nc.Spec.Tags = map[string]string{"${var.k}": `${file("/etc/passwd")}`, "t": "%{ if true }x%{ endif }"}
	r, err := Render(settings, []awsv1.EC2NodeClass{nc})
	if err != nil {
		t.Fatal(err)
	}
	out, err := TerraformJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Resource map[string]map[string]map[string]any
	}
	if err := json.Unmarshal(out, &tf); err != nil {
		t.Fatal(err)
	}
	tags := tf.Resource["aws_iam_instance_profile"]["gpu"]["tags"].(map[string]any)
	if tags["$${var.k}"] != `$${file("/etc/passwd")}` || tags["t"] != "%%{ if true }x%%{ endif }" {
		t.Errorf("instance profile tags %v", tags)
	}
	if got := tf.Resource["aws_iam_role_policy_attachment"]["controller_karpentercontrolleriamintegrationpolicy_demo"]["policy_arn"]; got != "${aws_iam_policy.controller_iamintegration.arn}" {
		t.Errorf("the controller policy attachment refers to %v", got)
	}
}
