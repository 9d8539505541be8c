package awssim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpool/karpool/testbed/awssim"
)

const ec2Trust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

func TestIAM(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	c := iam.NewFromConfig(cfg)
	role := try(c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-karpool"), AssumeRolePolicyDocument: aws.String(ec2Trust),
		Tags: []iamtypes.Tag{{Key: aws.String("karpool.io/cluster"), Value: aws.String("karpool")}}})).OK(t).Role
	if aws.ToString(role.Arn) != "arn:aws:iam::111122223333:role/KarpenterNodeRole-karpool" || !strings.HasPrefix(aws.ToString(role.RoleId), "AROA") {
		t.Fatalf("role %+v", role)
	}
	_, err := c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-karpool"), AssumeRolePolicyDocument: aws.String(ec2Trust)})
	wantCode(t, err, "EntityAlreadyExists")
	var exists *iamtypes.EntityAlreadyExistsException
	if !errors.As(err, &exists) {
		t.Errorf("error type %T", err)
	}
	_, err = c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("bad"), AssumeRolePolicyDocument: aws.String("{not json")})
	wantCode(t, err, "MalformedPolicyDocument")
	got := try(c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("KarpenterNodeRole-karpool")})).OK(t).Role
	// IAM returns policy documents URL-encoded.
	if doc, _ := url.QueryUnescape(aws.ToString(got.AssumeRolePolicyDocument)); doc != ec2Trust || len(got.Tags) != 1 {
		t.Errorf("GetRole: %q tags %v", aws.ToString(got.AssumeRolePolicyDocument), got.Tags)
	}
	_, err = c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("missing")})
	wantCode(t, err, "NoSuchEntity")
	var nse *iamtypes.NoSuchEntityException
	if !errors.As(err, &nse) {
		t.Errorf("error type %T", err)
	}
	try(c.TagRole(ctx, &iam.TagRoleInput{RoleName: role.RoleName, Tags: []iamtypes.Tag{{Key: aws.String("a"), Value: aws.String("1")}}})).OK(t)
	try(c.UntagRole(ctx, &iam.UntagRoleInput{RoleName: role.RoleName, TagKeys: []string{"karpool.io/cluster"}})).OK(t)
	if tags := try(c.ListRoleTags(ctx, &iam.ListRoleTagsInput{RoleName: role.RoleName})).OK(t).Tags; len(tags) != 1 || aws.ToString(tags[0].Key) != "a" {
		t.Errorf("role tags %+v", tags)
	}
	try(c.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: role.RoleName, PolicyDocument: aws.String(ec2Trust)})).OK(t)
	for _, p := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"} {
		try(c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role.RoleName, PolicyArn: aws.String("arn:aws:iam::aws:policy/" + p)})).OK(t)
	}
	_, err = c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role.RoleName, PolicyArn: aws.String("arn:aws:iam::aws:policy/NoSuchPolicy")})
	wantCode(t, err, "NoSuchEntity")
	att := try(c.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: role.RoleName})).OK(t)
	if len(att.AttachedPolicies) != 4 || aws.ToString(att.AttachedPolicies[0].PolicyName) != "AmazonEKSWorkerNodePolicy" {
		t.Errorf("attached %+v", att.AttachedPolicies)
	}
	const inline = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}`
	try(c.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: role.RoleName, PolicyName: aws.String("inline"), PolicyDocument: aws.String(inline)})).OK(t)
	rp := try(c.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: role.RoleName, PolicyName: aws.String("inline")})).OK(t)
	if doc, _ := url.QueryUnescape(aws.ToString(rp.PolicyDocument)); doc != inline {
		t.Errorf("role policy %q", doc)
	}
	if names := try(c.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: role.RoleName})).OK(t).PolicyNames; len(names) != 1 {
		t.Errorf("role policies %v", names)
	}

	// Customer managed policy with versions.
	pol := try(c.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("KarpenterControllerPolicy-karpool"), PolicyDocument: aws.String(inline)})).OK(t).Policy
	try(c.CreatePolicyVersion(ctx, &iam.CreatePolicyVersionInput{PolicyArn: pol.Arn, PolicyDocument: aws.String(inline), SetAsDefault: true})).OK(t)
	if p := try(c.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: pol.Arn})).OK(t).Policy; aws.ToString(p.DefaultVersionId) != "v2" {
		t.Errorf("default version %s", aws.ToString(p.DefaultVersionId))
	}
	if v := try(c.ListPolicyVersions(ctx, &iam.ListPolicyVersionsInput{PolicyArn: pol.Arn})).OK(t).Versions; len(v) != 2 || !v[0].IsDefaultVersion {
		t.Errorf("versions %+v", v)
	}
	pv := try(c.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: pol.Arn, VersionId: aws.String("v2")})).OK(t).PolicyVersion
	if doc, _ := url.QueryUnescape(aws.ToString(pv.Document)); doc != inline {
		t.Errorf("policy version doc %q", doc)
	}
	try(c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role.RoleName, PolicyArn: pol.Arn})).OK(t)
	if l := try(c.ListPolicies(ctx, &iam.ListPoliciesInput{Scope: iamtypes.PolicyScopeTypeLocal})).OK(t).Policies; len(l) != 1 || aws.ToInt32(l[0].AttachmentCount) != 1 {
		t.Errorf("local policies %+v", l)
	}
	_, err = c.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: pol.Arn})
	wantCode(t, err, "DeleteConflict")
	try(c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: role.RoleName, PolicyArn: pol.Arn})).OK(t)
	try(c.DeletePolicyVersion(ctx, &iam.DeletePolicyVersionInput{PolicyArn: pol.Arn, VersionId: aws.String("v1")})).OK(t)
	try(c.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: pol.Arn})).OK(t)

	// Instance profiles.
	prof := try(c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("karpool_123"), Path: aws.String("/karpenter/us-east-1/karpool/"),
		Tags: []iamtypes.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}}})).OK(t).InstanceProfile
	if aws.ToString(prof.Arn) != "arn:aws:iam::111122223333:instance-profile/karpenter/us-east-1/karpool/karpool_123" || !strings.HasPrefix(aws.ToString(prof.InstanceProfileId), "AIPA") {
		t.Errorf("profile %+v", prof)
	}
	try(c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName, RoleName: role.RoleName})).OK(t)
	_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName, RoleName: role.RoleName})
	wantCode(t, err, "LimitExceeded")
	gp := try(c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName})).OK(t).InstanceProfile
	if len(gp.Roles) != 1 || aws.ToString(gp.Roles[0].RoleName) != "KarpenterNodeRole-karpool" || len(gp.Tags) != 1 {
		t.Errorf("GetInstanceProfile %+v", gp)
	}
	try(c.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName, Tags: []iamtypes.Tag{{Key: aws.String("b"), Value: aws.String("2")}}})).OK(t)
	try(c.UntagInstanceProfile(ctx, &iam.UntagInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName, TagKeys: []string{"b"}})).OK(t)
	if tags := try(c.ListInstanceProfileTags(ctx, &iam.ListInstanceProfileTagsInput{InstanceProfileName: prof.InstanceProfileName})).OK(t).Tags; len(tags) != 1 {
		t.Errorf("profile tags %+v", tags)
	}
	if l := try(c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/karpenter/")})).OK(t).InstanceProfiles; len(l) != 1 {
		t.Errorf("profiles by path %+v", l)
	}
	if l := try(c.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: role.RoleName})).OK(t).InstanceProfiles; len(l) != 1 {
		t.Errorf("profiles for role %+v", l)
	}
	_, err = c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: role.RoleName})
	wantCode(t, err, "DeleteConflict")
	_, err = c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName})
	wantCode(t, err, "DeleteConflict")
	try(c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName, RoleName: role.RoleName})).OK(t)
	try(c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName})).OK(t)
	_, err = c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: prof.InstanceProfileName})
	wantCode(t, err, "NoSuchEntity")
	_, err = c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: role.RoleName})
	wantCode(t, err, "DeleteConflict") // attached managed policies remain
	for _, p := range att.AttachedPolicies {
		try(c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: role.RoleName, PolicyArn: p.PolicyArn})).OK(t)
	}
	try(c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: role.RoleName, PolicyName: aws.String("inline")})).OK(t)
	try(c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: role.RoleName})).OK(t)

	slr := try(c.CreateServiceLinkedRole(ctx, &iam.CreateServiceLinkedRoleInput{AWSServiceName: aws.String("spot.amazonaws.com")})).OK(t).Role
	if aws.ToString(slr.RoleName) != "AWSServiceRoleForEC2Spot" || aws.ToString(slr.Path) != "/aws-service-role/spot.amazonaws.com/" {
		t.Errorf("service-linked role %+v", slr)
	}
	_, err = c.CreateServiceLinkedRole(ctx, &iam.CreateServiceLinkedRoleInput{AWSServiceName: aws.String("spot.amazonaws.com")})
	wantCode(t, err, "InvalidInput")
	roles := try(c.ListRoles(ctx, &iam.ListRolesInput{MaxItems: aws.Int32(1)})).OK(t)
	if len(roles.Roles) != 1 || roles.IsTruncated {
		t.Errorf("roles %+v truncated %v", roles.Roles, roles.IsTruncated)
	}
}

func TestSTSAndPricing(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	id := try(sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})).OK(t)
	if aws.ToString(id.Account) != "111122223333" || !strings.HasPrefix(aws.ToString(id.Arn), "arn:aws:iam::111122223333:") {
		t.Errorf("caller identity %+v", id)
	}

	pc := pricing.NewFromConfig(cfg)
	term := func(f, v string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(f), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(v)}
	}
	karpenter := []pricingtypes.Filter{term("regionCode", "us-east-1"), term("serviceCode", "AmazonEC2"), term("preInstalledSw", "NA"),
		term("operatingSystem", "Linux"), term("capacitystatus", "Used"), term("marketoption", "OnDemand"), term("tenancy", "Shared")}
	one := try(pc.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"),
		Filters: append(karpenter, term("instanceType", "m5.large"))})).OK(t)
	if len(one.PriceList) != 1 {
		t.Fatalf("price list %v", one.PriceList)
	}
	var doc struct {
		Product struct {
			Attributes map[string]string `json:"attributes"`
		} `json:"product"`
		Terms struct {
			OnDemand map[string]struct {
				PriceDimensions map[string]struct {
					PricePerUnit map[string]string `json:"pricePerUnit"`
				} `json:"priceDimensions"`
			} `json:"OnDemand"`
		} `json:"terms"`
	}
	if err := json.Unmarshal([]byte(one.PriceList[0]), &doc); err != nil {
		t.Fatal(err)
	}
	var price string
	for _, term := range doc.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			price = dim.PricePerUnit["USD"]
		}
	}
	if doc.Product.Attributes["instanceType"] != "m5.large" || price != "0.0960000000" {
		t.Errorf("m5.large price %q attrs %v", price, doc.Product.Attributes)
	}
	n := 0
	p := pricing.NewGetProductsPaginator(pc, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: karpenter, MaxResults: aws.Int32(100)})
	for p.HasMorePages() {
		n += len(try(p.NextPage(ctx)).OK(t).PriceList)
	}
	if n < 500 {
		t.Errorf("only %d products", n)
	}
	seoul := try(pc.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{term("regionCode", "ap-northeast-2"), term("instanceType", "m5.large")}})).OK(t)
	if len(seoul.PriceList) != 1 || !strings.Contains(seoul.PriceList[0], "Asia Pacific (Seoul)") {
		t.Errorf("Seoul price list %v", seoul.PriceList)
	}
}

func TestEKS(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{ClusterName: "demo", ClusterEndpoint: "https://127.0.0.1:6443", ClusterCA: []byte("CA PEM")})
	ctx := testCtx(t, time.Minute)
	c := eks.NewFromConfig(cfg)
	cl := try(c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("demo")})).OK(t).Cluster
	if aws.ToString(cl.Endpoint) != "https://127.0.0.1:6443" || aws.ToString(cl.Version) != "1.36" || cl.Status != "ACTIVE" ||
		aws.ToString(cl.CertificateAuthority.Data) != "Q0EgUEVN" || aws.ToString(cl.KubernetesNetworkConfig.ServiceIpv4Cidr) == "" ||
		len(cl.ResourcesVpcConfig.SubnetIds) != 3 || cl.CreatedAt == nil {
		t.Errorf("cluster %+v", cl)
	}
	_, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("other")})
	wantCode(t, err, "ResourceNotFoundException")

	ic := iam.NewFromConfig(cfg)
	role := try(ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-demo"), Path: aws.String("/nodes/"), AssumeRolePolicyDocument: aws.String(ec2Trust)})).OK(t).Role
	e := try(c.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Arn, Type: aws.String("EC2_LINUX"),
		Tags: map[string]string{"karpool.io/managed": "true"}})).OK(t).AccessEntry
	if aws.ToString(e.Username) != "system:node:{{EC2PrivateDNSName}}" || aws.ToString(e.Type) != "EC2_LINUX" || e.Tags["karpool.io/managed"] != "true" {
		t.Errorf("access entry %+v", e)
	}
	_, err = c.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Arn, Type: aws.String("EC2_LINUX")})
	wantCode(t, err, "ResourceInUseException")
	_, err = c.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String("arn:aws:iam::111122223333:role/missing")})
	wantCode(t, err, "InvalidParameterException")
	d := try(c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Arn})).OK(t).AccessEntry
	if aws.ToString(d.AccessEntryArn) != aws.ToString(e.AccessEntryArn) {
		t.Errorf("described %+v", d)
	}
	if l := try(c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("demo")})).OK(t).AccessEntries; len(l) != 1 || l[0] != aws.ToString(role.Arn) {
		t.Errorf("list %v", l)
	}
	try(c.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Arn})).OK(t)
	_, err = c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Arn})
	wantCode(t, err, "ResourceNotFoundException")
}

// queuePolicy is the interruption queue policy of Karpenter's CloudFormation template.
func queuePolicy(arn string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Id":"EC2InterruptionPolicy","Statement":[
{"Effect":"Allow","Principal":{"Service":["events.amazonaws.com","sqs.amazonaws.com"]},"Action":"sqs:SendMessage","Resource":%q},
{"Sid":"DenyHTTP","Effect":"Deny","Action":"sqs:*","Resource":%q,"Condition":{"Bool":{"aws:SecureTransport":false}},"Principal":"*"}]}`, arn, arn)
}

// karpenterRules are the interruption rules of Karpenter's CloudFormation template.
var karpenterRules = map[string]string{
	"ScheduledChangeRule":     `{"source":["aws.health"],"detail-type":["AWS Health Event"]}`,
	"SpotInterruptionRule":    `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`,
	"RebalanceRule":           `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation"]}`,
	"InstanceStateChangeRule": `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`,
}

type envelope struct {
	Version    string         `json:"version"`
	ID         string         `json:"id"`
	DetailType string         `json:"detail-type"`
	Source     string         `json:"source"`
	Account    string         `json:"account"`
	Time       string         `json:"time"`
	Region     string         `json:"region"`
	Resources  []string       `json:"resources"`
	Detail     map[string]any `json:"detail"`
}

func TestSQSAndEventBridge(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, 2*time.Minute)
	q, eb := sqs.NewFromConfig(cfg), eventbridge.NewFromConfig(cfg)

	url := aws.ToString(try(q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("karpool"),
		Attributes: map[string]string{"MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true"}})).OK(t).QueueUrl)
	if url != "https://sqs.us-east-1.amazonaws.com/111122223333/karpool" {
		t.Errorf("queue url %s", url)
	}
	if u := aws.ToString(try(q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("karpool")})).OK(t).QueueUrl); u != url {
		t.Errorf("GetQueueUrl %s", u)
	}
	_, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("karpool"), Attributes: map[string]string{"MessageRetentionPeriod": "600"}})
	wantCode(t, err, "QueueAlreadyExists")
	_, err = q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var dne *sqstypes.QueueDoesNotExist
	if !errors.As(err, &dne) || errorCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("missing queue: %T %v", err, err)
	}
	attrs := try(q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{"All"}})).OK(t).Attributes
	arn := attrs["QueueArn"]
	if arn != "arn:aws:sqs:us-east-1:111122223333:karpool" || attrs["MessageRetentionPeriod"] != "300" || attrs["VisibilityTimeout"] != "30" {
		t.Errorf("attributes %v", attrs)
	}
	_, err = q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "99999"}})
	wantCode(t, err, "InvalidAttributeValue")

	for name, pattern := range karpenterRules {
		try(eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("karpool-" + name), EventPattern: aws.String(pattern)})).OK(t)
		out := try(eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("karpool-" + name),
			Targets: []ebtypes.Target{{Id: aws.String("KarpenterInterruptionQueueTarget"), Arn: aws.String(arn)}}})).OK(t)
		if out.FailedEntryCount != 0 {
			t.Fatalf("PutTargets %+v", out.FailedEntries)
		}
	}
	r := try(eb.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String("karpool-SpotInterruptionRule")})).OK(t)
	if r.State != ebtypes.RuleStateEnabled || aws.ToString(r.EventPattern) != karpenterRules["SpotInterruptionRule"] ||
		aws.ToString(r.Arn) != "arn:aws:events:us-east-1:111122223333:rule/karpool-SpotInterruptionRule" {
		t.Errorf("rule %+v", r)
	}
	if tg := try(eb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String("karpool-RebalanceRule")})).OK(t).Targets; len(tg) != 1 || aws.ToString(tg[0].Arn) != arn {
		t.Errorf("targets %+v", tg)
	}
	_, err = eb.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String("nope")})
	wantCode(t, err, "ResourceNotFoundException")
	_, err = eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("bad"), EventPattern: aws.String(`{"source":"aws.ec2"}`)})
	wantCode(t, err, "InvalidEventPatternException")

	// Without a queue policy EventBridge cannot deliver.
	srv.SetFaults(awssim.Faults{})
	_ = srv.State()
	ec := ec2.NewFromConfig(cfg)
	profile := nodeRole(t, cfg)
	subnets, sg := discovered(t, ec)
	lt := createLT(t, ec, "karpool-events", al2023AMI(t, cfg, "x86_64"), sg, profile)
	launch := func() string {
		out := try(ec.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeSpot, 1, fleetOverrides(subnets[:1], "m5.large")))).OK(t)
		return out.Instances[0].InstanceIds[0]
	}
	first := launch()
	// The launch's two state-change events (pending, running) are refused by the policy-less
	// queue: wait for both refusals to be counted, then check that nothing arrived.
	eventually(t, 10*time.Second, "two delivery failures", func() bool { return srv.State().DeliveryFailures >= 2 })
	if st := srv.State(); st.Queues[0].Visible != 0 {
		t.Fatalf("delivered without a queue policy: %+v", st)
	}
	try(q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"Policy": queuePolicy(arn)}})).OK(t)

	receive := func(want int, wait int32) []sqstypes.Message {
		t.Helper()
		var msgs []sqstypes.Message
		deadline := time.Now().Add(10 * time.Second)
		for len(msgs) < want && time.Now().Before(deadline) {
			out := try(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: wait,
				MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})).OK(t)
			msgs = append(msgs, out.Messages...)
		}
		return msgs
	}
	parse := func(m sqstypes.Message) envelope {
		var e envelope
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
			t.Fatalf("message body %s: %v", aws.ToString(m.Body), err)
		}
		return e
	}
	second := launch() // pending and running notifications
	msgs := receive(2, 5)
	states := map[string]bool{}
	for _, m := range msgs {
		e := parse(m)
		if e.Source != "aws.ec2" || e.DetailType != "EC2 Instance State-change Notification" || e.Detail["instance-id"] != second ||
			e.Account != "111122223333" || e.Region != "us-east-1" || e.Version != "0" || len(e.Resources) != 1 ||
			e.Resources[0] != "arn:aws:ec2:us-east-1:111122223333:instance/"+second {
			t.Errorf("state change %+v", e)
		}
		states[fmt.Sprint(e.Detail["state"])] = true
		if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" {
			t.Errorf("attributes %v", m.Attributes)
		}
		try(q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})).OK(t)
	}
	if !states["pending"] || !states["running"] {
		t.Errorf("states %v", states)
	}

	// The admin API sends a spot interruption warning and terminates the instance afterwards.
	resp, err := http.Post(srv.AdminURL()+"spot-interruption", "application/json",
		strings.NewReader(fmt.Sprintf(`{"instanceId":%q,"terminateAfter":"300ms"}`, second)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("admin spot-interruption: %v %v", err, resp)
	}
	resp.Body.Close()
	msgs = receive(3, 5) // warning, shutting-down, terminated
	kinds := map[string]bool{}
	for _, m := range msgs {
		e := parse(m)
		kinds[e.DetailType+"/"+fmt.Sprint(e.Detail["state"], e.Detail["instance-action"])] = true
		try(q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})).OK(t)
	}
	for _, k := range []string{"EC2 Spot Instance Interruption Warning/<nil>terminate", "EC2 Instance State-change Notification/shutting-down<nil>",
		"EC2 Instance State-change Notification/terminated<nil>"} {
		if !kinds[k] {
			t.Errorf("missing %s in %v", k, kinds)
		}
	}
	if err := srv.RebalanceRecommendation(first); err != nil {
		t.Fatal(err)
	}
	if err := srv.ScheduledChange(first, ""); err != nil {
		t.Fatal(err)
	}
	msgs = receive(2, 5)
	for _, m := range msgs {
		e := parse(m)
		switch e.DetailType {
		case "EC2 Instance Rebalance Recommendation":
			if e.Detail["instance-id"] != first {
				t.Errorf("rebalance %+v", e)
			}
		case "AWS Health Event":
			ents, _ := e.Detail["affectedEntities"].([]any)
			if e.Source != "aws.health" || e.Detail["service"] != "EC2" || e.Detail["eventTypeCategory"] != "scheduledChange" || len(ents) != 1 {
				t.Errorf("health %+v", e)
			}
		default:
			t.Errorf("unexpected %s", e.DetailType)
		}
		try(q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})).OK(t)
	}

	// Custom events: PutEvents delivers to matching rules; aws.* sources are reserved.
	try(eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("custom"), EventPattern: aws.String(`{"source":[{"prefix":"karpool."}],"detail":{"kind":["test"]}}`)})).OK(t)
	try(eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("custom"), Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(arn)}}})).OK(t)
	var wg sync.WaitGroup
	var polled []sqstypes.Message
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 10})
		if err == nil {
			polled = out.Messages
		}
	}()
	eventually(t, 10*time.Second, "the long poll to be waiting", func() bool {
		for _, q := range srv.State().Queues {
			if q.URL == url && q.Waiting > 0 {
				return true
			}
		}
		return false
	})
	pe := try(eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
		{Source: aws.String("karpool.test"), DetailType: aws.String("Test"), Detail: aws.String(`{"kind":"test"}`), Time: aws.Time(time.Now())},
		{Source: aws.String("karpool.test"), DetailType: aws.String("Test"), Detail: aws.String(`{"kind":"other"}`)},
		{Source: aws.String("aws.ec2"), DetailType: aws.String("Test"), Detail: aws.String(`{}`)},
		{Source: aws.String("karpool.test"), DetailType: aws.String("Test"), Detail: aws.String(`not json`)},
	}})).OK(t)
	if pe.FailedEntryCount != 2 || aws.ToString(pe.Entries[2].ErrorCode) != "NotAuthorizedForSourceException" || aws.ToString(pe.Entries[3].ErrorCode) != "MalformedDetail" {
		t.Errorf("PutEvents %+v", pe.Entries)
	}
	wg.Wait()
	// The poll waits up to 10 s; getting the message means the event woke it (an empty answer
	// would mean it ran out its wait instead).
	if len(polled) != 1 {
		t.Fatalf("long poll got %d messages", len(polled))
	}
	if e := parse(polled[0]); e.Source != "karpool.test" || e.Detail["kind"] != "test" {
		t.Errorf("custom event %+v", e)
	}
	// Visibility timeout: a received, undeleted message comes back.
	sent := try(q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String("v")}}})).OK(t)
	if aws.ToString(sent.MD5OfMessageAttributes) == "" {
		t.Errorf("no attribute MD5")
	}
	drain := try(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 1, MessageAttributeNames: []string{"All"}})).OK(t)
	var hello *sqstypes.Message
	for i, m := range drain.Messages {
		if aws.ToString(m.Body) == "hello" {
			hello = &drain.Messages[i]
		}
	}
	if hello == nil || hello.MessageAttributes["k"].StringValue == nil || aws.ToString(hello.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) {
		t.Fatalf("hello not received with attributes: %+v", drain.Messages)
	}
	if again := try(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})).OK(t); len(again.Messages) != 0 {
		t.Errorf("in-flight message visible: %+v", again.Messages)
	}
	back := try(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 3, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})).OK(t)
	found := false
	for _, m := range back.Messages {
		if aws.ToString(m.Body) == "hello" {
			found = m.Attributes["ApproximateReceiveCount"] == "2"
		}
	}
	if !found {
		t.Errorf("message did not come back after its visibility timeout: %+v", back.Messages)
	}
	_, err = q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage")})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	empty := time.Now()
	try(q.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url})).OK(t)
	if out := try(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 1})).OK(t); len(out.Messages) != 0 || time.Since(empty) < 900*time.Millisecond {
		t.Errorf("empty long poll returned %d after %v", len(out.Messages), time.Since(empty))
	}
	if l := try(q.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("karp")})).OK(t).QueueUrls; len(l) != 1 {
		t.Errorf("ListQueues %v", l)
	}

	// Tear down like an uninstall.
	_, err = eb.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String("custom")})
	wantCode(t, err, "ValidationException")
	try(eb.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String("custom"), Ids: []string{"q"}})).OK(t)
	try(eb.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String("custom")})).OK(t)
	if rules := try(eb.ListRules(ctx, &eventbridge.ListRulesInput{NamePrefix: aws.String("karpool-")})).OK(t).Rules; len(rules) != 4 {
		t.Errorf("rules %d", len(rules))
	}
	try(q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url})).OK(t)
	_, err = q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("karpool")})
	wantCode(t, err, "AWS.SimpleQueueService.QueueDeletedRecently")
	_ = bytes.MinRead
}

// Tags read back through the SDK: apply tells what karpool owns by them.
func TestQueueAndRuleTags(t *testing.T) {
	_, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	q, eb := sqs.NewFromConfig(cfg), eventbridge.NewFromConfig(cfg)
	url := try(q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("tagged"), Tags: map[string]string{"team": "a"}})).OK(t).QueueUrl
	try(q.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"karpool.dev/cluster": "demo", "team": "b"}})).OK(t)
	tags := try(q.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})).OK(t).Tags
	if len(tags) != 2 || tags["team"] != "b" || tags["karpool.dev/cluster"] != "demo" {
		t.Errorf("queue tags %v", tags)
	}
	_, err := q.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/111122223333/missing")})
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")

	arn := try(eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventPattern: aws.String(`{"source":["aws.ec2"]}`),
		Tags: []ebtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})).OK(t).RuleArn
	try(eb.TagResource(ctx, &eventbridge.TagResourceInput{ResourceARN: arn, Tags: []ebtypes.Tag{
		{Key: aws.String("team"), Value: aws.String("b")}, {Key: aws.String("karpool.dev/cluster"), Value: aws.String("demo")}}})).OK(t)
	rt := try(eb.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: arn})).OK(t).Tags
	if len(rt) != 2 || aws.ToString(rt[0].Value) != "b" || aws.ToString(rt[1].Key) != "karpool.dev/cluster" {
		t.Errorf("rule tags %+v", rt)
	}
	_, err = eb.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: aws.String("arn:aws:events:us-east-1:111122223333:rule/none")})
	wantCode(t, err, "ResourceNotFoundException")
}
