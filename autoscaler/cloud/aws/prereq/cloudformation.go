package prereq

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// The template is rendered twice, with the cluster name and account replaced by a sentinel
// each time, and the two sentinels of each differ only in their last character. Where the
// renderings differ, and only there, the cluster name or account was rendered: those strings
// become Fn::Sub of ${ClusterName} and ${AWS::AccountId}, with every other ${ in them escaped.
// Input that holds a sentinel, or ${, therefore stays literal. The sentinels are valid settings.
var (
	clusterSentinels = [2]string{"KarpoolClusterNameSentinelA", "KarpoolClusterNameSentinelB"}
	accountSentinels = [2]string{"999999999999", "999999999998"}
)

// CloudFormation renders the resources as a CloudFormation template (YAML) parameterised by the
// cluster name, for the settings' region (instance profile names depend on it). What
// CloudFormation cannot do is in the template's Metadata: tagging subnets and security groups it
// does not own, and aws-auth entries.
func CloudFormation(in Settings, classes []awsv1.EC2NodeClass) ([]byte, error) {
	s := in.withDefaults()
	// Validated with the real names first, so that errors name them.
	if _, err := Render(s, classes); err != nil {
		return nil, err
	}
	s, classes = localised(s, classes)
	var renderings [2]any
	for i := range renderings {
		r, err := Render(placeholders(s, classes, i))
		if err != nil {
			// The input rendered with the real names: it holds a sentinel.
			return nil, fmt.Errorf("%w (%v)", notParameterisable(".Resources"), err)
		}
		if renderings[i], err = cfnTemplate(s, r); err != nil {
			return nil, err
		}
	}
	t, err := parameterise("", renderings[0], renderings[1])
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(t)
}

// localised writes the roles of the settings' account that are named by ARN as path and name,
// which the placeholder account reads as its own.
func localised(s Settings, classes []awsv1.EC2NodeClass) (Settings, []awsv1.EC2NodeClass) {
	local := func(role string) string {
		if ref, err := s.role("", role); err == nil && strings.HasPrefix(role, "arn:") && ref.account == s.AccountID {
			return ref.path + ref.name
		}
		return role
	}
	s.NodeRole = local(s.NodeRole)
	s.InstanceProfileRoles = slices.Clone(s.InstanceProfileRoles)
	for i, role := range s.InstanceProfileRoles {
		s.InstanceProfileRoles[i] = local(role)
	}
	classes = slices.Clone(classes)
	for i := range classes {
		if classes[i].Spec.Role != "" {
			classes[i].Spec.Role = local(classes[i].Spec.Role)
		}
	}
	return s, classes
}

// placeholders are the settings and classes with the i-th sentinels for the cluster name and
// account, and for the names that default to the cluster name wherever they are named.
func placeholders(s Settings, classes []awsv1.EC2NodeClass, i int) (Settings, []awsv1.EC2NodeClass) {
	ph := s
	ph.ClusterName, ph.AccountID = clusterSentinels[i], accountSentinels[i]
	if s.InterruptionQueue == s.ClusterName {
		ph.InterruptionQueue = ph.ClusterName
	}
	def, err := s.role("", "KarpenterNodeRole-"+s.ClusterName)
	isDefault := func(role string) bool {
		ref, e := s.role("", role)
		return err == nil && e == nil && ref.arn() == def.arn()
	}
	if !isDefault(s.NodeRole) {
		return ph, classes
	}
	// The default node role, named again, is the same role.
	ph.NodeRole = "KarpenterNodeRole-" + ph.ClusterName
	ph.InstanceProfileRoles = slices.Clone(s.InstanceProfileRoles)
	for j, role := range ph.InstanceProfileRoles {
		if isDefault(role) {
			ph.InstanceProfileRoles[j] = ph.NodeRole
		}
	}
	classes = slices.Clone(classes)
	for j := range classes {
		if isDefault(classes[j].Spec.Role) {
			classes[j].Spec.Role = ph.NodeRole
		}
	}
	return ph, classes
}

// cfnTemplate is the template of resources rendered from placeholders, as generic JSON values.
func cfnTemplate(s Settings, r *Resources) (any, error) {
	resources, notes, err := cfnResources(r)
	if err != nil {
		return nil, err
	}
	template := map[string]any{
		"AWSTemplateFormatVersion": "2010-09-09",
		"Description":              "AWS resources karpool's pools need (karpool render --aws --format cloudformation), for region " + s.Region,
		"Parameters": map[string]any{
			"ClusterName": map[string]any{"Type": "String", "Default": s.ClusterName, "Description": "EKS cluster name"},
			"CreateSpotServiceLinkedRole": map[string]any{"Type": "String", "Default": "false", "AllowedValues": []string{"true", "false"},
				"Description": "true when the account has no AWSServiceRoleForEC2Spot yet (creating it twice fails)"},
		},
		"Conditions": map[string]any{"CreateSpotServiceLinkedRole": map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "CreateSpotServiceLinkedRole"}, "true"}}},
		"Resources":  resources,
	}
	if len(notes) > 0 || len(r.Warnings) > 0 {
		template["Metadata"] = map[string]any{"karpool": map[string]any{"manualSteps": notes, "warnings": r.Warnings}}
	}
	raw, err := json.Marshal(template)
	if err != nil {
		return nil, err
	}
	var generic any
	err = json.Unmarshal(raw, &generic)
	return generic, err
}

// cfnResources are the template's resources, and the steps CloudFormation cannot take.
func cfnResources(r *Resources) (map[string]any, []string, error) {
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
	def, err := r.Settings.role("AWS settings: node role", r.Settings.NodeRole)
	if err != nil {
		return nil, nil, err
	}
	for _, role := range r.NodeRoles {
		id := "KarpenterNodeRole"
		if role.Name != def.name {
			id = "NodeRole" + logicalID(role.Name)
		}
		add(id, "AWS::IAM::Role", map[string]any{"RoleName": role.Name, "Path": role.Path, "AssumeRolePolicyDocument": role.Trust,
			"ManagedPolicyArns": role.ManagedPolicyARNs, "Tags": cfnTags(role.Tags)})
	}
	for _, p := range r.InstanceProfiles {
		add("InstanceProfile"+logicalID(p.NodeClass), "AWS::IAM::InstanceProfile", map[string]any{"InstanceProfileName": p.Name, "Path": "/", "Roles": []string{p.Role}})
	}
	var refs []any
	for _, p := range r.ControllerPolicies {
		id := p.ID()
		add(id, "AWS::IAM::ManagedPolicy", map[string]any{"ManagedPolicyName": p.Name, "Path": "/", "PolicyDocument": p.Document.JSON()})
		refs = append(refs, map[string]any{"Ref": id})
	}
	add("KarpenterControllerRole", "AWS::IAM::Role", map[string]any{"RoleName": r.ControllerRole.Name, "Path": r.ControllerRole.Path,
		"AssumeRolePolicyDocument": r.ControllerRole.Trust, "ManagedPolicyArns": refs, "Tags": cfnTags(r.ControllerRole.Tags)})
	add("KarpenterInterruptionQueue", "AWS::SQS::Queue", map[string]any{"QueueName": r.Queue.Name,
		"MessageRetentionPeriod": r.Queue.RetentionSeconds, "SqsManagedSseEnabled": r.Queue.ManagedSSE, "Tags": cfnTags(r.Queue.Tags)})
	add("KarpenterInterruptionQueuePolicy", "AWS::SQS::QueuePolicy", map[string]any{"Queues": []any{map[string]any{"Ref": "KarpenterInterruptionQueue"}},
		"PolicyDocument": r.Queue.Policy})
	for _, rule := range r.Rules {
		var pattern any
		if err := json.Unmarshal([]byte(rule.Pattern), &pattern); err != nil {
			return nil, nil, fmt.Errorf("rule %s: %w", rule.Kind, err)
		}
		// CloudFormation names the rules, as in Karpenter's template: names of long clusters
		// would not fit.
		add(logicalID(rule.Kind)+"Rule", "AWS::Events::Rule", map[string]any{"EventPattern": pattern,
			"Targets": []any{map[string]any{"Id": rule.TargetID, "Arn": map[string]any{"Fn::GetAtt": []string{"KarpenterInterruptionQueue", "Arn"}}}}})
	}
	var notes []string
	for i, a := range r.NodeAccess {
		if a.Mode == AccessEntry {
			add(fmt.Sprintf("NodeAccessEntry%d", i+1), "AWS::EKS::AccessEntry", map[string]any{"ClusterName": r.Settings.ClusterName, "PrincipalArn": a.RoleARN, "Type": a.EntryType})
			continue
		}
		notes = append(notes, fmt.Sprintf("add to the aws-auth ConfigMap's mapRoles: {rolearn: %s, username: %q, groups: [%s]}", a.RoleARN, a.Username, strings.Join(a.Groups, ", ")))
	}
	if pi := r.PodIdentity; pi != nil {
		add("KarpenterControllerPodIdentity", "AWS::EKS::PodIdentityAssociation", map[string]any{"ClusterName": r.Settings.ClusterName,
			"Namespace": pi.Namespace, "ServiceAccount": pi.ServiceAccount, "RoleArn": map[string]any{"Fn::GetAtt": []string{"KarpenterControllerRole", "Arn"}}})
	}
	add("SpotServiceLinkedRole", "AWS::IAM::ServiceLinkedRole", map[string]any{"AWSServiceName": "spot.amazonaws.com"}, "Condition", "CreateSpotServiceLinkedRole")
	for _, t := range r.DiscoveryTags {
		notes = append(notes, fmt.Sprintf("tag %s with %s=%s", t.ResourceID, t.Key, t.Value))
	}
	return resources, notes, nil
}

// parameterise merges the two renderings of the template (generic JSON values) at path.
func parameterise(path string, a, b any) (any, error) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return nil, notParameterisable(path)
		}
		out := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(x)) { // the same error every time
			w, ok := y[k]
			if !ok {
				return nil, notParameterisable(path + "." + k)
			}
			var err error
			if out[k], err = parameterise(path+"."+k, x[k], w); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return nil, notParameterisable(path)
		}
		out := make([]any, len(x))
		for i := range x {
			var err error
			if out[i], err = parameterise(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	case string:
		y, ok := b.(string)
		switch {
		case !ok:
			return nil, notParameterisable(path)
		case x == y:
			return x, nil
		}
		return substitution(path, x, y)
	}
	if a != b {
		return nil, notParameterisable(path)
	}
	return a, nil
}

// substitution is the Fn::Sub of a string rendered as x with the first sentinels and as y with
// the second: where x and y differ is the cluster name or account, the rest is literal.
func substitution(path, x, y string) (any, error) {
	if len(x) != len(y) {
		return nil, notParameterisable(path)
	}
	var b strings.Builder
	for i := 0; i < len(x); {
		switch {
		case strings.HasPrefix(x[i:], clusterSentinels[0]) && strings.HasPrefix(y[i:], clusterSentinels[1]):
			b.WriteString("${ClusterName}")
			i += len(clusterSentinels[0])
		case strings.HasPrefix(x[i:], accountSentinels[0]) && strings.HasPrefix(y[i:], accountSentinels[1]):
			b.WriteString("${AWS::AccountId}")
			i += len(accountSentinels[0])
		case x[i] != y[i]:
			return nil, notParameterisable(path)
		case strings.HasPrefix(x[i:], "${"):
			b.WriteString("${!") // Fn::Sub writes ${!X} as the literal ${X}
			i += 2
		default:
			b.WriteByte(x[i])
			i++
		}
	}
	return map[string]any{"Fn::Sub": b.String()}, nil
}

func notParameterisable(path string) error {
	return fmt.Errorf("CloudFormation: %s depends on the cluster name or account in a way the template cannot parameterise (the input holds one of %s, %s, %s or %s, which stand for them): render --format terraform-json or json instead",
		strings.TrimPrefix(path, "."), clusterSentinels[0], clusterSentinels[1], accountSentinels[0], accountSentinels[1])
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
