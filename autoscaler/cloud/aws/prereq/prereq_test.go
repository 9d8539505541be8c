package prereq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/iampolicy"
)

var settings = Settings{ClusterName: "demo", Region: "us-east-1", AccountID: "111122223333",
	OIDCIssuer: "https://oidc.eks.us-east-1.amazonaws.com/id/ABC123"}

func class(name, role string) awsv1.EC2NodeClass {
	nc := awsv1.EC2NodeClass{}
	nc.Name = name
	nc.Spec.Role = role
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{DiscoveryTag: "demo"}}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0123"}}
	return nc
}

func TestRenderFromClasses(t *testing.T) {
	byProfile := class("byo", "")
	byProfile.Spec.InstanceProfile = ptr.To("existing")
	gpu := class("gpu", "GPUNodeRole")
	gpu.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}}
	r, err := Render(settings, []awsv1.EC2NodeClass{gpu, class("default", "KarpenterNodeRole-demo"), byProfile})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, role := range r.NodeRoles {
		roles = append(roles, role.Name)
		if len(role.ManagedPolicyARNs) != 4 || role.Trust.Statement[0].Principal.Service[0] != "ec2.amazonaws.com" {
			t.Errorf("node role %s: policies %v, trust %s", role.Name, role.ManagedPolicyARNs, role.Trust.JSON())
		}
	}
	if got := strings.Join(roles, " "); got != "GPUNodeRole KarpenterNodeRole-demo" {
		t.Errorf("node roles %s", got)
	}
	// Profiles only for the classes with spec.role, named as the provider names them.
	if len(r.InstanceProfiles) != 2 || r.InstanceProfiles[0].NodeClass != "default" || r.InstanceProfiles[1].Role != "GPUNodeRole" {
		t.Fatalf("instance profiles %+v", r.InstanceProfiles)
	}
	p := r.InstanceProfiles[0]
	if p.Name != InstanceProfileName("demo", "us-east-1", "default") || p.Tags["kubernetes.io/cluster/demo"] != "owned" || p.Tags[TagNodeClass] != "default" || p.Tags[OwnerTag] != "demo" {
		t.Errorf("profile %+v", p)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `EC2NodeClass byo uses instance profile "existing"`) {
		t.Errorf("warnings %v", r.Warnings)
	}
	if r.Queue.Name != "demo" || r.Queue.RetentionSeconds != 300 || !r.Queue.ManagedSSE {
		t.Errorf("queue %+v", r.Queue)
	}
	if len(r.Rules) != 4 {
		t.Fatalf("%d rules, want 4", len(r.Rules))
	}
	for _, rule := range r.Rules {
		var pattern map[string][]string
		if err := json.Unmarshal([]byte(rule.Pattern), &pattern); err != nil || len(pattern["source"]) != 1 || rule.TargetQueue != "arn:aws:sqs:us-east-1:111122223333:demo" {
			t.Errorf("rule %+v: %v", rule, err)
		}
	}
	var tagged []string
	for _, tag := range r.DiscoveryTags {
		tagged = append(tagged, tag.ResourceID+"="+tag.Value)
	}
	if got := strings.Join(tagged, " "); got != "sg-0123=demo subnet-1=demo" {
		t.Errorf("discovery tags %s", got)
	}
	if len(r.NodeAccess) != 2 || r.NodeAccess[1].RoleARN != "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo" || r.NodeAccess[1].EntryType != "EC2_LINUX" {
		t.Errorf("node access %+v", r.NodeAccess)
	}
}

// The controller role trusts only the controller's service account, through IRSA or Pod
// Identity.
func TestControllerTrust(t *testing.T) {
	r, err := Render(settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	assume := iampolicy.Request{Action: "sts:AssumeRoleWithWebIdentity", Context: map[string][]string{
		"oidc.eks.us-east-1.amazonaws.com/id/ABC123:aud": {"sts.amazonaws.com"},
		"oidc.eks.us-east-1.amazonaws.com/id/ABC123:sub": {"system:serviceaccount:karpool-system:karpool"},
	}}
	if d := iampolicy.Decide(assume, r.ControllerRole.Trust); !d.Allowed {
		t.Errorf("the controller's service account cannot assume the role: %s", d.Reason)
	}
	assume.Context["oidc.eks.us-east-1.amazonaws.com/id/ABC123:sub"] = []string{"system:serviceaccount:default:default"}
	if d := iampolicy.Decide(assume, r.ControllerRole.Trust); d.Allowed {
		t.Error("another service account can assume the controller role")
	}
	if got := r.ControllerRole.Trust.Statement[0].Principal.Federated[0]; got != "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC123" {
		t.Errorf("federated principal %s", got)
	}

	pi := settings
	pi.OIDCIssuer, pi.PodIdentity, pi.NodeAccess = "", true, AWSAuth
	r, err = Render(pi, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.PodIdentity == nil || r.PodIdentity.RoleARN != "arn:aws:iam::111122223333:role/demo-karpenter" || r.ControllerRole.Trust.Statement[0].Principal.Service[0] != "pods.eks.amazonaws.com" {
		t.Errorf("pod identity %+v, trust %s", r.PodIdentity, r.ControllerRole.Trust.JSON())
	}
	if a := r.NodeAccess[0]; a.Mode != AWSAuth || a.Username != "system:node:{{EC2PrivateDNSName}}" || !slices.Equal(a.Groups, []string{"system:bootstrappers", "system:nodes"}) {
		t.Errorf("aws-auth entry %+v", a)
	}
}

func TestSettingsErrors(t *testing.T) {
	for _, c := range []struct {
		change func(*Settings)
		want   string
	}{
		{func(s *Settings) { s.ClusterName = "" }, `cluster name ""`},
		{func(s *Settings) { s.Region = "useast1" }, `region "useast1"`},
		{func(s *Settings) { s.AccountID = "1234" }, `account ID "1234": 12 digits`},
		{func(s *Settings) { s.PodIdentity = true }, "exactly one"},
		{func(s *Settings) { s.OIDCIssuer = "" }, "exactly one"},
		{func(s *Settings) { s.OIDCIssuer = "oidc.example" }, `OIDC issuer "oidc.example"`},
		{func(s *Settings) { s.NodeAccess = "configmap" }, `node access "configmap"`},
	} {
		s := settings
		c.change(&s)
		if _, err := Render(s, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}

// The policy's least-privilege properties, as the issue states them.
func TestControllerPolicyIsScoped(t *testing.T) {
	doc := ControllerPolicy(settings, []string{"KarpenterNodeRole-demo", "GPUNodeRole"})
	reads := append(slices.Clone(regionalReads), globalReads...)
	for _, st := range doc.Statement {
		if slices.Contains(st.Resource, "*") {
			for _, a := range st.Action {
				verb := a[strings.Index(a, ":")+1:]
				if !slices.Contains(reads, a) || !(strings.HasPrefix(verb, "Describe") || strings.HasPrefix(verb, "Get") || strings.HasPrefix(verb, "List")) {
					t.Errorf("statement %s allows %s on every resource", st.Sid, a)
				}
			}
		}
		for _, a := range st.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s has a wildcard action %s", st.Sid, a)
			}
		}
	}
	pass := statementFor(t, doc, "iam:PassRole")
	if want := []string{"arn:aws:iam::111122223333:role/GPUNodeRole", "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo"}; !slices.Equal(pass.Resource, want) {
		t.Errorf("PassRole on %v, want exactly the node roles %v", pass.Resource, want)
	}
	term := statementFor(t, doc, "ec2:TerminateInstances")
	if term.Condition["StringLike"]["aws:ResourceTag/karpenter.sh/nodepool"] == nil || term.Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/demo"][0] != "owned" {
		t.Errorf("TerminateInstances is not conditioned on the nodepool and cluster tags: %+v", term.Condition)
	}
	if d := statementFor(t, doc, "eks:DescribeCluster"); !slices.Equal(d.Resource, []string{"arn:aws:eks:us-east-1:111122223333:cluster/demo"}) {
		t.Errorf("DescribeCluster on %v", d.Resource)
	}
	// IAM refuses managed policies over 6,144 characters, whitespace aside.
	n := 0
	for _, r := range doc.JSON() {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	if n > 6144 {
		t.Errorf("the controller policy has %d characters; IAM's limit for a managed policy is 6,144", n)
	}
}

func statementFor(t *testing.T, doc iampolicy.Document, action string) iampolicy.Statement {
	t.Helper()
	var found []iampolicy.Statement
	for _, st := range doc.Statement {
		if slices.Contains(st.Action, action) {
			found = append(found, st)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d statements allow %s, want 1", len(found), action)
	}
	return found[0]
}

func TestNamesFitAWSLimits(t *testing.T) {
	long := strings.Repeat("c", 100)
	if n := InstanceProfileName(long, "us-east-1", "default"); len(n) > 128 || !strings.HasPrefix(n, long+"_") {
		t.Errorf("instance profile name %q (%d)", n, len(n))
	}
	for _, kind := range []string{"scheduled-change", "instance-state-change"} {
		if n := RuleName(long, kind); len(n) > 64 || !strings.HasSuffix(n, "-"+kind) {
			t.Errorf("rule name %q (%d)", n, len(n))
		}
		if RuleName(long, kind) == RuleName(long[:99]+"d", kind) {
			t.Errorf("two long cluster names share rule name %s", RuleName(long, kind))
		}
	}
	if n := controllerRoleName(long); len(n) > 64 {
		t.Errorf("controller role %q", n)
	}
}

// The template holds the resources seed 001's stack lists, parameterised by the cluster name.
func TestCloudFormation(t *testing.T) {
	out, err := CloudFormation(settings, []awsv1.EC2NodeClass{class("default", "KarpenterNodeRole-demo"), class("gpu-nodes", "GPUNodeRole")})
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Parameters map[string]map[string]any
		Resources  map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := yaml.Unmarshal(out, &tpl); err != nil {
		t.Fatalf("the template does not parse: %v\n%s", err, out)
	}
	for id, typ := range map[string]string{
		"InstanceStateChangeRule": "AWS::Events::Rule", "KarpenterControllerNodeLifecyclePolicy": "AWS::IAM::ManagedPolicy",
		"KarpenterControllerIAMIntegrationPolicy": "AWS::IAM::ManagedPolicy", "KarpenterControllerEKSIntegrationPolicy": "AWS::IAM::ManagedPolicy",
		"KarpenterControllerInterruptionPolicy": "AWS::IAM::ManagedPolicy", "KarpenterControllerResourceDiscoveryPolicy": "AWS::IAM::ManagedPolicy",
		"KarpenterInterruptionQueue": "AWS::SQS::Queue", "KarpenterInterruptionQueuePolicy": "AWS::SQS::QueuePolicy",
		"KarpenterNodeRole": "AWS::IAM::Role", "RebalanceRule": "AWS::Events::Rule", "ScheduledChangeRule": "AWS::Events::Rule",
		"SpotInterruptionRule": "AWS::Events::Rule",
		// and karpool's additions
		"KarpenterControllerRole": "AWS::IAM::Role", "NodeRoleGPUNodeRole": "AWS::IAM::Role", "InstanceProfileGpuNodes": "AWS::IAM::InstanceProfile",
		"NodeAccessEntry1": "AWS::EKS::AccessEntry",
	} {
		if got := tpl.Resources[id].Type; got != typ {
			t.Errorf("resource %s is %q, want %s", id, got, typ)
		}
	}
	if tpl.Parameters["ClusterName"]["Default"] != "demo" {
		t.Errorf("parameters %v", tpl.Parameters)
	}
	text := string(out)
	if strings.Contains(text, "Sentinel") || strings.Contains(text, "99999999999") || strings.Contains(text, "demo-karpenter") {
		t.Errorf("the template names the cluster or account literally:\n%s", text)
	}
	for id, want := range map[string]string{
		"KarpenterControllerNodeLifecyclePolicy":  `"aws:ResourceTag/kubernetes.io/cluster/${ClusterName}": "owned"`,
		"KarpenterControllerIAMIntegrationPolicy": `arn:aws:iam::${AWS::AccountId}:role/KarpenterNodeRole-${ClusterName}`,
	} {
		policy := tpl.Resources[id].Properties["PolicyDocument"].(map[string]any)["Fn::Sub"].(string)
		if !strings.Contains(policy, want) {
			t.Errorf("%s lacks %s:\n%s", id, want, policy)
		}
	}
	if role := tpl.Resources["KarpenterControllerRole"].Properties["RoleName"]; role.(map[string]any)["Fn::Sub"] != "${ClusterName}-karpenter" {
		t.Errorf("controller role name %v", role)
	}
}

func TestTerraformJSON(t *testing.T) {
	r, err := Render(settings, []awsv1.EC2NodeClass{class("default", "KarpenterNodeRole-demo")})
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
	for typ, n := range map[string]int{"aws_iam_role": 2, "aws_iam_role_policy_attachment": 9, "aws_iam_policy": 5, "aws_iam_instance_profile": 1,
		"aws_sqs_queue": 1, "aws_sqs_queue_policy": 1, "aws_cloudwatch_event_rule": 4, "aws_cloudwatch_event_target": 4,
		"aws_eks_access_entry": 1, "aws_ec2_tag": 1, "aws_iam_service_linked_role": 1} {
		if got := len(tf.Resource[typ]); got != n {
			t.Errorf("%d %s, want %d", got, typ, n)
		}
	}
	if got := tf.Resource["aws_iam_role_policy_attachment"]["controller_karpentercontrolleriamintegrationpolicy_demo"]["policy_arn"]; got != "${aws_iam_policy.controller_iamintegration.arn}" {
		t.Errorf("the controller policy attachment refers to %v", got)
	}
	if got := tf.Resource["aws_cloudwatch_event_target"]["spot_interruption"]["arn"]; got != "${aws_sqs_queue.interruption.arn}" {
		t.Errorf("spot interruption target %v", got)
	}
}

// The controller's permissions come as Karpenter's five managed policies since v1.9; split so,
// each fits IAM's limits even for a 100-character cluster name (EKS's longest) and twenty node
// roles of 64 characters, where one document would not.
func TestControllerPoliciesFitIAM(t *testing.T) {
	s := settings
	s.ClusterName = strings.Repeat("c", 100)
	s.Region, s.InterruptionQueue, s.NodeRole = "ap-northeast-2", strings.Repeat("q", 80), strings.Repeat("n", 64)
	var classes []awsv1.EC2NodeClass
	for i := range 20 {
		classes = append(classes, class(fmt.Sprintf("class-%d", i), fmt.Sprintf("%02d%s", i, strings.Repeat("r", 62))))
	}
	r, err := Render(s, classes)
	if err != nil {
		t.Fatal(err)
	}
	var concerns []string
	for _, p := range r.ControllerPolicies {
		concerns = append(concerns, p.Concern)
		if n := p.Document.Chars(); n > MaxPolicyChars || len(p.Name) > 128 {
			t.Errorf("%s: %d characters (IAM allows %d), a name of %d (128)", p.Name, n, MaxPolicyChars, len(p.Name))
		}
	}
	want := []string{ConcernNodeLifecycle, ConcernIAMIntegration, ConcernEKSIntegration, ConcernInterruption, ConcernResourceDiscovery}
	if !slices.Equal(concerns, want) || len(r.ControllerRole.ManagedPolicyARNs) != len(want) {
		t.Errorf("policies %v attached as %v, want %v", concerns, r.ControllerRole.ManagedPolicyARNs, want)
	}
	if n := r.ControllerDocument().Chars(); n <= MaxPolicyChars {
		t.Errorf("all statements in one document take %d characters: the case does not need the split", n)
	}
}
