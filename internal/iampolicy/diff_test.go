package iampolicy

import (
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	have := Document{Version: "2012-10-17", Statement: []Statement{
		{Sid: "PassNodeRole", Effect: Allow, Action: Strings{"iam:PassRole"}, Resource: Strings{"arn:aws:iam::1:role/A", "arn:aws:iam::1:role/B"}},
		{Sid: "Old", Effect: Allow, Action: Strings{"ec2:DescribeImages"}, Resource: Strings{"*"}},
		{Effect: Allow, Principal: &Principal{Federated: Strings{"arn:oidc/ONE"}}, Action: Strings{"sts:AssumeRoleWithWebIdentity"},
			Condition: Conditions{"StringEquals": {"oidc/ONE:aud": {"sts.amazonaws.com"}}}},
	}}
	want := Document{Version: "2012-10-17", Statement: []Statement{
		{Sid: "PassNodeRole", Effect: Allow, Action: Strings{"iam:PassRole"}, Resource: Strings{"arn:aws:iam::1:role/B"}},
		{Sid: "New", Effect: Deny, Action: Strings{"sqs:*"}, Resource: Strings{"*"}},
		{Effect: Allow, Principal: &Principal{Federated: Strings{"arn:oidc/TWO"}}, Action: Strings{"sts:AssumeRoleWithWebIdentity"},
			Condition: Conditions{"StringEquals": {"oidc/TWO:aud": {"sts.amazonaws.com"}}}},
	}}
	got := Diff(have, want)
	wantLines := []string{
		"PassNodeRole: Resource - arn:aws:iam::1:role/A",
		"+ statement New",
		"#3: Principal + Federated arn:oidc/TWO",
		"#3: Principal - Federated arn:oidc/ONE",
		"#3: Condition + StringEquals oidc/TWO:aud sts.amazonaws.com",
		"#3: Condition - StringEquals oidc/ONE:aud sts.amazonaws.com",
		"- statement Old",
	}
	if !slices.Equal(got, wantLines) {
		t.Errorf("Diff =\n%q\nwant\n%q", got, wantLines)
	}
	// Reordered values are no difference.
	reordered := have
	reordered.Statement = slices.Clone(have.Statement)
	reordered.Statement[0].Resource = Strings{"arn:aws:iam::1:role/B", "arn:aws:iam::1:role/A"}
	if d := Diff(have, reordered); len(d) != 0 || !Equal(have, reordered) {
		t.Errorf("reordered values: %q", d)
	}
}
