package prereq

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/internal/iampolicy"
)

// The accounts of the generated inputs: the cluster's, one the settings may allow, and one they
// never allow.
const (
	homeAccount    = "111122223333"
	allowedAccount = "444455556666"
	otherAccount   = "777788889999"
)

// FuzzPolicyScoped renders generated settings and EC2NodeClasses, valid and hostile names mixed
// (wildcards, substitutions, the CloudFormation sentinels, ARNs of other accounts and
// partitions, paths, empty and overlong names, and the fuzzer's own word), and checks that
// Render refuses them or that every rendered document is scoped as ControllerPolicy says: "*"
// only for the read-only actions of regionalReads and globalReads, no other resource holding a
// wildcard or substitution that is not one of the policy's own patterns, iam:PassRole only on the
// exact ARNs of the roles named, in the cluster's partition and its account or an allowed one,
// SQS only on the queue's exact ARN. The CloudFormation template, evaluated for the cluster and
// account, and the Terraform configuration, read as Terraform reads it, must hold the same
// policies.
func FuzzPolicyScoped(f *testing.F) {
	for seed := range uint64(500) {
		f.Add(seed, "")
	}
	for _, word := range []string{"*", "?", "${AWS::AccountId}", "arn:aws:iam::" + otherAccount + ":role/Admin", clusterSentinels[0], accountSentinels[1], "%{x}"} {
		for seed := range uint64(20) {
			f.Add(seed, word)
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, word string) {
		g := &gen{r: rand.New(rand.NewPCG(seed, 0x5eed)), word: word}
		in := g.settings()
		classes := g.classes(in)
		classes = placeWord(seed, word, &in, classes)
		checkDocuments(t, in, classes)
		// ControllerPolicy on its own, with the raw roles: it fails closed.
		sc := scopeOf(in, classes)
		checkPolicy(t, "ControllerPolicy", ControllerPolicy(in, sc.named), sc)
	})
}

// placeWord puts the fuzzer's word once more where a name decides a resource of the policy.
func placeWord(seed uint64, word string, in *Settings, classes []awsv1.EC2NodeClass) []awsv1.EC2NodeClass {
	if word == "" {
		return classes
	}
	switch seed % 4 {
	case 0:
		in.InterruptionQueue = word
	case 1:
		in.NodeRole = word
	case 2:
		in.InstanceProfileRoles = append(in.InstanceProfileRoles, word)
	default:
		nc := awsv1.EC2NodeClass{}
		nc.Name, nc.Spec.Role = "word", word
		classes = append(classes, nc)
	}
	return classes
}

// gen generates inputs from a seeded source, and puts the fuzzer's word where names go. Each
// field is hostile now and then, so that some inputs pass and some do not.
type gen struct {
	r    *rand.Rand
	word string
}

// pick is one of the valid values, or now and then one of the hostile ones.
func (g *gen) pick(valid, hostile []string) string {
	if len(hostile) > 0 && g.r.IntN(10) == 0 {
		return hostile[g.r.IntN(len(hostile))]
	}
	return valid[g.r.IntN(len(valid))]
}

// name is a role, instance profile, queue or tag name. The valid ones include the strings the
// CloudFormation template stands for the cluster name and account with.
func (g *gen) name() string {
	return g.pick([]string{"NodeRole", "KarpenterNodeRole-demo", "a+b=c,d.e@f_g-h", "q_1-2", strings.Repeat("n", 64),
		clusterSentinels[0], accountSentinels[0], "r" + accountSentinels[1], g.word},
		[]string{"", "*", "Node*", "?", "Node?", "${AWS::AccountId}", "${ClusterName}", "x${AWS::Region}", "$${x}", "%{x}",
			strings.Repeat("n", 65), strings.Repeat("n", 300), "a b", "q.fifo"})
}

// role is a role as spec.role or a setting names it: a name, a path and name, or an ARN.
func (g *gen) role(s Settings) string {
	switch g.r.IntN(4) {
	case 0:
		return g.name()
	case 1:
		return g.pick([]string{"team/", "/team/", "a/b/", "/"}, []string{"*/", "${x}/", "//"}) + g.name()
	}
	partition := cmp.Or(s.Partition, "aws")
	return "arn:" + g.pick([]string{partition}, []string{"aws", "aws-cn", "aws-us-gov", "aws*", ""}) + ":iam::" +
		g.pick([]string{s.AccountID, s.AccountID, s.AccountID, allowedAccount, accountSentinels[1]}, []string{otherAccount, "*", "9999"}) + ":" +
		g.pick([]string{"role/", "role/team/"}, []string{"user/", "role/*/"}) + g.name()
}

func (g *gen) settings() Settings {
	s := Settings{
		ClusterName: g.pick([]string{"demo", "c-1_x", strings.Repeat("c", 46), clusterSentinels[1]}, []string{strings.Repeat("c", 100), "de*mo", "", g.word}),
		Region:      g.pick([]string{"us-east-1", "cn-north-1", "us-gov-west-1"}, []string{"us-east-1*"}),
		AccountID:   g.pick([]string{homeAccount, accountSentinels[0]}, []string{"*", ""}),
		Partition:   g.pick([]string{"", "aws", "aws-cn", "aws-us-gov"}, []string{"aws*"}),
		NodeAccess:  g.pick([]string{"", AccessEntry, AWSAuth}, nil),
	}
	if g.r.IntN(2) == 0 {
		s.PodIdentity = true
	} else {
		s.OIDCIssuer = g.pick([]string{"https://oidc.eks.us-east-1.amazonaws.com/id/ABC"}, []string{"https://oidc/${x}", "https://oidc/*"})
	}
	if g.r.IntN(2) == 0 {
		s.NodeRole = g.role(s)
	}
	for range g.r.IntN(3) {
		s.InstanceProfileRoles = append(s.InstanceProfileRoles, g.role(s))
	}
	for range g.r.IntN(3) {
		s.AllowedAccounts = append(s.AllowedAccounts, g.pick([]string{allowedAccount, accountSentinels[1]}, []string{"*", "1234"}))
	}
	if g.r.IntN(2) == 0 {
		s.InterruptionQueue = g.pick([]string{g.name(), "q.fifo"}, nil)
	}
	if g.r.IntN(3) == 0 {
		s.Subnets = []string{g.pick([]string{"subnet-0abc"}, []string{"subnet-1${x}", "subnet-*"})}
	}
	return s
}

func (g *gen) classes(s Settings) []awsv1.EC2NodeClass {
	var out []awsv1.EC2NodeClass
	for i := range g.r.IntN(4) {
		nc := awsv1.EC2NodeClass{}
		nc.Name = fmt.Sprintf("%s%d", g.pick([]string{"default", "gpu", "a.b"}, nil), i)
		if g.r.IntN(4) == 0 {
			nc.Spec.InstanceProfile = new(g.name())
		} else {
			nc.Spec.Role = g.role(s)
		}
		if g.r.IntN(2) == 0 {
			nc.Spec.Tags = map[string]string{g.name(): g.name()}
		}
		if g.r.IntN(3) == 0 {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: g.pick([]string{"subnet-0def"}, []string{"subnet-2${x}"})}}
		}
		out = append(out, nc)
	}
	return out
}

// scope is what the policies may name for the inputs, worked out from them as written rather
// than as the renderer reads them.
type scope struct {
	s     Settings // with the defaults
	named []string // the roles as named: node role, instance profile roles, classes' spec.role
	roles map[string]bool
}

func scopeOf(in Settings, classes []awsv1.EC2NodeClass) scope {
	sc := scope{s: in.withDefaults(), roles: map[string]bool{}}
	sc.named = append([]string{sc.s.NodeRole}, sc.s.InstanceProfileRoles...)
	for _, nc := range classes {
		if nc.Spec.Role != "" {
			sc.named = append(sc.named, nc.Spec.Role)
		}
	}
	for _, role := range sc.named {
		arn := role
		if !strings.HasPrefix(role, "arn:") {
			arn = fmt.Sprintf("arn:%s:iam::%s:role/%s", sc.s.Partition, sc.s.AccountID, strings.TrimPrefix(role, "/"))
		}
		sc.roles[arn] = true
	}
	return sc
}

func (sc scope) queueARN() string {
	return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", sc.s.Partition, sc.s.Region, sc.s.AccountID, sc.s.InterruptionQueue)
}

// wildcards are the controller policy's own patterns, which hold "*" by design: the EC2
// resources of any ID (of any account for shared images and snapshots), the cluster's instance
// profiles, which their tags scope, and AWS's public SSM parameters.
func (sc scope) wildcards() map[string]bool {
	p, r := sc.s.Partition, sc.s.Region
	out := map[string]bool{
		fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", p, sc.s.AccountID): true,
		fmt.Sprintf("arn:%s:ssm:%s::parameter/aws/service/*", p, r):         true,
	}
	for _, k := range []string{"image", "snapshot"} {
		out[fmt.Sprintf("arn:%s:ec2:%s::%s/*", p, r, k)] = true
	}
	for _, k := range []string{"security-group", "subnet", "capacity-reservation", "launch-template", "fleet", "instance",
		"volume", "network-interface", "spot-instances-request"} {
		out[fmt.Sprintf("arn:%s:ec2:%s:*:%s/*", p, r, k)] = true
	}
	return out
}

// checkPolicy checks an identity policy against the scope.
func checkPolicy(t *testing.T, what string, doc iampolicy.Document, sc scope) {
	t.Helper()
	if len(doc.Statement) == 0 {
		return // allows nothing
	}
	// The policy's own patterns are made of these.
	if s := sc.s; strings.ContainsAny(s.Partition+s.Region+s.AccountID, "*?$") {
		t.Fatalf("%s: a policy scoped by a partition, region or account that holds a wildcard or substitution: %+v", what, s)
	}
	every, wild := append(slices.Clone(regionalReads), globalReads...), sc.wildcards()
	for _, st := range doc.Statement {
		if len(st.Resource) == 0 {
			t.Errorf("%s: statement %s has no resource, which reads as every resource", what, st.Sid)
		}
		for _, res := range st.Resource {
			switch {
			case res == "*":
				for _, a := range st.Action {
					if !slices.Contains(every, a) {
						t.Errorf("%s: statement %s allows %s on every resource", what, st.Sid, a)
					}
				}
			case !wild[res] && strings.ContainsAny(res, "*?$"):
				t.Errorf("%s: statement %s names resource %q, which holds a wildcard or substitution", what, st.Sid, res)
			}
		}
		checkScopedActions(t, what, st, sc)
	}
	if iampolicy.Decide(iampolicy.Request{Action: "iam:PassRole", Resource: fmt.Sprintf("arn:%s:iam::%s:role/Admin", sc.s.Partition, sc.s.AccountID),
		Context: map[string][]string{"iam:PassedToService": {"ec2." + sc.s.urlSuffix()}}}, doc).Allowed && !sc.roles[fmt.Sprintf("arn:%s:iam::%s:role/Admin", sc.s.Partition, sc.s.AccountID)] {
		t.Errorf("%s: the controller may pass a role that is no node role", what)
	}
	if iampolicy.Decide(iampolicy.Request{Action: "sqs:ReceiveMessage", Resource: sc.queueARN() + "-other"}, doc).Allowed {
		t.Errorf("%s: the controller may read a queue other than %s", what, sc.queueARN())
	}
}

// checkScopedActions: iam:PassRole only on the roles named, of the partition and of the account
// or an allowed one; SQS only on the queue.
func checkScopedActions(t *testing.T, what string, st iampolicy.Statement, sc scope) {
	t.Helper()
	for _, a := range st.Action {
		switch {
		case a == "iam:PassRole":
			for _, res := range st.Resource {
				parts := strings.SplitN(res, ":", 6)
				if !sc.roles[res] || len(parts) != 6 || parts[1] != sc.s.Partition || (parts[4] != sc.s.AccountID && !slices.Contains(sc.s.AllowedAccounts, parts[4])) {
					t.Errorf("%s: the controller may pass %q; the roles named are %v, of partition %s and accounts %s and %v", what, res, sc.named,
						sc.s.Partition, sc.s.AccountID, sc.s.AllowedAccounts)
				}
			}
		case strings.HasPrefix(a, "sqs:"):
			if !slices.Equal(st.Resource, []string{sc.queueARN()}) {
				t.Errorf("%s: statement %s allows %s on %v, not only the queue %s", what, st.Sid, a, st.Resource, sc.queueARN())
			}
		}
	}
}

// checkDocuments renders the inputs every way and checks every document.
func checkDocuments(t *testing.T, in Settings, classes []awsv1.EC2NodeClass) {
	t.Helper()
	r, err := Render(in, classes)
	if err != nil {
		if _, err := CloudFormation(in, classes); err == nil {
			t.Errorf("CloudFormation renders what Render refuses: %+v %+v", in, classes)
		}
		return
	}
	sc := scopeOf(in, classes)
	checkPolicy(t, "Render", r.ControllerDocument(), sc)
	for _, p := range r.ControllerPolicies {
		if n := p.Document.Chars(); n > MaxPolicyChars {
			t.Errorf("controller policy %s has %d characters, past IAM's %d", p.Name, n, MaxPolicyChars)
		}
	}
	for _, st := range r.Queue.Policy.Statement {
		if !slices.Equal(st.Resource, []string{sc.queueARN()}) {
			t.Errorf("queue policy statement %s on %v, not only the queue %s", st.Sid, st.Resource, sc.queueARN())
		}
	}
	for _, role := range append(r.NodeRoles, r.ControllerRole) {
		if text := role.Trust.JSON(); strings.ContainsAny(text, "*?$") {
			t.Errorf("the trust policy of role %s holds a wildcard or substitution:\n%s", role.Name, text)
		}
	}
	checkCloudFormation(t, in, classes, r)
	checkTerraform(t, r)
}

// checkCloudFormation evaluates the template's Fn::Sub for the cluster and account, as
// CloudFormation does with the default parameters, and compares its policies with Render's.
func checkCloudFormation(t *testing.T, in Settings, classes []awsv1.EC2NodeClass, r *Resources) {
	t.Helper()
	out, err := CloudFormation(in, classes)
	if err != nil {
		if !strings.Contains(err.Error(), "cannot parameterise") {
			t.Errorf("CloudFormation refuses what Render renders: %v", err)
		}
		return // refused: the input holds a sentinel where the template would need it
	}
	var tpl map[string]any
	if err := yaml.Unmarshal(out, &tpl); err != nil {
		t.Fatal(err)
	}
	evaluated := evaluateSub(t, tpl, r.Settings.ClusterName, r.Settings.AccountID).(map[string]any)
	props := func(id string) map[string]any {
		return evaluated["Resources"].(map[string]any)[id].(map[string]any)["Properties"].(map[string]any)
	}
	for _, p := range r.ControllerPolicies {
		policy, err := iampolicy.Parse(props(p.ID())["PolicyDocument"].(string))
		if err != nil || !iampolicy.Equal(policy, p.Document) {
			t.Errorf("the template's controller policy %s (%v) is not Render's:\n%s\nwant:\n%s", p.Name, err, policy.JSON(), p.Document.JSON())
		}
	}
	raw, _ := json.Marshal(props("KarpenterInterruptionQueuePolicy")["PolicyDocument"])
	if queue, err := iampolicy.Parse(string(raw)); err != nil || !iampolicy.Equal(queue, r.Queue.Policy) {
		t.Errorf("the template's queue policy (%v) is not Render's:\n%s", err, raw)
	}
}

// cfnVariable is a substitution in an Fn::Sub string; ${!X} is the literal ${X}.
var cfnVariable = regexp.MustCompile(`\$\{!?[^}]*\}`)

// evaluateSub replaces every Fn::Sub by its value, failing on any variable but the cluster name
// parameter and the account.
func evaluateSub(t *testing.T, v any, cluster, account string) any {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		if sub, ok := x["Fn::Sub"].(string); ok && len(x) == 1 {
			return cfnVariable.ReplaceAllStringFunc(sub, func(m string) string {
				switch m {
				case "${ClusterName}":
					return cluster
				case "${AWS::AccountId}":
					return account
				}
				if strings.HasPrefix(m, "${!") {
					return "${" + m[3:]
				}
				t.Errorf("the template substitutes %s", m)
				return m
			})
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = evaluateSub(t, e, cluster, account)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = evaluateSub(t, e, cluster, account)
		}
		return out
	}
	return v
}

// tfReference is a reference karpool writes into the Terraform configuration.
var tfReference = regexp.MustCompile(`^\$\{aws_[a-z_]+\.[a-z0-9_]+\.(name|arn|id)\}$`)

// checkTerraform reads the configuration as Terraform would: every string and map key is a
// template, in which only karpool's references may interpolate; its policy is Render's.
func checkTerraform(t *testing.T, r *Resources) {
	t.Helper()
	out, err := TerraformJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	var tf any
	if err := json.Unmarshal(out, &tf); err != nil {
		t.Fatal(err)
	}
	unescape := strings.NewReplacer("$${", "${", "%%{", "%{")
	var walk func(v any)
	check := func(s string) {
		if rest := strings.NewReplacer("$${", "", "%%{", "").Replace(s); (strings.Contains(rest, "${") && !tfReference.MatchString(s)) || strings.Contains(rest, "%{") {
			t.Errorf("Terraform would interpolate %q", s)
		}
	}
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			check(x)
		case map[string]any:
			for k, e := range x {
				check(k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(tf)
	policies := tf.(map[string]any)["resource"].(map[string]any)["aws_iam_policy"].(map[string]any)
	if len(policies) != len(r.ControllerPolicies) {
		t.Errorf("%d Terraform policies, want %d", len(policies), len(r.ControllerPolicies))
	}
	for _, p := range r.ControllerPolicies {
		res := "controller_" + tfName(p.Concern)
		text, _ := policies[res].(map[string]any)["policy"].(string)
		if policy, err := iampolicy.Parse(unescape.Replace(text)); err != nil || !iampolicy.Equal(policy, p.Document) {
			t.Errorf("the Terraform controller policy %s (%v) is not Render's:\n%s", res, err, text)
		}
	}
}
