package schema_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/config/crd"
	"github.com/karpool/karpool/schema"
)

// classWith is a valid EC2NodeClass but for one more field of spec, on line 9.
const classWith = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: gpu
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  %s: %s
`

// The CRD takes any non-empty spec.role. karpool takes a role as Karpenter and IAM read it: a
// name, a path and name, or an ARN.
var (
	acceptedRoles = []string{
		"KarpenterNodeRole-demo", "a+b=c,d.e@f_g-h", strings.Repeat("r", 64), "team/NodeRole", "/team/a.b/NodeRole", "/NodeRole",
		"arn:aws:iam::111122223333:role/NodeRole", "arn:aws-cn:iam::111122223333:role/team/NodeRole", "arn:aws-us-gov:iam::222233334444:role/N",
	}
	refusedRoles = []string{
		"*", "Node*", "Node?", "${AWS::AccountId}", "Node${ClusterName}", "team/*", "*/NodeRole", "/${x}/NodeRole", strings.Repeat("r", 65),
		"arn:aws:iam::*:role/NodeRole", "arn:aws:iam::1111:role/NodeRole", "arn:aws:iam::111122223333:role/*", "arn:*:iam::111122223333:role/N",
		"arn:aws:iam::111122223333:user/NodeRole", "arn:aws-iso:iam::111122223333:role/N", "team//NodeRole", "NodeRole/", "/", "a b", "%{x}", "Nöde",
	}
)

// TestRoleIsAnIAMRole: the schema refuses exactly the roles the AWS prerequisites refuse
// (awsv1.RolePattern), on the value, with a hint; `karpool vet` and PoolSync therefore refuse a
// role that would widen the controller policy before it is merged.
func TestRoleIsAnIAMRole(t *testing.T) {
	rendered := regexp.MustCompile(awsv1.RolePattern)
	for _, role := range append(append([]string{}, acceptedRoles...), refusedRoles...) {
		accepted := slices.Contains(acceptedRoles, role)
		if accepted != rendered.MatchString(role) {
			t.Errorf("%q: awsv1.RolePattern disagrees with the lists", role)
		}
		fs, err := schema.ValidateDocuments("class.yaml", fmt.Appendf(nil, classWith, "role", strconv.Quote(role)))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case accepted && len(fs) != 0:
			t.Errorf("%q refused: %v", role, fs)
		case !accepted && (len(fs) != 1 || fs[0].Location() != "class.yaml:9:9" || fs[0].Path != "spec.role" ||
			!strings.Contains(fs[0].Message, "role must be an IAM role") || !strings.Contains(fs[0].Hint, "team/KarpenterNodeRole-CLUSTER")):
			t.Errorf("%q: got %v, want one error at class.yaml:9:9 on spec.role with a hint", role, fs)
		}
	}
}

// poolSyncWithNodeRole is a PoolSync whose spec.aws.nodeRole is %s, on line 12.
const poolSyncWithNodeRole = `apiVersion: karpool.dev/v1alpha1
kind: PoolSync
metadata:
  name: p
spec:
  url: https://example.com/pools.git
  interval: 1m
  aws:
    region: us-east-1
    clusterName: demo
    mode: apply
    nodeRole: %s
`

// TestNodeRoleIsAnIAMRole: a PoolSync's spec.aws.nodeRole takes the same roles, in the CRD's
// pattern and in the schema.
func TestNodeRoleIsAnIAMRole(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		if c.Spec.Names.Kind == "PoolSync" {
			if got := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["aws"].Properties["nodeRole"].Pattern; got != awsv1.RolePattern {
				t.Errorf("the CRD's spec.aws.nodeRole pattern is %s, not awsv1.RolePattern", got)
			}
		}
	}
	for _, role := range append(append([]string{}, acceptedRoles...), refusedRoles...) {
		fs, err := schema.ValidateDocuments("ps.yaml", fmt.Appendf(nil, poolSyncWithNodeRole, strconv.Quote(role)))
		if err != nil {
			t.Fatal(err)
		}
		if refused := len(fs) > 0; refused == slices.Contains(acceptedRoles, role) || refused && fs[0].Location() != "ps.yaml:12:15" {
			t.Errorf("nodeRole %q: %v", role, fs)
		}
	}
}

// TestStricterCorpusRejectedBySchema: the documents the CRDs accept and karpool refuses.
func TestStricterCorpusRejectedBySchema(t *testing.T) {
	fs, err := schema.ValidateDocuments("role.yaml", mustRead(t, "testdata/stricter/ec2nodeclass-role-wildcard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Location() != "role.yaml:7:9" || !strings.Contains(fs[0].Message, "role must be an IAM role") {
		t.Fatalf("got %v", fs)
	}
}

// TestInstanceProfileName: an instance profile that is not a name is a warning, located on the
// value: Karpenter cannot launch with it, but it reaches no policy, and manifests written for
// Terraform hold placeholders there.
func TestInstanceProfileName(t *testing.T) {
	for profile, want := range map[string]bool{
		"KarpenterNodeInstanceProfile-demo": false, "a+b=c,d.e@f_g-h": false, strings.Repeat("p", 128): false,
		"${aws_iam_instance_profile.nodes.name}": true, "*": true, "team/Profile": true, strings.Repeat("p", 129): true,
		"arn:aws:iam::111122223333:instance-profile/P": true,
	} {
		fs, err := schema.ValidateDocuments("class.yaml", fmt.Appendf(nil, classWith, "instanceProfile", strconv.Quote(profile)))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !want && len(fs) != 0:
			t.Errorf("%q: %v", profile, fs)
		case want && (len(fs) != 1 || fs[0].Severity != schema.Warning || fs[0].Rule != "instance-profile" || fs[0].Location() != "class.yaml:9:20" || fs[0].Hint == ""):
			t.Errorf("%q: got %v, want one instance-profile warning at class.yaml:9:20", profile, fs)
		}
	}
}
