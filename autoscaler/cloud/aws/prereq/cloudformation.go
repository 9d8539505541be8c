package prereq

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// Sentinels rendered in place of the cluster name and account, then turned into the template's
// ${ClusterName} parameter and ${AWS::AccountId}: both are valid settings and occur nowhere else.
const (
	clusterSentinel = "KarpoolClusterNameSentinel"
	accountSentinel = "999999999999"
)

// CloudFormation renders the resources as a CloudFormation template (YAML) parameterised by the
// cluster name, for the settings' region (instance profile names depend on it). What
// CloudFormation cannot do is in the template's Metadata: tagging subnets and security groups it
// does not own, and aws-auth entries.
func CloudFormation(in Settings, classes []awsv1.EC2NodeClass) ([]byte, error) {
	s := in.withDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	cluster := s.ClusterName
	ph := s
	ph.ClusterName, ph.AccountID = clusterSentinel, accountSentinel
	if s.InterruptionQueue == cluster {
		ph.InterruptionQueue = clusterSentinel
	}
	if s.NodeRole == "KarpenterNodeRole-"+cluster {
		ph.NodeRole = "KarpenterNodeRole-" + clusterSentinel
	}
	r, err := Render(ph, classes)
	if err != nil {
		return nil, err
	}
	resources := map[string]any{}
	add := func(id, typ string, props map[string]any, extra ...string) {
		for n := 2; resources[id] != nil; n++ { // classes whose names differ only in punctuation
			id = strings.TrimRight(id, "0123456789") + fmt.Sprint(n)
		}
		res := map[string]any{"Type": typ, "Properties": props}
		for i := 0; i+1 < len(extra); i += 2 {
			res[extra[i]] = extra[i+1]
		}
		resources[id] = res
	}
	for _, role := range r.NodeRoles {
		id := "KarpenterNodeRole"
		if role.Name != ph.NodeRole {
			id = "NodeRole" + logicalID(role.Name)
		}
		add(id, "AWS::IAM::Role", map[string]any{"RoleName": role.Name, "Path": "/", "AssumeRolePolicyDocument": role.Trust,
			"ManagedPolicyArns": role.ManagedPolicyARNs, "Tags": cfnTags(role.Tags)})
	}
	for _, p := range r.InstanceProfiles {
		add("InstanceProfile"+logicalID(p.NodeClass), "AWS::IAM::InstanceProfile", map[string]any{"InstanceProfileName": p.Name, "Path": "/", "Roles": []string{p.Role}})
	}
	add("KarpenterControllerPolicy", "AWS::IAM::ManagedPolicy", map[string]any{"ManagedPolicyName": r.ControllerPolicy.Name, "Path": "/",
		"PolicyDocument": r.ControllerPolicy.Document.JSON()})
	add("KarpenterControllerRole", "AWS::IAM::Role", map[string]any{"RoleName": r.ControllerRole.Name, "Path": "/",
		"AssumeRolePolicyDocument": r.ControllerRole.Trust, "ManagedPolicyArns": []any{map[string]any{"Ref": "KarpenterControllerPolicy"}},
		"Tags": cfnTags(r.ControllerRole.Tags)})
	add("KarpenterInterruptionQueue", "AWS::SQS::Queue", map[string]any{"QueueName": r.Queue.Name,
		"MessageRetentionPeriod": r.Queue.RetentionSeconds, "SqsManagedSseEnabled": r.Queue.ManagedSSE, "Tags": cfnTags(r.Queue.Tags)})
	add("KarpenterInterruptionQueuePolicy", "AWS::SQS::QueuePolicy", map[string]any{"Queues": []any{map[string]any{"Ref": "KarpenterInterruptionQueue"}},
		"PolicyDocument": r.Queue.Policy})
	for _, rule := range r.Rules {
		var pattern any
		if err := json.Unmarshal([]byte(rule.Pattern), &pattern); err != nil {
			return nil, fmt.Errorf("rule %s: %w", rule.Kind, err)
		}
		// CloudFormation names the rules, as in Karpenter's template: names of long clusters
		// would not fit.
		add(logicalID(rule.Kind)+"Rule", "AWS::Events::Rule", map[string]any{"EventPattern": pattern,
			"Targets": []any{map[string]any{"Id": rule.TargetID, "Arn": map[string]any{"Fn::GetAtt": []string{"KarpenterInterruptionQueue", "Arn"}}}}})
	}
	var notes []string
	for i, a := range r.NodeAccess {
		if a.Mode == AccessEntry {
			add(fmt.Sprintf("NodeAccessEntry%d", i+1), "AWS::EKS::AccessEntry", map[string]any{"ClusterName": clusterSentinel, "PrincipalArn": a.RoleARN, "Type": a.EntryType})
			continue
		}
		notes = append(notes, fmt.Sprintf("add to the aws-auth ConfigMap's mapRoles: {rolearn: %s, username: %q, groups: [%s]}", a.RoleARN, a.Username, strings.Join(a.Groups, ", ")))
	}
	if pi := r.PodIdentity; pi != nil {
		add("KarpenterControllerPodIdentity", "AWS::EKS::PodIdentityAssociation", map[string]any{"ClusterName": clusterSentinel,
			"Namespace": pi.Namespace, "ServiceAccount": pi.ServiceAccount, "RoleArn": map[string]any{"Fn::GetAtt": []string{"KarpenterControllerRole", "Arn"}}})
	}
	add("SpotServiceLinkedRole", "AWS::IAM::ServiceLinkedRole", map[string]any{"AWSServiceName": "spot.amazonaws.com"}, "Condition", "CreateSpotServiceLinkedRole")
	for _, t := range r.DiscoveryTags {
		notes = append(notes, fmt.Sprintf("tag %s with %s=%s", t.ResourceID, t.Key, t.Value))
	}

	template := map[string]any{
		"AWSTemplateFormatVersion": "2010-09-09",
		"Description":              "AWS resources karpool's pools need (karpool render --aws --format cloudformation), for region " + s.Region,
		"Parameters": map[string]any{
			"ClusterName": map[string]any{"Type": "String", "Default": cluster, "Description": "EKS cluster name"},
			"CreateSpotServiceLinkedRole": map[string]any{"Type": "String", "Default": "false", "AllowedValues": []string{"true", "false"},
				"Description": "true when the account has no AWSServiceRoleForEC2Spot yet (creating it twice fails)"},
		},
		"Conditions": map[string]any{"CreateSpotServiceLinkedRole": map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "CreateSpotServiceLinkedRole"}, "true"}}},
		"Resources":  resources,
	}
	if len(notes) > 0 || len(r.Warnings) > 0 {
		template["Metadata"] = map[string]any{"karpool": map[string]any{"manualSteps": notes, "warnings": r.Warnings}}
	}
	return toTemplate(template)
}

// toTemplate encodes the template, turning the sentinels into ${ClusterName} and
// ${AWS::AccountId} inside Fn::Sub.
func toTemplate(t map[string]any) ([]byte, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, err
	}
	return yaml.Marshal(substitute(generic))
}

// substitute wraps every string holding a sentinel in Fn::Sub, with the sentinel replaced.
func substitute(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = substitute(e)
		}
	case []any:
		for i, e := range x {
			x[i] = substitute(e)
		}
	case string:
		if strings.Contains(x, clusterSentinel) || strings.Contains(x, accountSentinel) {
			s := strings.NewReplacer(clusterSentinel, "${ClusterName}", accountSentinel, "${AWS::AccountId}").Replace(x)
			return map[string]any{"Fn::Sub": s}
		}
	}
	return v
}

// logicalID makes a CloudFormation logical ID part (alphanumeric) of a name: "gpu-nodes" →
// "GpuNodes".
func logicalID(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if up {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

func cfnTags(tags map[string]string) []map[string]string {
	var out []map[string]string
	for _, k := range sortedKeys(tags) {
		out = append(out, map[string]string{"Key": k, "Value": tags[k]})
	}
	return out
}
