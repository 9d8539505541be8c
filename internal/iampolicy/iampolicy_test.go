package iampolicy

import (
	"strings"
	"testing"
)

// A launch-template statement shaped like Karpenter's: tags on the resource, a wildcard ARN.
var lt = Document{Version: Version, Statement: []Statement{{
	Sid:      "LaunchTemplates",
	Effect:   Allow,
	Action:   Strings{"ec2:RunInstances", "ec2:CreateFleet"},
	Resource: Strings{"arn:aws:ec2:us-east-1:*:launch-template/*"},
	Condition: Conditions{
		"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": {"owned"}},
		"StringLike":   {"aws:ResourceTag/karpenter.sh/nodepool": {"*"}},
	},
}}}

func TestDecideConditions(t *testing.T) {
	arn := "arn:aws:ec2:us-east-1:111122223333:launch-template/lt-1"
	owned := map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/demo": {"owned"}, "aws:ResourceTag/karpenter.sh/nodepool": {"default"}}
	cases := []struct {
		name   string
		r      Request
		allow  bool
		reason string
	}{
		{"tagged", Request{"ec2:CreateFleet", arn, owned}, true, ""},
		{"action case is ignored", Request{"EC2:createfleet", arn, owned}, true, ""},
		{"other cluster", Request{"ec2:CreateFleet", arn, map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/demo": {"shared"}, "aws:ResourceTag/karpenter.sh/nodepool": {"x"}}},
			false, "statement LaunchTemplates: StringEquals aws:ResourceTag/kubernetes.io/cluster/demo [owned]: the request has [shared]"},
		{"untagged", Request{"ec2:CreateFleet", arn, nil}, false, "the request has no aws:ResourceTag/kubernetes.io/cluster/demo"},
		{"other region", Request{"ec2:CreateFleet", "arn:aws:ec2:eu-west-1:1:launch-template/lt-1", owned}, false, "no statement allows ec2:CreateFleet on arn:aws:ec2:eu-west-1"},
		{"other action", Request{"ec2:TerminateInstances", arn, owned}, false, "no statement allows"},
	}
	for _, c := range cases {
		d := Decide(c.r, lt)
		if d.Allowed != c.allow || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%s: allowed %v (%s), want %v with a reason containing %q", c.name, d.Allowed, d.Reason, c.allow, c.reason)
		}
		if d.Allowed && d.Sid != "LaunchTemplates" {
			t.Errorf("%s: decided by %q", c.name, d.Sid)
		}
	}
}

func TestDecideOperators(t *testing.T) {
	cases := []struct {
		op     string
		policy Strings
		got    []string // nil: the key is absent
		want   bool
	}{
		{"StringEquals", Strings{"a", "b"}, []string{"b"}, true},
		{"StringEquals", Strings{"a"}, nil, false},
		{"StringEqualsIfExists", Strings{"a"}, nil, true},
		{"StringEqualsIfExists", Strings{"a"}, []string{"c"}, false},
		{"StringNotEquals", Strings{"a", "b"}, []string{"c"}, true},
		{"StringNotEquals", Strings{"a", "b"}, []string{"b"}, false},
		{"StringNotEquals", Strings{"a"}, nil, true},
		{"StringLike", Strings{"arn:*:role/x-*"}, []string{"arn:aws:iam::1:role/x-y/z"}, true},
		{"StringLike", Strings{"a?c"}, []string{"abbc"}, false},
		{"ForAllValues:StringEquals", Strings{"Name", "karpenter.sh/nodeclaim"}, []string{"Name"}, true},
		{"ForAllValues:StringEquals", Strings{"Name"}, []string{"Name", "owner"}, false},
		{"ForAllValues:StringEquals", Strings{"Name"}, nil, true},
		{"ForAnyValue:StringEquals", Strings{"Name"}, []string{"x", "Name"}, true},
		{"ForAnyValue:StringEquals", Strings{"Name"}, nil, false},
		{"Bool", Strings{"false"}, []string{"False"}, true},
		{"Null", Strings{"true"}, nil, true},
		{"Null", Strings{"true"}, []string{"x"}, false},
		{"Null", Strings{"false"}, []string{"x"}, true},
		{"ArnLike", Strings{"arn:aws:sqs:*:1:demo"}, []string{"arn:aws:sqs:us-east-1:1:demo"}, true},
	}
	for _, c := range cases {
		ctx := map[string][]string{}
		if c.got != nil {
			ctx["k"] = c.got
		}
		doc := Document{Version: Version, Statement: []Statement{{Effect: Allow, Action: Strings{"s:A"}, Resource: Strings{"*"},
			Condition: Conditions{c.op: {"k": c.policy}}}}}
		if got := Decide(Request{Action: "s:A", Resource: "r", Context: ctx}, doc).Allowed; got != c.want {
			t.Errorf("%s %v with %v: %v, want %v", c.op, c.policy, c.got, got, c.want)
		}
	}
}

// A resource policy's deny without TLS wins over its allow, as in the interruption queue's.
func TestExplicitDenyWins(t *testing.T) {
	doc := Document{Version: Version, Statement: []Statement{
		{Effect: Allow, Principal: &Principal{Service: Strings{"events.amazonaws.com"}}, Action: Strings{"sqs:SendMessage"}, Resource: Strings{"arn:q"}},
		{Sid: "DenyHTTP", Effect: Deny, Principal: &Principal{Anyone: true}, Action: Strings{"sqs:*"}, Resource: Strings{"arn:q"},
			Condition: Conditions{"Bool": {"aws:SecureTransport": {"false"}}}},
	}}
	if d := Decide(Request{"sqs:SendMessage", "arn:q", map[string][]string{"aws:SecureTransport": {"true"}}}, doc); !d.Allowed {
		t.Errorf("over TLS: %+v", d)
	}
	if d := Decide(Request{"sqs:SendMessage", "arn:q", map[string][]string{"aws:SecureTransport": {"false"}}}, doc); d.Allowed || d.Sid != "DenyHTTP" {
		t.Errorf("without TLS: %+v", d)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	doc := Document{Version: Version, ID: "q", Statement: []Statement{
		{Sid: "One", Effect: Allow, Principal: &Principal{Anyone: true}, Action: Strings{"sqs:SendMessage"}, Resource: Strings{"arn:q"}},
		{Effect: Allow, Principal: &Principal{Federated: Strings{"arn:aws:iam::1:oidc-provider/x"}}, Action: Strings{"sts:AssumeRoleWithWebIdentity"},
			Condition: Conditions{"StringEquals": {"x:aud": {"sts.amazonaws.com"}}}},
	}}
	text := doc.JSON()
	for _, want := range []string{`"Principal": "*"`, `"Action": "sqs:SendMessage"`, `"Federated": "arn:aws:iam::1:oidc-provider/x"`} {
		if !strings.Contains(text, want) {
			t.Errorf("JSON lacks %s:\n%s", want, text)
		}
	}
	back, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(doc, back) {
		t.Errorf("round trip changed the document:\n%s\n%s", text, back.JSON())
	}
	reordered := back
	reordered.Statement = append([]Statement(nil), back.Statement...)
	reordered.Statement[0].Action = Strings{"sqs:SendMessage"}
	reordered.Statement[1].Condition = Conditions{"StringEquals": {"x:aud": {"sts.amazonaws.com"}}}
	if !Equal(doc, reordered) {
		t.Error("equal documents compare unequal")
	}
	reordered.Statement[1].Condition = Conditions{"StringEquals": {"x:aud": {"other"}}}
	if Equal(doc, reordered) {
		t.Error("a changed condition compares equal")
	}
}

func TestParseErrors(t *testing.T) {
	for text, want := range map[string]string{
		`{"Version":"2012-10-17","Statement":[{"Effect":"Permit","Action":"s:A"}]}`:                                       `Statement[0].Effect is "Permit"`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow"}]}`:                                                       `Statement[0] has no Action`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s:A","Condition":{"DateLessThan":{"k":"v"}}}]}`: `condition operator "DateLessThan"`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","NotAction":"s:A"}]}`:                                     `unknown field "NotAction"`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":7}]}`:                                            `want a string or a list of strings`,
	} {
		if _, err := Parse(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", text, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(lt.JSON())
	f.Add(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":["sqs:*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`)
	f.Fuzz(func(t *testing.T, text string) {
		d, err := Parse(text)
		if err != nil {
			return
		}
		// What parses encodes and parses again to the same document, and can be decided.
		back, err := Parse(d.JSON())
		if err != nil || !Equal(d, back) {
			t.Fatalf("re-parse of %s: %v", d.JSON(), err)
		}
		Decide(Request{Action: "s:A", Resource: "r", Context: map[string][]string{"k": {"v"}}}, d)
	})
}
